package cluster

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"

	"github.com/perpd/perpd/internal/testlog"
)

type syncBuffer struct{ testlog.Buffer }

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func jsonLogger(w *syncBuffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: w, JSONFormat: true, Level: hclog.Info})
}

// A server's own error lines are bounded: a burst, then ServerErrorsPerMin
// a minute, the left-out ones counted on the next line; a line is cut and
// made valid UTF-8.
func TestServerErrorLogIsBounded(t *testing.T) {
	var buf syncBuffer
	now := time.Unix(1_800_000_000, 0)
	w := &serverErrorWriter{log: jsonLogger(&buf), lim: rate.NewLimiter(rate.Every(time.Minute/ServerErrorsPerMin), ServerErrorsBurst), now: func() time.Time { return now }}
	for i := 0; i < 1000; i++ {
		if n, err := w.Write([]byte("http: TLS handshake error from 192.0.2.1:4000: EOF\n")); err != nil || n == 0 {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if got := len(buf.lines(t)); got != ServerErrorsBurst {
		t.Fatalf("1000 errors at once logged %d lines, want the burst %d", got, ServerErrorsBurst)
	}
	now = now.Add(time.Minute / ServerErrorsPerMin)
	long := append(bytes.Repeat([]byte("x"), 5000), 0xff, 0xfe)
	_, _ = w.Write(long)
	lines := buf.lines(t)
	last := lines[len(lines)-1]
	if last["suppressed"] != float64(1000-ServerErrorsBurst) {
		t.Fatalf("the next line says suppressed=%v, want %d", last["suppressed"], 1000-ServerErrorsBurst)
	}
	if e, _ := last["error"].(string); len(e) > maxServerErrorBytes+3 || !strings.HasSuffix(e, "...") {
		t.Fatalf("a 5,000-byte error logged as %d bytes", len(e))
	}
}

// A TLS listener's handshake failures go through the node's log, bounded.
// Before, net/http wrote one line per failed connection to the standard
// logger: 300 plain-text connections to a TLS port made 300 lines.
func TestHandshakeFloodLogsBoundedLines(t *testing.T) {
	var buf syncBuffer
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config = NewHTTPServer(srv.Config.Handler, DefaultTimeouts, nil)
	srv.Config.ErrorLog = ServerErrorLog(jsonLogger(&buf))
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for i := 0; i < 300; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Read(make([]byte, 512)) // the server's answer or close
		_ = c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(buf.lines(t)) < ServerErrorsBurst && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lines := buf.lines(t)
	if len(lines) < 1 || len(lines) > ServerErrorsBurst+1 {
		t.Fatalf("300 failed handshakes logged %d lines, want 1 to %d", len(lines), ServerErrorsBurst+1)
	}
	if e, _ := lines[0]["error"].(string); !strings.Contains(e, "TLS handshake error") {
		t.Fatalf("first line %v, want a TLS handshake error", lines[0])
	}
}
