package clustertest

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Bounds of the in-memory log of a cluster.
const (
	// maxLogKeep is how much log a cluster keeps; past it the older half
	// is dropped.
	maxLogKeep = 8 << 20
	// maxLogDump is how much of it a failed test prints.
	maxLogDump = 256 << 10
)

// logSink collects every node's log lines, so a passing test prints
// nothing and a failing one shows what the nodes saw.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func newLogSink(out io.Writer) *logSink { return &logSink{out: out} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out != nil {
		_, _ = s.out.Write(p)
	}
	if s.buf.Len()+len(p) > maxLogKeep {
		keep := s.buf.Bytes()[s.buf.Len()/2:]
		rest := append([]byte(nil), keep...)
		s.buf.Reset()
		s.buf.Write(rest)
	}
	s.buf.Write(p)
	return len(p), nil
}

func (s *logSink) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(s, format, args...)
}

func (s *logSink) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
