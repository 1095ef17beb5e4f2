package httpapi

import (
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"
)

// haltGuard refuses every route but /healthz once this replica halted: its
// state may hold part of the entry that broke, so nothing read from it may
// be served (not even a key lookup). Clients go to another node.
//
// Until this replica has applied the cluster's genesis, the routes that
// read or write the state refuse too (503 unavailable, Retry-After: 1): for
// the first second of a new cluster, and on a member that has not caught
// up, the state is empty, so it would answer an empty catalogue, 404 for a
// listed market and 401 for a valid key, and a write proposed then would
// enter the log before the genesis and be applied without its rules (a
// prod cluster's testnet-only signup and faucet, the signup cap). The
// catalogue follows the genesis within the same second (/healthz waits for
// both).
//
// Both refusals carry HeaderNotApplied: the guard is the first of every
// route's guards, and the engine's middleware before it (request log,
// recovery, path and body checks, index stamp) proposes nothing, so a
// write refused here certainly was not applied. A client can count it
// failed instead of unknown (the Jepsen harness does), and need not retry
// it to find out.
func (s *Server) haltGuard(r *Route) gin.HandlerFunc {
	if r.Path == healthzPath {
		return nil
	}
	stateBacked := strings.HasPrefix(r.Path, "/v1/") || r.Path == "/por" || strings.HasPrefix(r.Path, "/por/")
	return func(c *gin.Context) {
		if h := s.Node.Halted(); h != nil {
			c.Header(HeaderNotApplied, "1")
			unavailable(c, haltedMessage(h.Index))
			return
		}
		if stateBacked && !s.started.Load() {
			if msg := s.notStarted(); msg != "" {
				c.Header("Retry-After", "1")
				c.Header(HeaderNotApplied, "1")
				unavailable(c, msg)
				return
			}
		}
		c.Next()
	}
}

// HeaderNotApplied ("X-Not-Applied: 1") marks a refusal given before
// anything of the request was proposed to the log: whatever its status (a
// 503 here), the write was not applied by this request. Only haltGuard
// sets it; a 503 without it (a propose timeout, a lost leader) may hide a
// committed write. It speaks for this one request only: a client whose
// HTTP stack resent the request (Go's transport does, on a reused
// connection, for a request with an idempotency key) cannot tell from it
// whether an earlier copy was applied.
const HeaderNotApplied = "X-Not-Applied"

func haltedMessage(index uint64) string {
	return fmt.Sprintf("this replica halted on a broken invariant at log index %d and serves nothing; use another node", index)
}

// notStarted says why this replica cannot serve its state yet, or "".
// Once it can, Server.started remembers it: the genesis is never taken
// away, so the guard stops looking.
func (s *Server) notStarted() string {
	if !s.Node.StateHealth().Genesis {
		return "this node is starting: the cluster genesis is not applied here yet; retry in a moment"
	}
	s.started.Store(true)
	return ""
}
