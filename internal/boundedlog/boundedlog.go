// Package boundedlog bounds log lines that someone outside the cluster can
// cause: one per connection they open and drop (a failed TLS handshake on a
// server or on the raft transport). Unbounded, anyone who can reach a port
// writes the node's log as fast as they can connect.
package boundedlog

import (
	"bytes"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"
)

const (
	// PerMin and Burst are the default pace: a burst of Burst lines, then
	// PerMin a minute.
	PerMin = 60
	Burst  = 20
	// MaxLineBytes bounds one line's error text (net/http quotes what the
	// peer sent in some of them).
	MaxLineBytes = 512
)

// Logger writes warn lines with one message to log at a bounded pace. The
// lines left out are counted, and the next line logged carries the count
// (suppressed=N).
type Logger struct {
	log        hclog.Logger
	msg        string
	now        func() time.Time
	mu         sync.Mutex
	lim        *rate.Limiter
	suppressed uint64
}

// New is a Logger of msg at the default pace.
func New(log hclog.Logger, msg string) *Logger {
	return &Logger{log: log, msg: msg, now: time.Now, lim: rate.NewLimiter(rate.Every(time.Minute/PerMin), Burst)}
}

// Warn logs msg with the error text err (cut at MaxLineBytes, made valid
// UTF-8) and args, unless the pace is spent.
func (l *Logger) Warn(err string, args ...any) {
	l.mu.Lock()
	if !l.lim.AllowN(l.now(), 1) {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	line := bytes.TrimSpace([]byte(err))
	if len(line) > MaxLineBytes {
		line = append(line[:MaxLineBytes:MaxLineBytes], "..."...)
	}
	all := append([]any{"error", string(bytes.ToValidUTF8(line, []byte("?")))}, args...)
	if suppressed > 0 {
		all = append(all, "suppressed", suppressed)
	}
	l.log.Warn(l.msg, all...)
}

// Write logs p as one line's error text, for a standard library logger
// (an http.Server's ErrorLog). It never fails.
func (l *Logger) Write(p []byte) (int, error) {
	l.Warn(string(p))
	return len(p), nil
}
