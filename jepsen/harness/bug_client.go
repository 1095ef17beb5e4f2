//go:build jepsen_bug

package harness

import (
	"context"
	"fmt"
	"sync"

	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/jepsen/workload"
)

// Planted client bugs, to prove the checkers catch what they claim to
// (bug_test.go). Each replaces one operation kind with a broken one.
func init() {
	bugs["stale-read"] = func(kinds []workload.Kind) []workload.Kind {
		return replace(kinds, history.FRead, staleRead())
	}
	bugs["lost-ack"] = func(kinds []workload.Kind) []workload.Kind {
		return replace(kinds, history.FFaucet, lostAck)
	}
	bugs["double-apply"] = func(kinds []workload.Kind) []workload.Kind {
		return replace(kinds, history.FFaucet, doubleApply)
	}
}

func replace(kinds []workload.Kind, name string, run func(context.Context, *workload.Env, *workload.Process, *workload.Account) history.Type) []workload.Kind {
	out := append([]workload.Kind(nil), kinds...)
	for i := range out {
		if out[i].Name == name {
			out[i].Run = run
		}
	}
	return out
}

// staleRead answers every other read from the first balance it ever saw
// for the account, as a cache that is never invalidated would.
func staleRead() func(context.Context, *workload.Env, *workload.Process, *workload.Account) history.Type {
	var mu sync.Mutex
	first := map[string]int64{}
	n := 0
	return func(ctx context.Context, e *workload.Env, p *workload.Process, acct *workload.Account) history.Type {
		mu.Lock()
		v, cached := first[acct.ID]
		n++
		serveStale := cached && n%2 == 0
		mu.Unlock()
		if !serveStale {
			t, v := workload.ReadBalanceValue(ctx, e, p, acct)
			if t == history.OK {
				mu.Lock()
				if _, ok := first[acct.ID]; !ok {
					first[acct.ID] = *v
				}
				mu.Unlock()
			}
			return t
		}
		inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FRead, Account: acct.ID})
		e.Rec.Complete(inv, history.Op{Type: history.OK, Status: 200, Msat: history.Int64(v)})
		return history.OK
	}
}

// lostAck acknowledges every third grant without sending it: a write the
// client was told succeeded and that never happened.
func lostAck(ctx context.Context, e *workload.Env, p *workload.Process, acct *workload.Account) history.Type {
	if p.Rand.Intn(3) != 0 {
		return workload.Faucet(ctx, e, p, acct)
	}
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FFaucet, Account: acct.ID, IdemKey: "jepsen-lost-ack"})
	e.Rec.Complete(inv, history.Op{Type: history.OK, Status: 201, Msat: history.Int64(1_000_000_000)})
	return history.OK
}

// doubleApply sends every third grant twice under two idempotency keys but
// records only one: what a server that loses track of idempotency does.
func doubleApply(ctx context.Context, e *workload.Env, p *workload.Process, acct *workload.Account) history.Type {
	t := workload.Faucet(ctx, e, p, acct)
	if t == history.OK && p.Rand.Intn(3) == 0 {
		e.Client.Faucet(ctx, p.Node, acct.APIKey, fmt.Sprintf("jepsen-double-%016x", p.Rand.Uint64()))
	}
	return t
}
