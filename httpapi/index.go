package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm/wire"
)

// hdrMinIndex and hdrConsistency are the read-barrier headers in canonical
// form (Header map keys).
const (
	hdrMinIndex    = "X-Min-Index"
	hdrConsistency = "X-Consistency"
)

// indexGuard honours X-Min-Index (read-your-writes on any node) and
// X-Consistency: linearizable (the node confirms the leader's commit index
// and waits to apply it before reading). It runs after authentication and
// the route's meter, so only a caller that may call the route can make the
// node wait; a route without a budget, or whose budget the leader draws
// only when the write is proposed (order, withdraw), draws one read token
// (per key, or per client address when public) before it waits.
func indexGuard(s *Server, r *Route) gin.HandlerFunc {
	return func(c *gin.Context) {
		for _, h := range [...]string{hdrMinIndex, hdrConsistency} {
			if len(c.Request.Header[h]) > 1 {
				// One reader takes the first, another the last: the
				// barrier kept would not be the one a proxy added or a
				// client meant, as with a doubled idempotency-key.
				invalid(c, "header "+h+" is given more than once")
				return
			}
		}
		linearizable := false
		switch c.GetHeader(hdrConsistency) {
		case "", "default":
		case "linearizable":
			linearizable = true
		default:
			invalid(c, "X-Consistency must be linearizable or default")
			return
		}
		var want uint64
		minIndex := c.GetHeader(hdrMinIndex)
		if minIndex != "" {
			var err error
			if want, err = strconv.ParseUint(minIndex, 10, 64); err != nil {
				invalid(c, "X-Min-Index must be a decimal log index")
				return
			}
		}
		if !linearizable && minIndex == "" {
			return
		}
		if (r.Budget == "" || leaderBudgets[r.Budget]) && !s.draw(c, r, s.budgets["read"]) {
			return
		}
		stamp := func() {
			stateOf(c).setHeader(c, slotRaftIndex, hdrRaftIndex, strconv.FormatUint(s.Node.Machine().Applied(), 10))
		}
		if linearizable && !stateOf(c).linearized {
			if err := s.Node.LinearizableRead(c.Request.Context()); err != nil {
				stamp()
				// err may carry the leader's id, admin address or
				// error text: logged, not relayed.
				s.log.Debug("linearizable read refused", "err", err)
				s.indexUnavailable(c, r, "cannot confirm a linearizable read right now; retry or ask another node")
				return
			}
		}
		if minIndex != "" {
			if s.Node.IndexOutOfReach(want) {
				// Far past the log this node knows of: no wait reaches
				// it, so the request is not held for the whole wait.
				stamp()
				s.indexUnavailable(c, r, "index "+minIndex+" is ahead of the log; send an index from X-Raft-Index")
				return
			}
			if err := s.Node.WaitApplied(c.Request.Context(), want); err != nil {
				stamp()
				s.indexUnavailable(c, r, "this node has not applied index "+minIndex+" yet; retry or ask another node")
				return
			}
		}
		// The key was authenticated against the state before the wait: a
		// revoke applied during it is one the client asked to see.
		if id := callerOf(c).KeyID; id != "" && !s.keyLive(id) {
			stamp()
			fail(c, http.StatusUnauthorized, wire.CodeUnauthorized, "API key is not valid (unknown or revoked)")
			return
		}
		stamp()
	}
}

// indexUnavailable answers a read barrier's 503: the error body, but on
// /healthz the health object (SPEC section 4: its 200 and 503 both carry
// it), not ok, with the barrier's message as the reason.
func (s *Server) indexUnavailable(c *gin.Context, r *Route, msg string) {
	if r.Path != healthzPath {
		unavailable(c, msg)
		return
	}
	c.AbortWithStatusJSON(http.StatusServiceUnavailable, Health{DB: s.Node.StoreProblem() == "", TsMs: wire.Int(time.Now().UnixMilli()), Reason: msg})
}
