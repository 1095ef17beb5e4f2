package httpapi

import (
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestPanicLogsNoRequestHeaders: a handler's panic is answered and logged
// with its value, never with the request. gin's recovery dumped every
// header of a panic that looked like a lost connection (EPIPE, ECONNRESET,
// http.ErrAbortHandler), masking only Authorization, so the caller's
// X-API-Key reached the log.
func TestPanicLogsNoRequestHeaders(t *testing.T) {
	a, logs, _ := newLoggedAPI(t)
	const key = "pk_this_key_must_never_be_logged_0123456789"
	a.srv.Engine.GET("/boom-pipe", func(*gin.Context) {
		panic(&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)})
	})
	a.srv.Engine.GET("/boom-abort", func(*gin.Context) { panic(http.ErrAbortHandler) })
	a.srv.Engine.GET("/boom", func(*gin.Context) { panic("boom-value") })
	a.do(req{method: "GET", path: "/boom-pipe", key: key})
	a.do(req{method: "GET", path: "/boom-abort", key: key})
	r := a.do(req{method: "GET", path: "/boom", key: key})
	if r.status != http.StatusInternalServerError || r.code() != "unavailable" {
		t.Fatalf("a panic: %d %s", r.status, r.body)
	}
	out := logs.String()
	if strings.Contains(out, key) {
		t.Fatalf("the API key reached the log:\n%s", out)
	}
	if !strings.Contains(out, "boom-value") {
		t.Fatalf("the panic's value is not logged:\n%s", out)
	}
	a.seen = nil // test-only routes, not part of the description
}
