package cluster

import (
	stdlog "log"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/internal/boundedlog"
)

// A node server's own errors (a failed TLS handshake, an accept error, a
// handler's panic) are one line each, and by default net/http writes them
// to the standard logger: outside the node's log format and without any
// bound, so anyone who can reach a TLS listener writes one line per
// connection it opens and drops. ServerErrorLog sends them to the node's
// log at warn instead, at boundedlog's pace (a burst of 20, then 60 a
// minute, the left-out lines counted on the next).

// ServerErrorLog is an http.Server's ErrorLog writing to log, bounded.
func ServerErrorLog(log hclog.Logger) *stdlog.Logger {
	return stdlog.New(boundedlog.New(log, "http server"), "", 0)
}
