//go:build jepsen_bug

package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/client"
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
	bugs["withdraw-twice"] = func(kinds []workload.Kind) []workload.Kind {
		return replace(kinds, history.FWithdraw, withdrawTwice)
	}
	withdrawalBugs["withdrawal-listing-dropped"] = dropWithdrawal
	withdrawalBugs["return-not-credited"] = keepReturnedMoney
}

// keepReturnedMoney makes the last node list each withdrawer's newest
// returned withdrawal (a Lightning one the simulated rail returned, as a
// rule) as returned while its free balance never got amount + fee back:
// a replica that records the rail's refusal but keeps the money. Its
// listing is right; its balance, and the other nodes, give it away.
func keepReturnedMoney(node string, nodes []string, v *checker.WithdrawerView) {
	if node != nodes[len(nodes)-1] {
		return
	}
	for _, w := range v.Withdrawals { // newest first
		if w.State == checker.WithdrawalReturned {
			v.FreeMsat -= w.AmountMsat + w.FeeMsat
			return
		}
	}
}

// withdrawTwice sends every acknowledged withdrawal a second time under a
// fresh idempotency key, recorded once: a client that retries with a new key
// (the server cannot tell it from a new withdrawal) pays twice.
func withdrawTwice(ctx context.Context, e *workload.Env, p *workload.Process, acct *workload.Account) history.Type {
	sats := workload.MinWithdrawSats + p.Rand.Int63n(workload.MaxWithdrawSats-workload.MinWithdrawSats+1)
	t := workload.WithdrawAmount(ctx, e, p, acct, sats*1000)
	if t == history.OK {
		e.Client.Withdraw(ctx, p.Node, acct.APIKey, fmt.Sprintf("jepsen-wd-again-%016x", p.Rand.Uint64()),
			client.WithdrawRequest{AmountMsat: strconv.FormatInt(sats*1000, 10), ToAddress: acct.WithdrawTo})
	}
	return t
}

// dropWithdrawal makes the last node's listing of each withdrawer leave
// out its newest withdrawal, with the balance moved to match (as if it
// had been returned without a record): the node's own sums hold; the
// acknowledged request, the other nodes and the payout book give it away.
func dropWithdrawal(node string, nodes []string, v *checker.WithdrawerView) {
	if node != nodes[len(nodes)-1] || len(v.Withdrawals) == 0 {
		return
	}
	w := v.Withdrawals[0]
	v.Withdrawals = v.Withdrawals[1:]
	if w.State != checker.WithdrawalReturned {
		v.FreeMsat += w.AmountMsat + w.FeeMsat
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

// replicaDoubleFill makes the last node list one fill of each trader twice
// (a trigger's or a leg's when there is one), as a replica that applied
// that fill a second time would: a second fill of the same order under a
// fresh seq, for the same contracts again (closing what it meets of the
// position, opening the rest), with the position and the free balance
// moved to match, so that the node's own view stays consistent (positions
// = fills and liquidations, each fill's positionAfter, equity = deposits
// + fills). Only the other nodes and the order's single placement give it
// away.
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
	for _, l := range v.Liquidations {
		n, _ := strconv.ParseUint(l.Seq, 10, 64)
		top = max(top, n)
	}
	for _, g := range v.Funding {
		n, _ := strconv.ParseUint(g.Seq, 10, 64)
		top = max(top, n)
	}
	at := -1
	for i := range v.Positions {
		if v.Positions[i].MarketID == f.MarketID {
			at = i
		}
	}
	if at < 0 {
		v.Positions = append(v.Positions, checker.PositionFinal{MarketID: f.MarketID})
		at = len(v.Positions) - 1
	}
	p := &v.Positions[at]
	n, d := f.Closed+f.Opened, f.Closed+f.Opened
	if !f.Buy {
		d = -d
	}
	closed := int64(0)
	if p.Contracts != 0 && (p.Contracts > 0) != f.Buy {
		closed = min(n, max(p.Contracts, -p.Contracts))
	}
	p.Contracts += d
	again := checker.FillFinal{OrderID: f.OrderID, MarketID: f.MarketID, Buy: f.Buy, Closed: closed, Opened: n - closed,
		FeeMsat: f.FeeMsat, AfterContracts: p.Contracts, AfterMarginMsat: p.MarginMsat, Seq: strconv.FormatUint(top+1, 10)}
	if p.Contracts == 0 {
		// Flat: the margin goes back to free with the position.
		v.FreeMsat += p.MarginMsat
		again.AfterMarginMsat = 0
		v.Positions = append(v.Positions[:at], v.Positions[at+1:]...)
	}
	v.Fills = append([]checker.FillFinal{again}, v.Fills...)
	v.FreeMsat -= f.FeeMsat
}
