package fsm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// TestTradingChaosKeepsTheBooksStraight: a dozen accounts in one market (odd seeds BTC-PERP,
// inverse; even seeds ETH-PERP, quanto), leverage up to 100x, gaps up to
// a quarter of the price, halts and resumes, reduce_only status, changes
// of mmRate, base spread and maxOrderContracts, funding, dead-man
// switches and group entries mixing orders, prints and cancels. The
// machine checks its invariants (ledger conservation, reservations,
// margins, open interest, indexes, nothing left under maintenance) after
// every entry; each fill is checked against its order (checkSimFill), no
// fill or liquidation happens in a halted market and none opens
// contracts in a reduce_only one, positions equal the sum of their fills
// and liquidations, and a refused order leaves the state hash as it was.
// CHAOS_SEEDS=n runs n seeds (a review of 2026-11-28 ran 40 clean).
func TestTradingChaosKeepsTheBooksStraight(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	seeds, entries := 3, 3000
	if testing.Short() {
		seeds, entries = 1, 1500
	}
	if s := os.Getenv("CHAOS_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { chaosRun(t, uint64(seed), entries) })
	}
}

func chaosRun(t *testing.T, seed uint64, entries int) {
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	w := newTradeWorld(t)
	var accts []simAcct
	for i := 0; i < 12; i++ {
		a, k := w.account(btcBTC/100 + rng.Int64N(btcBTC/20))
		accts = append(accts, simAcct{a, k})
	}
	mkt, feed, mid := "BTC-PERP", "BTCUSD", usdQ8(100_000)
	tick := market.DefaultCatalogue()[0].TickSizeQ8
	lo, hi := usdQ8(40_000), usdQ8(250_000)
	if seed%2 == 0 {
		mkt, feed, mid = "ETH-PERP", "ETHUSD", usdQ8(3_400)
		tick = market.DefaultCatalogue()[1].TickSizeQ8
		lo, hi = usdQ8(1_400), usdQ8(8_500)
	}
	level := func(off int64) int64 { return max((mid+off*mid/1000)/tick*tick, tick) }
	var ids []simOrder
	status := market.StatusLive
	net := map[string]int64{}
	tally := map[string]int{}
	audit := func(i int) {
		for _, ev := range w.events {
			switch d := ev.Data.(type) {
			case trade.FillEvent:
				f := d.View()
				checkSimFill(t, w, f)
				if status == market.StatusHalted {
					t.Fatalf("entry %d: fill %+v in a halted market", i, f)
				}
				if status == market.StatusReduceOnly && f.OpenedContracts != 0 {
					t.Fatalf("entry %d: fill %+v opened contracts in a reduce_only market", i, f)
				}
				q := int64(f.ClosedContracts + f.OpenedContracts)
				if f.Side == "sell" {
					q = -q
				}
				net[f.AccountID] += q
				tally["fill"]++
			case trade.LiquidationView:
				if status == market.StatusHalted {
					t.Fatalf("entry %d: liquidation in a halted market", i)
				}
				q := int64(d.ClosedContracts)
				if d.Side == "long" {
					q = -q
				}
				net[d.AccountID] += q
				tally["liq"]++
				if d.Partial {
					tally["liq partial"]++
				}
				if d.ADLTriggered {
					tally["adl"]++
				}
			case trade.TriggerView:
				tally["trigger "+d.Status]++
				if d.Reason != nil {
					tally["trigger "+d.Status+" "+*d.Reason]++
				}
			case trade.OrderView:
				tally["order "+d.Status]++
			default:
				tally[ev.Kind]++
			}
		}
		w.events = nil
		for _, ak := range accts {
			p := w.position(ak.acct, mkt)
			if got := int64(p.Side) * p.Contracts; got != net[ak.acct] {
				t.Fatalf("entry %d: %s position %d, fills sum to %d", i, ak.acct, got, net[ak.acct])
			}
		}
	}
	w.events = nil
	for i := 0; i < entries; i++ {
		audit(i - 1)
		ak := accts[rng.IntN(len(accts))]
		side := []string{"buy", "sell"}[rng.IntN(2)]
		id := fmt.Sprintf("o%d", i)
		size := rng.Int64N(50_000) + 1
		lev := []int64{0, 0, 50, 20, 5}[rng.IntN(5)]
		var r trade.PlaceRequest
		isOrder := false
		switch op := rng.IntN(100); {
		case op < 22:
			step := mid / 200
			if rng.IntN(10) == 0 {
				step = mid / 15
			}
			if rng.IntN(60) == 0 {
				step = mid / 4
			}
			mid += rng.Int64N(2*step+1) - step
			mid = min(max(mid, lo), hi)
			w.print(feed, mid)
			continue
		case op < 40:
			r = mktOrder(id, mkt, side, size)
			r.ReduceOnly = rng.IntN(4) == 0
			isOrder = true
		case op < 52:
			r = limitOrder(id, mkt, side, size, level(rng.Int64N(21)-10))
			r.ReduceOnly = rng.IntN(3) == 0
			isOrder = true
		case op < 62:
			r = stopOrder(id, mkt, side, size, level(rng.Int64N(41)-20))
			if rng.IntN(2) == 0 {
				r.Type = trade.TypeTakeProfitMarket
			}
			r.ReduceOnly = rng.IntN(10) < 7
			isOrder = true
		case op < 75:
			dir := int64(1)
			if side == "sell" {
				dir = -1
			}
			r = bracket(id, side, size, 0, 0, 0)
			r.MarketID = mkt
			ref := int64(0)
			if rng.IntN(2) == 0 {
				ref = rng.Int64N(21) - 10
				if ref == 0 {
					ref = 1
				}
				r.Bracket.EntryKind, r.Bracket.EntryLevelQ8 = trade.BracketEntryTrigger, level(ref)
			}
			r.Bracket.StopLevelQ8 = level(ref - dir*(rng.Int64N(15)+2))
			r.Bracket.TakeProfitLevelQ8 = level(ref + dir*(rng.Int64N(15)+2))
			if rng.IntN(2) == 0 {
				r.Bracket.StopContracts = rng.Int64N(size) + 1
			}
			if rng.IntN(2) == 0 {
				r.Bracket.TakeProfitContracts = rng.Int64N(size) + 1
			}
			isOrder = true
		case op < 77:
			// a group entry: orders, a dead-man switch, a print, a cancel
			var cmds []*Command
			for j := 0; j < 2+rng.IntN(4); j++ {
				g := accts[rng.IntN(len(accts))]
				gid := fmt.Sprintf("g%d_%d", i, j)
				switch rng.IntN(5) {
				case 0:
					mid += rng.Int64N(mid/50+1) - mid/100
					mid = min(max(mid, lo), hi)
					cmds = append(cmds, mustCommand(t, CmdOraclePrint, 0, OraclePrintPayload{FeedID: feed, MidQ8: mid, ConfQ9: 300_000, TsMs: w.ts + int64(len(cmds)) + 1}))
				case 1:
					cmds = append(cmds, cancelAfterCmd(t, g.acct, g.key, "caa"+gid, trade.CancelAfterMinMs))
				case 2:
					if len(ids) > 0 {
						o := ids[rng.IntN(len(ids))]
						c := mustCommand(t, CmdCancelOrder, 0, CancelOrderPayload{OrderID: o.id})
						c.Account, c.KeyID = o.acct, o.key
						c.IdemKey, c.ReqHash = "acct:"+o.acct+":c"+gid, []byte("DELETE "+o.id)
						cmds = append(cmds, c)
					}
				default:
					r := limitOrder(gid, mkt, []string{"buy", "sell"}[rng.IntN(2)], rng.Int64N(20_000)+1, level(rng.Int64N(11)-5))
					if rng.IntN(2) == 0 {
						r = mktOrder(gid, mkt, r.Side, r.Contracts)
					}
					r.ReduceOnly = rng.IntN(3) == 0
					cmds = append(cmds, orderCmd(t, g.acct, g.key, r))
					ids = append(ids, simOrder{g, gid})
				}
			}
			if len(cmds) > 0 {
				_, evs := w.group(cmds...)
				w.events = append(w.events, evs...)
			}
			continue
		case op < 80:
			if len(ids) > 0 {
				o := ids[rng.IntN(len(ids))]
				w.cancel(o.acct, o.key, o.id, "c"+id)
			}
			continue
		case op < 84:
			to := int64(0)
			if rng.IntN(4) > 0 {
				to = trade.CancelAfterMinMs + rng.Int64N(3000)
			}
			w.at(cancelAfterCmd(t, ak.acct, ak.key, "caa"+id, to))
			continue
		case op < 88:
			st := market.StatusLive
			switch rng.IntN(4) {
			case 0:
				st = market.StatusHalted
			case 1:
				st = market.StatusReduceOnly
			}
			status = st
			w.setMarket(MarketSetPayload{MarketID: mkt, Status: &st})
			continue
		case op < 90:
			switch rng.IntN(3) {
			case 0:
				mm := []int64{3_000_000, 5_000_000, 8_000_000}[rng.IntN(3)]
				w.setMarket(MarketSetPayload{MarketID: mkt, MMRateQ9: &mm})
			case 1:
				sp := []int64{0, 200_000, 1_000_000}[rng.IntN(3)]
				w.at(mustCommand(t, CmdMarketSet, 0, MarketSetPayload{MarketID: mkt, BaseSpreadQ9: &sp}))
			default:
				mx := []int64{20_000, 100_000, 1_000_000}[rng.IntN(3)]
				w.at(mustCommand(t, CmdMarketSet, 0, MarketSetPayload{MarketID: mkt, MaxOrderContracts: &mx}))
			}
			continue
		default:
			w.ts += rng.Int64N(2000)
			if rng.IntN(4) == 0 {
				w.ts += MaxClockStepMs - 2000
			}
			w.at(&Command{Type: CmdTick})
			w.print(feed, mid)
			continue
		}
		if !isOrder {
			continue
		}
		r.Leverage = lev
		if r.Bracket != nil {
			r.ReduceOnly = false
		}
		if rng.IntN(3) == 0 {
			// at the current log time: a refusal must change nothing
			before := w.hash()
			c := orderCmd(t, ak.acct, ak.key, r)
			c.TsMs = w.ts
			b, _ := c.Encode()
			res, evs := w.m.Apply(w.next, b)
			w.next++
			w.events = append(w.events, evs...)
			w.check()
			if res.Status >= 400 {
				if len(evs) != 0 || w.hash() != before {
					t.Fatalf("entry %d: refused %+v (%s) changed the state", i, r, res.Body)
				}
			} else {
				ids = append(ids, simOrder{ak, id})
			}
			continue
		}
		if res := w.order(ak.acct, ak.key, r); res.Status < 400 {
			ids = append(ids, simOrder{ak, id})
		}
	}
	audit(entries)
	t.Logf("tally %v", tally)
}
