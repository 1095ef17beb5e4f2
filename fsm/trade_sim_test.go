package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// TestRandomTradingKeepsTheBooksStraight is the deterministic trading
// simulation: thousands of accounts place every order type (market, limit,
// stop, take-profit, entry triggers, brackets with market and trigger
// entries and partial legs, reduce-only variants), cancel, arm and let
// lapse the dead-man switch, over a long random price path with jumps and
// time gaps. After every entry (tradeWorld.at) it checks: ledger
// conservation and no negative balance outside the house (the machine's
// own check), reserved == what resting orders reserve, margin balances ==
// positions' margin, open interest == positions, every live order indexed
// once (CheckInvariants); the positions the entry touched == the sum of
// their fills; a second replica fed the same bytes answered the same (its
// state hash is compared every hashEvery entries and at the end). Each
// fill is checked against its order (price on the tick and the venue's
// side, limit respected, trigger level reached) and each OCO group
// executes at most one leg. A snapshot of the end state restores to the
// same hash.
func TestRandomTradingKeepsTheBooksStraight(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	cfg := simConfig{seed: 7, accounts: 2000, hot: 60, entries: 12_000, hashEvery: 1000}
	if testing.Short() {
		cfg.accounts, cfg.entries = 300, 2000
	}
	w := runTradeSim(t, cfg)
	snap, err := w.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(Options{CheckInvariants: true})
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if _, h, _ := m.StateHash(); h != w.hash() {
		t.Fatal("restored state hashes differently")
	}
}

// TestRandomTradingWithBooksLeftBehind is the simulation with every act on
// a book stopped at a few units (trade.LevelBookBudget), so books are left
// behind and continued at the next entries all the time: every check holds
// as with whole acts (fills no worse than their limits, triggers only at a
// mid that reached them, the invariants after every entry, the mirror's
// answers and hashes, a restore).
func TestRandomTradingWithBooksLeftBehind(t *testing.T) {
	defer trade.SetBookActBudgetForTest(3)() // not parallel: the budget is one variable
	cfg := simConfig{seed: 11, accounts: 400, hot: 60, entries: 4000, hashEvery: 500, behind: true}
	if testing.Short() {
		cfg.accounts, cfg.entries = 200, 1500
	}
	runTradeSim(t, cfg)
}

type simConfig struct {
	seed uint64
	// accounts trade; the first hot of them take most of the flow, so
	// positions build up and triggers meet them.
	accounts, hot int
	entries       int
	hashEvery     int
	keepLog       bool
	// behind counts the entries after which a book was left behind
	// (trade.LevelBookBudget), and wants some.
	behind bool
}

type simAcct struct{ acct, key string }

// simOrder is a live order, trigger or bracket the simulation may cancel.
type simOrder struct {
	simAcct
	id string
}

