package httpapi

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// A leader budget (order, withdraw, signup) is drawn by the leader, so a
// follower forwarded every write of a client past its budget, and each
// cost the leader a forward, a meter check and two log lines: one address
// sending signups past its budget to a follower kept a third of the
// leader's core busy (5,723 refusals in 3 s, 1.04 s of leader CPU; load
// review of 2026-11-27). The node now remembers the leader's refusal of a
// subject until its Retry-After and answers the subject's writes of that
// budget 429 itself, with the leader's figures.
func TestLeaderRefusalIsRememberedUntilItsRetryAfter(t *testing.T) {
	var calls atomic.Int64
	refuse := func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
		calls.Add(1)
		return nil, &node.RateLimitedError{Budget: "signup", Verdict: node.Verdict{Limit: 1, ResetUnix: 4_000_000_000, RetryAfterMs: 30_000}}
	}
	a := newTestAPIWith(t, []Option{WithProposer(refuse)})
	for i := 0; i < 10; i++ {
		r := a.do(req{method: "POST", path: "/v1/signup", idem: fmt.Sprint("lr-", i), body: map[string]any{}})
		if r.status != 429 || r.code() != "rate_limited" {
			t.Fatalf("signup %d: %d %s", i, r.status, r.body)
		}
		ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if ra < 29 || ra > 30 || r.header.Get("X-RateLimit-Limit") != "1" || r.header.Get("X-RateLimit-Remaining") != "0" {
			t.Fatalf("signup %d: Retry-After %q, X-RateLimit-Limit %q, Remaining %q; want the leader's 30 s, 1, 0",
				i, r.header.Get("Retry-After"), r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"))
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("10 signups past the leader's verdict reached the leader %d times, want 1", n)
	}
}
