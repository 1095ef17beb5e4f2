package cluster

import (
	"bytes"
	stdlog "log"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"
)

// A node server's own errors (a failed TLS handshake, an accept error, a
// handler's panic) are one line each, and by default net/http writes them
// to the standard logger: outside the node's log format and without any
// bound, so anyone who can reach a TLS listener writes one line per
// connection it opens and drops. ServerErrorLog sends them to the node's
// log at warn instead, at most ServerErrorsPerMin a minute after a burst
// of ServerErrorsBurst; the lines left out are counted and the next line
// logged carries the count (suppressed=N).
const (
	ServerErrorsPerMin = 60
	ServerErrorsBurst  = 20
	// maxServerErrorBytes bounds one line (net/http quotes what the peer
	// sent in some of them).
	maxServerErrorBytes = 512
)

// ServerErrorLog is an http.Server's ErrorLog writing to log, bounded.
func ServerErrorLog(log hclog.Logger) *stdlog.Logger {
	return stdlog.New(&serverErrorWriter{log: log, lim: rate.NewLimiter(rate.Every(time.Minute/ServerErrorsPerMin), ServerErrorsBurst), now: time.Now}, "", 0)
}

type serverErrorWriter struct {
	log        hclog.Logger
	now        func() time.Time
	mu         sync.Mutex
	lim        *rate.Limiter
	suppressed uint64
}

func (w *serverErrorWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if !w.lim.AllowN(w.now(), 1) {
		w.suppressed++
		w.mu.Unlock()
		return len(p), nil
	}
	suppressed := w.suppressed
	w.suppressed = 0
	w.mu.Unlock()
	line := bytes.TrimSpace(p)
	if len(line) > maxServerErrorBytes {
		line = append(line[:maxServerErrorBytes:maxServerErrorBytes], "..."...)
	}
	args := []any{"error", string(bytes.ToValidUTF8(line, []byte("?")))}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	w.log.Warn("http server", args...)
	return len(p), nil
}