func runTradeSim(t *testing.T, cfg simConfig) *tradeWorld {
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed+1))
	w := newTradeWorld(t)
	w.mirror = newMarketMirror(t)
	w.syncMirror()
	w.hashEvery = cfg.hashEvery
	w.keepLog = cfg.keepLog

	var accts []simAcct
	for i := 0; i < cfg.accounts; i++ {
		a, k := w.account(btcBTC/50 + rng.Int64N(btcBTC/10))
		accts = append(accts, simAcct{a, k})
	}
	pick := func() simAcct {
		if rng.IntN(5) > 0 {
			return accts[rng.IntN(cfg.hot)]
		}
		return accts[rng.IntN(len(accts))]
	}
	mids := map[string]int64{"BTCUSD": usdQ8(100_000), "ETHUSD": usdQ8(3_400)}
	starts := map[string]int64{"BTCUSD": mids["BTCUSD"], "ETHUSD": mids["ETHUSD"]}
	// leverage picks an order's leverage: the market's most (0) half the
	// time, else 2 to 100.
	leverage := func() int64 {
		if rng.IntN(2) == 0 {
			return 0
		}
		return rng.Int64N(99) + 2
	}
	feedOf := map[string]string{"BTC-PERP": "BTCUSD", "ETH-PERP": "ETHUSD"}
	ticks := map[string]int64{"BTC-PERP": market.DefaultCatalogue()[0].TickSizeQ8, "ETH-PERP": market.DefaultCatalogue()[1].TickSizeQ8}
	// level returns a price off the mid by off per mille, on the tick.
	level := func(mkt string, off int64) int64 {
		mid := mids[feedOf[mkt]]
		l := (mid + off*mid/1000) / ticks[mkt] * ticks[mkt]
		return max(l, ticks[mkt])
	}
	net := map[string]int64{} // account/market -> signed contracts from fills
	var live []simOrder
	tally := map[string]int{}
	// account/order id -> contracts its fills moved (a bracket's entry),
	// and account/bracket id -> contracts its legs' fills closed: from
	// LevelPartialLegsKeepSibling both legs may execute, the second only
	// for what the first left, so the legs never close more than the
	// entry opened.
	// From LevelLegsSizedToEntry the legs never close more than the entry
	// opened on its side either (openedN: an entry that first closed an
	// opposite position opens less than its contracts).
	filledN, openedN, legsClosed := map[string]int64{}, map[string]int64{}, map[string]int64{}
	w.events = nil
	for i := 0; i < cfg.entries; i++ {
		ak := pick()
		mkt := []string{"BTC-PERP", "ETH-PERP"}[rng.IntN(2)]
		side := []string{"buy", "sell"}[rng.IntN(2)]
		id := fmt.Sprintf("o%d", i)
		size := rng.Int64N(200_000) + 1
		var res *Result
		switch op := rng.IntN(100); {
		case op < 25: // a print; one in twenty jumps up to 5%, one in 300 crashes or spikes up to 40%
			feed := []string{"BTCUSD", "ETHUSD"}[rng.IntN(2)]
			step := mids[feed] / 1000
			if rng.IntN(20) == 0 {
				step = mids[feed] / 20
			}
			if rng.IntN(300) == 0 {
				step = mids[feed] * 2 / 5
			}
			mids[feed] += rng.Int64N(2*step+1) - step
			mids[feed] = min(max(mids[feed], starts[feed]/4), starts[feed]*4) // keep the walk in a sane range
			res = w.print(feed, mids[feed])
		case op < 45:
			r := mktOrder(id, mkt, side, size)
			r.ReduceOnly, r.Leverage = rng.IntN(4) == 0, leverage()
			if rng.IntN(10) == 0 {
				r.HasMaxSlippage, r.MaxSlippageQ9 = true, rng.Int64N(2_000_000)
			}
			res = w.order(ak.acct, ak.key, r)
		case op < 60:
			r := limitOrder(id, mkt, side, size, level(mkt, rng.Int64N(41)-20))
			r.ReduceOnly, r.Leverage = rng.IntN(4) == 0, leverage()
			res = w.order(ak.acct, ak.key, r)
		case op < 70: // a standalone stop or take-profit, mostly reduce-only
			r := stopOrder(id, mkt, side, size, 0)
			if rng.IntN(2) == 0 {
				r.Type = trade.TypeTakeProfitMarket
			}
			r.TriggerPriceQ8 = level(mkt, rng.Int64N(61)-30)
			r.ReduceOnly = rng.IntN(10) < 7
			if rng.IntN(10) == 0 {
				r.HasMaxSlippage, r.MaxSlippageQ9 = true, rng.Int64N(2_000_000)
			}
			res = w.order(ak.acct, ak.key, r)
		case op < 75:
			r := entryOrder(id, mkt, side, size, level(mkt, rng.Int64N(61)-30))
			r.Leverage = leverage()
			res = w.order(ak.acct, ak.key, r)
		case op < 85: // a bracket, market or trigger entry, legs 10-30 per mille away
			r := bracket(id, side, size, 0, 0, 0)
			r.MarketID, r.Leverage = mkt, leverage()
			ref, dir := int64(0), int64(1)
			if side == "sell" {
				dir = -1
			}
			if rng.IntN(2) == 0 {
				ref = rng.Int64N(31) - 15
				r.Bracket.EntryKind, r.Bracket.EntryLevelQ8 = trade.BracketEntryTrigger, level(mkt, ref)
			}
			if rng.IntN(4) > 0 {
				r.Bracket.StopLevelQ8 = level(mkt, ref-dir*(rng.Int64N(21)+10))
				if rng.IntN(3) == 0 {
					r.Bracket.StopContracts = rng.Int64N(size) + 1
				}
			}
			if r.Bracket.StopLevelQ8 == 0 || rng.IntN(4) > 0 {
				r.Bracket.TakeProfitLevelQ8 = level(mkt, ref+dir*(rng.Int64N(21)+10))
				if rng.IntN(3) == 0 {
					r.Bracket.TakeProfitContracts = rng.Int64N(size) + 1
				}
			}
			res = w.order(ak.acct, ak.key, r)
		case op < 93:
			if len(live) == 0 {
				continue
			}
			j := rng.IntN(len(live))
			o := live[j]
			live = append(live[:j], live[j+1:]...)
			res = w.cancel(o.acct, o.key, o.id, "c"+id)
		case op < 96: // the dead-man switch: arm short, or disarm
			timeout := int64(0)
			if rng.IntN(4) > 0 {
				timeout = trade.CancelAfterMinMs + rng.Int64N(4000)
			}
			res = w.at(cancelAfterCmd(t, ak.acct, ak.key, "caa"+id, timeout))
		default: // time passes: deadlines come due, and now and then a minute
			// (funding boundaries; log time moves at most a minute an entry)
			w.ts += rng.Int64N(3000)
			if rng.IntN(3) == 0 {
				w.ts += MaxClockStepMs - 3000
			}
			res = w.at(&Command{Type: CmdTick})
		}
		tally[res.Code]++
		var c trade.Created
		if res.Status == 201 && res.Decode(&c) == nil && c.Status != trade.StatusFilled {
			live = append(live, simOrder{ak, id})
		} else if c.Status == trade.StatusFilled && len(live) < 5000 && rng.IntN(2) == 0 {
			live = append(live, simOrder{ak, id}) // a filled bracket's id still cancels its legs
		}
		touched := map[string]bool{}
		for _, ev := range w.events {
			switch ev.Kind {
			case "fill":
				f := ev.Data.(trade.FillEvent).View()
				q := int64(f.ClosedContracts + f.OpenedContracts)
				if f.Side == "sell" {
					q = -q
				}
				net[f.AccountID+"/"+f.MarketID] += q
				touched[f.AccountID+"/"+f.MarketID] = true
				checkSimFill(t, w, f)
				filledN[ev.Account+"/"+f.OrderID] += int64(f.ClosedContracts + f.OpenedContracts)
				openedN[ev.Account+"/"+f.OrderID] += int64(f.OpenedContracts)
				for _, suffix := range []string{trade.StopLegSuffix, trade.TakeProfitLegSuffix} {
					if g, ok := strings.CutSuffix(f.OrderID, suffix); ok {
						g = ev.Account + "/" + g
						if legsClosed[g] += int64(f.ClosedContracts); legsClosed[g] > filledN[g] {
							t.Fatalf("entry %d: the legs of bracket %s closed %d contracts, its entry filled %d", i, g, legsClosed[g], filledN[g])
						}
						if legsClosed[g] > openedN[g] {
							t.Fatalf("entry %d: the legs of bracket %s closed %d contracts, its entry opened %d", i, g, legsClosed[g], openedN[g])
						}
					}
				}
				if f.ReservedMarginMsat > 0 {
					tally["resting order filled"]++
				}
			case "liquidation":
				l := ev.Data.(trade.LiquidationView)
				q := int64(l.ClosedContracts)
				if l.Side == "long" {
					q = -q
				}
				net[l.AccountID+"/"+l.MarketID] += q
				touched[l.AccountID+"/"+l.MarketID] = true
				tally["liquidation"]++
				if l.Partial {
					tally["liquidation partial"]++
				}
				if l.ADLTriggered {
					tally["liquidation adl"]++
				}
				if l.DeficitMsat > 0 {
					tally["liquidation deficit"]++
				}
				if l.InsuranceCoveredMsat > 0 {
					tally["liquidation insurance covered"]++
				}
			case "funding_flow":
				tally["funding flow"]++
			case "order":
				if o := ev.Data.(trade.OrderView); o.Status == trade.StatusCanceled && o.Reason != nil {
					tally["canceled: "+*o.Reason]++
				}
			case "trigger":
				v := ev.Data.(trade.TriggerView)
				tally["trigger "+v.Status]++
				if v.Reason != nil {
					tally["trigger "+v.Status+": "+*v.Reason]++
				}

			}
		}
		w.events = nil
		if cfg.behind && len(w.booksBehind()) > 0 {
			tally["book behind"]++
		}
		for k := range touched {
			acct, mkt := splitKey(k)
			p := w.position(acct, mkt)
			if got := int64(p.Side) * p.Contracts; got != net[k] {
				t.Fatalf("entry %d: %s position %d, fills sum to %d", i, k, got, net[k])
			}
		}
	}
	for _, ak := range accts {
		for _, mkt := range []string{"BTC-PERP", "ETH-PERP"} {
			p := w.position(ak.acct, mkt)
			if got := int64(p.Side) * p.Contracts; got != net[ak.acct+"/"+mkt] {
				t.Fatalf("end: %s %s position %d, fills sum to %d", ak.acct, mkt, got, net[ak.acct+"/"+mkt])
			}
		}
	}
	if w.hash() != w.mirror.hash() {
		t.Fatal("end: replicas' state hashes differ")
	}
	// The run must exercise every path, or it proves little.
	var fills int
	w.m.Read(func(st *State, _ uint64) {
		for _, a := range st.Trade.Accounts {
			fills += len(a.Fills)
		}
	})
	for _, want := range []string{wire.CodeReduceOnly, wire.CodeInsufficientMargin, "resting order filled",
		"trigger executed", "trigger blocked: reduce_only", "trigger cancelled: oco", "trigger cancelled: position_closed",
		"trigger cancelled: cancel_all_after", "trigger resting", "trigger cancelled: entry_canceled",
		"liquidation", "liquidation partial", "liquidation deficit", "funding flow"} {
		if tally[want] == 0 && !testing.Short() { // -short runs too few entries to reach every path
			t.Errorf("weak run: no %q; outcomes %v", want, tally)
		}
	}
	if cfg.behind && tally["book behind"] == 0 {
		t.Errorf("weak run: no book was ever left behind; outcomes %v", tally)
	}
	if fills < cfg.entries/10 {
		t.Errorf("weak run: %d fills", fills)
	}
	t.Logf("%d accounts, %d entries, %d fills, outcomes %v", cfg.accounts, cfg.entries, fills, tally)
	return w
}

