package boundedlog

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/internal/testlog"
)

// A burst, then PerMin a minute, the left-out lines counted on the next
// one; a line is cut and made valid UTF-8; the caller's fields are kept.
func TestLinesAreBounded(t *testing.T) {
	var buf testlog.Buffer
	l := New(hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true}), "handshake")
	now := time.Unix(1_800_000_000, 0)
	l.now = func() time.Time { return now }
	for i := 0; i < 1000; i++ {
		if n, err := l.Write([]byte("tls: first record does not look like a TLS handshake\n")); err != nil || n == 0 {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if got := len(buf.JSONLines(t)); got != Burst {
		t.Fatalf("1000 errors at once logged %d lines, want the burst %d", got, Burst)
	}
	now = now.Add(time.Minute / PerMin)
	l.Warn(string(append(bytes.Repeat([]byte("x"), 5000), 0xff, 0xfe)), "remote", "192.0.2.1:4000")
	all := buf.JSONLines(t)
	last := all[len(all)-1]
	if last["suppressed"] != float64(1000-Burst) {
		t.Fatalf("the next line says suppressed=%v, want %d", last["suppressed"], 1000-Burst)
	}
	if e, _ := last["error"].(string); len(e) > MaxLineBytes+3 || !strings.HasSuffix(e, "...") {
		t.Fatalf("a 5,000-byte error logged as %d bytes", len(e))
	}
	if last["remote"] != "192.0.2.1:4000" || last["@message"] != "handshake" || last["@level"] != "warn" {
		t.Fatalf("line %v: want the caller's field, the message and warn", last)
	}
	l.Warn("one more")
	if got := len(buf.JSONLines(t)); got != Burst+1 {
		t.Fatalf("a line past the pace was logged: %d lines", got)
	}
}
