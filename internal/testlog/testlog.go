// Package testlog holds what tests of several packages use to read a
// node's log lines.
package testlog

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a log sink safe for a server's goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// JSONLines is every line written so far, each decoded as one JSON object
// (a logger with JSONFormat); a line that is not one fails t.
func (s *Buffer) JSONLines(t testing.TB) []map[string]any {
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

// HandshakeFlood opens n connections to a TLS listener at addr, each sending
// a plain-text HTTP request and dropping after the answer or the close: n
// failed handshakes, the log lines a stranger can cause.
func HandshakeFlood(t testing.TB, addr string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Read(make([]byte, 512))
		_ = c.Close()
	}
}