func splitKey(k string) (string, string) {
	i := bytes.LastIndexByte([]byte(k), '/')
	return k[:i], k[i+1:]
}

// checkSimFill checks a fill's figures against each other and against its
// order: the notional and fee recomputed from the execution price, the
// price on the tick and on the venue's side of the mid, a resting order's
// fill no worse than its limit, and a trigger's fill at a mid that reached
// its level.
func checkSimFill(t *testing.T, w *tradeWorld, f trade.FillView) {
	t.Helper()
	var p market.Params
	var o trade.Order
	if strings.HasPrefix(f.OrderID, trade.ADLOrderPrefix) {
		// Auto-deleveraging: a close at the mid, no spread, no fee, a
		// profit (cut by the shortfall, never below zero).
		if f.ExecPriceQ8 != f.Oracle.MidQ8 || f.FeeMsat != 0 || f.OpenedContracts != 0 || f.RealizedPnlMsat < 0 {
			t.Fatalf("adl fill %+v", f)
		}
		return
	}
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
	case o.Kind != "" && ((o.Dir == market.Rising && mid < o.TriggerQ8) || (o.Dir == market.Falling && mid > o.TriggerQ8)):
		t.Fatalf("fill %+v: trigger %s at %d fired before the mid reached it", f, o.OrderID, o.TriggerQ8)
	case o.ReduceOnly && f.OpenedContracts != 0:
		t.Fatalf("fill %+v: a reduce-only order opened contracts", f)
	case f.Referral != nil || f.RebateDivertedMsat != 0 || f.FundingSettledMsat != 0:
		t.Fatalf("fill %+v: referral or funding figures before those exist", f)
	}
}

