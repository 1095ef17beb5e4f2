package httpapi

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/trade"
)

// A cancel names its order in the path, which nothing bounded but the
// request line's limit (1 MB until the load review of 2026-11-27), and
// every cancel that reached the state machine became a log entry carrying
// the id, replicated to every member, for an order that could not exist:
// an order's id is its idempotency key (at most MaxIdemKeyLen printable
// characters), a bracket leg's that plus a suffix. An id no order can
// have is answered 404 at once, without a log entry; a well-formed
// unknown id still goes to the state machine.
func TestCancelOfAnImpossibleOrderIDWritesNothing(t *testing.T) {
	var a *testAPI
	var cancels atomic.Int64
	a = newTestAPIWith(t, []Option{WithProposer(func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
		if cmd.Type == fsm.CmdCancelOrder {
			cancels.Add(1)
		}
		return a.node.Propose(ctx, cmd)
	})})
	key, _ := a.signup()
	for _, id := range []string{strings.Repeat("a", MaxIdemKeyLen+len(trade.StopLegSuffix)+1), strings.Repeat("b", 30_000), "tab%09in-it"} {
		before := cancels.Load()
		r := a.do(req{method: "DELETE", path: "/v1/orders/" + id, key: key, idem: nextIdem()})
		if r.status != 404 || r.code() != "not_found" {
			t.Fatalf("cancel of a %d-character id: %d %s", len(id), r.status, r.body)
		}
		if len(r.body) > 200 {
			t.Fatalf("the refusal echoes the id: %d bytes", len(r.body))
		}
		if cancels.Load() != before {
			t.Fatalf("cancel of a %d-character id was proposed to the log", len(id))
		}
	}
	// The longest id an order can have is judged by the state machine.
	long := strings.Repeat("c", MaxIdemKeyLen) + trade.StopLegSuffix
	before := cancels.Load()
	if r := a.do(req{method: "DELETE", path: "/v1/orders/" + long, key: key, idem: nextIdem()}); r.status != 404 {
		t.Fatalf("cancel of an unknown well-formed id: %d %s", r.status, r.body)
	}
	if cancels.Load() != before+1 {
		t.Fatalf("a well-formed unknown id did not reach the state machine")
	}
}
