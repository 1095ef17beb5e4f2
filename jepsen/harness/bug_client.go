//go:build jepsen_bug

package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/perpd/perpd/jepsen/checker"
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
	viewBugs["replica-double-fill"] = replicaDoubleFill
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

// replicaDoubleFill makes the last node list one fill of each trader twice
// (a trigger's or a leg's when there is one), as a replica that applied
// that fill a second time would: a second fill of the same order under a
// fresh seq, opening the same contracts again, with the position and the
// free balance moved to match, so that the node's own view stays
// consistent (positions = fills, equity = deposits + fills). Only the
// other nodes and the order's single placement give it away.
func replicaDoubleFill(node string, nodes []string, v *checker.TraderView) {
	if node != nodes[len(nodes)-1] || len(v.Fills) == 0 {
		return
	}
	trigger := map[string]bool{}
	for _, o := range v.Orders {
		trigger[o.OrderID] = o.Type == "stop_market" || o.Type == "take_profit_market"
	}
	f := v.Fills[0]
	for _, g := range v.Fills {
		if trigger[g.OrderID] || strings.HasSuffix(g.OrderID, ".stop") || strings.HasSuffix(g.OrderID, ".tp") {
			f = g
			break
		}
	}
	var top uint64
	for _, g := range v.Fills {
		n, _ := strconv.ParseUint(g.Seq, 10, 64)
		top = max(top, n)
	}
	n := f.Closed + f.Opened
	again := checker.FillFinal{OrderID: f.OrderID, MarketID: f.MarketID, Buy: f.Buy, Opened: n, FeeMsat: f.FeeMsat,
		Seq: strconv.FormatUint(top+1, 10)}
	v.Fills = append([]checker.FillFinal{again}, v.Fills...)
	v.FreeMsat -= f.FeeMsat
	if !f.Buy {
		n = -n
	}
	for i := range v.Positions {
		if v.Positions[i].MarketID == f.MarketID {
			v.Positions[i].Contracts += n
			return
		}
	}
	v.Positions = append(v.Positions, checker.PositionFinal{MarketID: f.MarketID, Contracts: n})
}
