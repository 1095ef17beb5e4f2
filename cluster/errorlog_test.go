package cluster

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/internal/boundedlog"
	"github.com/perpd/perpd/internal/testlog"
)

func jsonLogger(w *testlog.Buffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: w, JSONFormat: true, Level: hclog.Info})
}

// A TLS listener's handshake failures go through the node's log, bounded.
// Before, net/http wrote one line per failed connection to the standard
// logger: 300 plain-text connections to a TLS port made 300 lines.
func TestHandshakeFloodLogsBoundedLines(t *testing.T) {
	var buf testlog.Buffer
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config = NewHTTPServer(srv.Config.Handler, DefaultTimeouts, nil)
	srv.Config.ErrorLog = ServerErrorLog(jsonLogger(&buf))
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	testlog.HandshakeFlood(t, addr, 300)
	deadline := time.Now().Add(5 * time.Second)
	for len(buf.JSONLines(t)) < boundedlog.Burst && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lines := buf.JSONLines(t)
	if len(lines) < 1 || len(lines) > boundedlog.Burst+1 {
		t.Fatalf("300 failed handshakes logged %d lines, want 1 to %d", len(lines), boundedlog.Burst+1)
	}
	if e, _ := lines[0]["error"].(string); !strings.Contains(e, "TLS handshake error") {
		t.Fatalf("first line %v, want a TLS handshake error", lines[0])
	}
}