// newMarketMirror is the second replica of the simulations: the same
// genesis as newMarketReplica, without CheckInvariants. The world's own
// replica checks every invariant after every entry; the mirror is there to
// answer alike and hash alike, and a state that hashes alike breaks the
// same invariants, so checking them twice costs a third of a simulation
// and proves nothing more. A panic that would have failed the test instead
// halts the mirror, which toMirror reports.
func newMarketMirror(t testing.TB) *replica {
	t.Helper()
	r := &replica{t: t, m: NewMachine(Options{}), next: 1}
	wantOK(t, r.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 42, Deployment: "testnet"})))
	wantOK(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())))
	return r
}

// syncMirror brings the mirror replica to the world's applied entries by
// replaying the world's log (the entries newTradeWorld applied before the
// mirror existed).
func (w *tradeWorld) syncMirror() {
	w.t.Helper()
	for _, b := range w.log {
		res, _ := w.mirror.m.Apply(w.mirror.next, b)
		w.mirror.next++
		wantOK(w.t, res)
	}
}

// toMirror applies an entry's bytes to the mirror and compares answers.
func (w *tradeWorld) toMirror(b []byte, res *Result) {
	w.t.Helper()
	mres, _ := w.mirror.m.Apply(w.mirror.next, b)
	w.mirror.next++
	if h := w.mirror.m.Halted(); h != nil {
		w.t.Fatalf("the mirror halted: %s", h.Reason)
	}
	if mres.Status != res.Status || !bytes.Equal(mres.Body, res.Body) {
		w.t.Fatalf("replicas answered differently: %d %s / %d %s", res.Status, res.Body, mres.Status, mres.Body)
	}
	if w.hashEvery > 0 && w.next%uint64(w.hashEvery) == 0 && w.hash() != w.mirror.hash() {
		w.t.Fatalf("index %d: replicas' state hashes differ", w.next-1)
	}
}
