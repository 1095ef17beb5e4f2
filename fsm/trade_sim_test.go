package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// TestRandomTradingKeepsTheBooksStraight trades randomly from several
// accounts over a random price path with jumps, checking after every entry
// (tradeWorld.at): ledger conservation and no negative balance outside the
// house, reserved == what resting orders reserve, margin balances ==
// positions' margin, open interest == positions. It also checks that each
// position is the sum of its fills' signed contracts, that a replica fed the
// same entries reaches the same state hash, and that a snapshot restores it.
func TestRandomTradingKeepsTheBooksStraight(t *testing.T) {
	entries := 3000
	if testing.Short() {
		entries = 600
	}
	a, b := runTradeSim(t, 7, entries), runTradeSim(t, 7, entries)
	if a.hash() != b.hash() {
		t.Fatal("same entries, different states")
	}
	snap, err := a.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(Options{CheckInvariants: true})
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if _, h, _ := m.StateHash(); h != a.hash() {
		t.Fatal("restored state hashes differently")
	}
}

func runTradeSim(t *testing.T, seed uint64, entries int) *tradeWorld {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	w := newTradeWorld(t)
	type acctKey struct{ acct, key string }
	var accts []acctKey
	for i := 0; i < 8; i++ {
		a, k := w.account(btcBTC / 20)
		accts = append(accts, acctKey{a, k})
	}
	mids := map[string]int64{"BTCUSD": usdQ8(100_000), "ETHUSD": usdQ8(3_400)}
	feedOf := map[string]string{"BTC-PERP": "BTCUSD", "ETH-PERP": "ETHUSD"}
	ticks := map[string]int64{"BTC-PERP": market.DefaultCatalogue()[0].TickSizeQ8, "ETH-PERP": market.DefaultCatalogue()[1].TickSizeQ8}
	net := map[string]int64{} // account/market -> signed contracts from fills
	var open []struct{ acct, key, id string }
	tally := map[string]int{}
	w.events = nil
	for i := 0; i < entries; i++ {
		ak := accts[rng.IntN(len(accts))]
		mkt := []string{"BTC-PERP", "ETH-PERP"}[rng.IntN(2)]
		side := []string{"buy", "sell"}[rng.IntN(2)]
		id := fmt.Sprintf("o%d", i)
		var res *Result
		switch op := rng.IntN(10); {
		case op < 3: // a print; one in twenty jumps 5%
			feed := []string{"BTCUSD", "ETHUSD"}[rng.IntN(2)]
			step := mids[feed] / 1000
			if rng.IntN(20) == 0 {
				step = mids[feed] / 20
			}
			mids[feed] += (rng.Int64N(2*step+1) - step)
			res = w.print(feed, mids[feed])
		case op < 6:
			r := mktOrder(id, mkt, side, rng.Int64N(500_000)+1)
			r.ReduceOnly = rng.IntN(4) == 0
			res = w.order(ak.acct, ak.key, r)
		case op < 9:
			mid := mids[feedOf[mkt]]
			off := (rng.Int64N(41) - 20) * mid / 1000
			limit := (mid + off) / ticks[mkt] * ticks[mkt]
			r := limitOrder(id, mkt, side, rng.Int64N(500_000)+1, max(limit, ticks[mkt]))
			r.ReduceOnly = rng.IntN(4) == 0
			res = w.order(ak.acct, ak.key, r)
			if res.OK() {
				open = append(open, struct{ acct, key, id string }{ak.acct, ak.key, id})
			}
		default:
			if len(open) == 0 {
				continue
			}
			j := rng.IntN(len(open))
			o := open[j]
			open = append(open[:j], open[j+1:]...)
			res = w.cancel(o.acct, o.key, o.id, "c"+id)
		}
		tally[res.Code]++
		for _, ev := range w.events {
			if ev.Kind == "fill" {
				f := ev.Data.(trade.FillView)
				q := int64(f.ClosedContracts + f.OpenedContracts)
				if f.Side == "sell" {
					q = -q
				}
				net[f.AccountID+"/"+f.MarketID] += q
				checkSimFill(t, w, f)
				if f.ReservedMarginMsat > 0 {
					tally["resting order filled"]++
				}
			}
			if ev.Kind == "order" {
				if o := ev.Data.(trade.OrderView); o.Status == trade.StatusCanceled && o.Reason != nil {
					tally["canceled: "+*o.Reason]++
				}
			}
		}
		w.events = nil
		for _, ak := range accts {
			for _, mkt := range []string{"BTC-PERP", "ETH-PERP"} {
				p := w.position(ak.acct, mkt)
				if got := int64(p.Side) * p.Contracts; got != net[ak.acct+"/"+mkt] {
					t.Fatalf("entry %d: %s %s position %d, fills sum to %d", i, ak.acct, mkt, got, net[ak.acct+"/"+mkt])
				}
			}
		}
	}
	// The run must exercise fills and the main refusals, or it proves little.
	var fills int
	w.m.Read(func(st *State, _ uint64) {
		for _, a := range st.Trade.Accounts {
			fills += len(a.Fills)
		}
	})
	if fills < entries/10 || tally[wire.CodeReduceOnly] == 0 || tally[wire.CodeInsufficientMargin] == 0 ||
		tally["resting order filled"] == 0 || tally["canceled: reduce_only"] == 0 {
		t.Fatalf("weak run: %d fills, outcomes %v", fills, tally)
	}
	t.Logf("%d fills, outcomes %v", fills, tally)
	return w
}

// checkSimFill checks a fill's figures against each other and against its
// order: the notional and fee recomputed from the execution price, the
// price on the tick and on the venue's side of the mid, and a resting
// order's fill no worse than its limit.
func checkSimFill(t *testing.T, w *tradeWorld, f trade.FillView) {
	t.Helper()
	var p market.Params
	var o trade.Order
	w.m.Read(func(st *State, _ uint64) {
		p = st.Market.MarketsByID[f.MarketID].Params
		oo, ok := st.Trade.Order(f.AccountID, f.OrderID)
		if !ok {
			t.Fatalf("fill of unknown order %s/%s", f.AccountID, f.OrderID)
		}
		o = *oo
	})
	q, exec, mid := int64(f.ClosedContracts+f.OpenedContracts), int64(f.ExecPriceQ8), int64(f.Oracle.MidQ8)
	notional, _ := trade.NotionalMsat(&p, q, exec)
	fee, _ := trade.TakerFeeMsat(notional, p.TakerFeeQ9)
	buy := f.Side == "buy"
	switch {
	case int64(f.TradeNotionalMsat) != notional || int64(f.FeeMsat) != fee:
		t.Fatalf("fill %+v: notional %d fee %d", f, notional, fee)
	case exec%p.TickSizeQ8 != 0 || int64(f.SpreadQ9) < p.BaseSpreadQ9:
		t.Fatalf("fill %+v: off the tick or below the base spread", f)
	case (buy && exec < mid) || (!buy && exec > mid):
		t.Fatalf("fill %+v: on the trader's side of the mid", f)
	case o.Type == trade.TypeLimit && ((buy && exec > o.LimitQ8) || (!buy && exec < o.LimitQ8)):
		t.Fatalf("fill %+v: worse than the limit %d", f, o.LimitQ8)
	case f.Referral != nil || f.RebateDivertedMsat != 0 || f.FundingSettledMsat != 0:
		t.Fatalf("fill %+v: referral or funding figures before those exist", f)
	}
}
