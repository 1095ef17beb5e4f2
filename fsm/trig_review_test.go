package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// TestTriggerPropertiesHoldUnderRandomFlow drives a few accounts through
// random orders, triggers, brackets (partial legs), cancels, the dead-man
// switch, prints with gaps and time, and checks after every entry what
// the books promise a trader about triggers:
//
//   - an armed bracket leg always faces a position: its account holds one
//     on the other side in its market (a leg never waits on a flat or
//     flipped account, where it would close the next position);
//   - a reduce-only order or trigger never opens contracts, and a
//     bracket's legs never close more than its entry opened;
//   - an order that ended (filled, canceled, rejected) never changes or
//     fills again;
//   - once a dead-man switch's deadline came, no order its account placed
//     before the deadline is live;
//   - a refused command changes nothing: same state hash, no event; a
//     retry of an accepted one answers the same and changes nothing.
func TestTriggerPropertiesHoldUnderRandomFlow(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained, as the trading simulation
	seeds, entries := uint64(4), 1200
	if testing.Short() {
		seeds, entries = 1, 400
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { trigProps(t, seed, entries) })
	}
}

func trigProps(t *testing.T, seed uint64, entries int) {
	rng := rand.New(rand.NewPCG(seed, seed*7+3))
	w := newTradeWorld(t)
	type ak struct{ acct, key string }
	var accts []ak
	for i := 0; i < 6; i++ {
		a, k := w.account(btcBTC/20 + rng.Int64N(btcBTC/5))
		accts = append(accts, ak{a, k})
	}
	mkts := []string{"BTC-PERP", "ETH-PERP"}
	feeds := []string{"BTCUSD", "ETHUSD"}
	mids := []int64{usdQ8(100_000), usdQ8(3_400)}
	lows, highs := []int64{usdQ8(60_000), usdQ8(2_000)}, []int64{usdQ8(150_000), usdQ8(5_000)}
	ticks := []int64{50_000_000, 5_000_000} // the catalogue's
	var mi int
	lvl := func(ref, off int64) int64 { return max((ref+off*ref/1000)/ticks[mi]*ticks[mi], ticks[mi]) }
	ended := map[string]bool{} // acct/id of orders that ended
	// acct/bracket id -> contracts its entry opened, and its legs closed
	openedN, legsClosed := map[string]int64{}, map[string]int64{}
	deadline := map[string]int64{} // armed dead-man switches, from their answers
	var ids []string
	lev := func() int64 {
		if rng.IntN(3) == 0 {
			return 0 // the market's most: liquidations
		}
		return rng.Int64N(20) + 1
	}
	tally := map[string]int{}
	lastPrintTs := []int64{w.ts, w.ts}
	var snap []byte
	var snapAt, snapNext int
	for i := 0; i < entries; i++ {
		if i == entries/2 {
			var err error
			if snap, err = w.m.Snapshot(); err != nil {
				t.Fatal(err)
			}
			snapAt, snapNext = len(w.log), int(w.next)
		}
		a := accts[rng.IntN(len(accts))]
		mi = rng.IntN(2)
		mid, mkt := mids[mi], mkts[mi]
		side := []string{"buy", "sell"}[rng.IntN(2)]
		id := fmt.Sprintf("o%d", i)
		size := rng.Int64N(3000) + 1
		if rng.IntN(4) == 0 {
			size = rng.Int64N(60_000) + 1
		}
		var cmd *Command
		var r *trade.PlaceRequest
		switch op := rng.IntN(100); {
		case op < 30:
			step := mid / 400
			if rng.IntN(10) == 0 {
				step = mid / 30
			}
			mids[mi] = min(max(mid+rng.Int64N(2*step+1)-step, lows[mi]), highs[mi])
			ts := w.ts + 1
			if rng.IntN(6) == 0 {
				ts = lastPrintTs[mi] + 1 // stale when it lands, after a long pause
			}
			if w.print1(feeds[mi], mids[mi], ts).Status == 200 {
				lastPrintTs[mi] = ts
			}
		case op < 45:
			x := mktOrder(id, mkt, side, size)
			x.ReduceOnly, x.Leverage = rng.IntN(3) == 0, lev()
			r = &x
		case op < 52:
			x := limitOrder(id, mkt, side, size, lvl(mid, rng.Int64N(21)-10))
			x.ReduceOnly, x.Leverage = rng.IntN(3) == 0, lev()
			r = &x
		case op < 62:
			x := stopOrder(id, mkt, side, size, lvl(mid, rng.Int64N(41)-20))
			if rng.IntN(2) == 0 {
				x.Type = trade.TypeTakeProfitMarket
			}
			x.ReduceOnly, x.Leverage = rng.IntN(4) > 0, lev()
			r = &x
		case op < 66:
			x := entryOrder(id, mkt, side, size, lvl(mid, rng.Int64N(41)-20))
			x.Leverage = lev()
			r = &x
		case op < 80:
			x := bracket(id, side, size, 0, 0, 0)
			x.MarketID = mkt
			x.Leverage = lev()
			ref, dir := mid, int64(1)
			if side == "sell" {
				dir = -1
			}
			if rng.IntN(2) == 0 {
				ref = lvl(mid, rng.Int64N(21)-10)
				x.Bracket.EntryKind, x.Bracket.EntryLevelQ8 = trade.BracketEntryTrigger, ref
			}
			if rng.IntN(4) > 0 {
				x.Bracket.StopLevelQ8 = lvl(ref, -dir*(rng.Int64N(15)+3))
				if rng.IntN(2) == 0 {
					x.Bracket.StopContracts = rng.Int64N(size) + 1
				}
			}
			if x.Bracket.StopLevelQ8 == 0 || rng.IntN(4) > 0 {
				x.Bracket.TakeProfitLevelQ8 = lvl(ref, dir*(rng.Int64N(15)+3))
				if rng.IntN(2) == 0 {
					x.Bracket.TakeProfitContracts = rng.Int64N(size) + 1
				}
			}
			r = &x
		case op < 90:
			if len(ids) == 0 {
				continue
			}
			target := ids[rng.IntN(len(ids))]
			if rng.IntN(3) == 0 {
				target += []string{trade.StopLegSuffix, trade.TakeProfitLegSuffix}[rng.IntN(2)]
			}
			cmd = mustCommand(t, CmdCancelOrder, 0, CancelOrderPayload{OrderID: target})
			cmd.IdemKey, cmd.ReqHash = "acct:"+a.acct+":c"+id, []byte("DELETE "+target)
		case op < 94:
			timeout := int64(0)
			if rng.IntN(5) > 0 {
				timeout = trade.CancelAfterMinMs + rng.Int64N(5000)
			}
			if rng.IntN(10) == 0 {
				timeout = rng.Int64N(999) + 1 // refused: below the minimum
			}
			cmd = cancelAfterCmd(t, a.acct, a.key, "caa"+id, timeout)
		case op < 96:
			st := []market.Status{market.StatusLive, market.StatusLive, market.StatusReduceOnly, market.StatusHalted}[rng.IntN(4)]
			w.at(mustCommand(t, CmdMarketSet, 0, MarketSetPayload{MarketID: mkt, Status: &st}))
		default:
			w.ts += rng.Int64N(2500)
			if rng.IntN(5) == 0 {
				w.ts += 12_000 // past the oracle's staleness
			}
			w.at(&Command{Type: CmdTick})
		}
		if r != nil {
			ids = append(ids, id)
			cmd = mustCommand(t, CmdPlaceOrder, 0, *r)
			cmd.IdemKey, cmd.ReqHash = "acct:"+a.acct+":"+r.OrderID, []byte(fmt.Sprintf("%+v", *r))
		}
		if cmd != nil {
			// Applied at the log time of the entry before: no timer runs,
			// so a refusal must leave the state exactly as it was.
			cmd.Account, cmd.KeyID, cmd.TsMs = a.acct, a.key, w.ts
			before := w.hash()
			b, err := cmd.Encode()
			if err != nil {
				t.Fatal(err)
			}
			res, evs := w.m.Apply(w.next, b)
			w.next++
			w.log = append(w.log, b)
			w.events = append(w.events, evs...)
			w.check()
			tally[fmt.Sprint(res.Status, res.Code)]++
			if res.Status < 400 && rng.IntN(8) == 0 {
				// A client's retry, in the same log time: the same answer,
				// nothing else.
				after := w.hash()
				again, evs := w.m.Apply(w.next, b)
				w.next++
				w.log = append(w.log, b)
				if again.Status != res.Status || string(again.Body) != string(res.Body) || len(evs) != 0 || w.hash() != after {
					t.Fatalf("entry %d: a retry of %d %s answered %d %s with %d events", i, res.Status, res.Body, again.Status, again.Body, len(evs))
				}
				tally["retry"]++
			}
			if res.Status >= 400 {
				if len(evs) != 0 || w.hash() != before {
					t.Fatalf("entry %d: refused %d %s changed the state (%d events)", i, res.Status, res.Body, len(evs))
				}
			} else if cmd.Type == CmdCancelAllAfter {
				var v trade.CancelAfterView
				if err := res.Decode(&v); err != nil {
					t.Fatal(err)
				}
				deadline[a.acct] = 0
				if v.Armed {
					deadline[a.acct] = int64(*v.DeadlineTsMs)
				}
			}
		}
		// A switch whose deadline came has cancelled every order of its
		// account placed before it.
		now := w.now()
		for _, acct := range accts {
			d := deadline[acct.acct]
			if d == 0 || now < d {
				continue
			}
			deadline[acct.acct] = 0
			w.m.Read(func(st *State, _ uint64) {
				for _, no := range st.Trade.Accounts[acct.acct].Live {
					if o := st.Trade.Orders[no]; o.CreatedTsMs < d {
						t.Fatalf("entry %d: %s/%s placed at %d outlived the switch's deadline %d (now %d)", i, acct.acct, o.OrderID, o.CreatedTsMs, d, now)
					}
				}
			})
		}
		for _, ev := range w.events {
			key := ev.Account + "/"
			switch ev.Kind {
			case "fill":
				f := ev.Data.(trade.FillEvent).View()
				key += f.OrderID
				if ended[key] {
					t.Fatalf("entry %d: order %s filled after it ended", i, key)
				}
				openedN[key] += int64(f.OpenedContracts)
				for _, suffix := range []string{trade.StopLegSuffix, trade.TakeProfitLegSuffix} {
					if g, ok := strings.CutSuffix(key, suffix); ok {
						if legsClosed[g] += int64(f.ClosedContracts); legsClosed[g] > openedN[g] {
							t.Fatalf("entry %d: the legs of bracket %s closed %d contracts, its entry opened %d", i, g, legsClosed[g], openedN[g])
						}
					}
				}
				var o trade.Order
				w.m.Read(func(st *State, _ uint64) {
					if oo, ok := st.Trade.Order(ev.Account, f.OrderID); ok {
						o = *oo
					}
				})
				if now := w.now(); now-int64(f.Oracle.TsMs) > 10_000 {
					t.Fatalf("entry %d: %s filled at a print %d ms old", i, key, now-int64(f.Oracle.TsMs))
				}
				if o.Kind != "" {
					m := int64(f.Oracle.MidQ8)
					if (o.Dir == market.Rising && m < o.TriggerQ8) || (o.Dir == market.Falling && m > o.TriggerQ8) {
						t.Fatalf("entry %d: trigger %s (%d, dir %d) executed at mid %d", i, key, o.TriggerQ8, o.Dir, m)
					}
				}
				if o.ReduceOnly && f.OpenedContracts != 0 {
					t.Fatalf("entry %d: reduce-only %s opened %d contracts", i, key, f.OpenedContracts)
				}
			case "order":
				v := ev.Data.(trade.OrderView)
				key += v.OrderID
				if ended[key] {
					t.Fatalf("entry %d: order %s changed after it ended: %+v", i, key, v)
				}
				if v.Status != trade.StatusAccepted {
					ended[key] = true
				}
			case "trigger":
				v := ev.Data.(trade.TriggerView)
				key += v.OrderID
				if ended[key] {
					t.Fatalf("entry %d: trigger %s changed after it ended: %+v", i, key, v)
				}
				if v.Reason != nil {
					tally["trigger "+v.Status+" "+*v.Reason]++
				} else {
					tally["trigger "+v.Status]++
				}
				if v.Status != trade.TrigArmed && v.Status != trade.TrigResting {
					ended[key] = true
				}
			}
		}
		for _, ev := range w.events {
			if ev.Kind == "liquidation" {
				tally["liquidation"]++
				if l := ev.Data.(trade.LiquidationView); l.ADLTriggered {
					tally["adl"]++
				}
			}
		}
		w.events = nil
		w.m.Read(func(st *State, _ uint64) {
			for _, acct := range accts {
				ta := st.Trade.Accounts[acct.acct]
				if ta == nil {
					continue
				}
				for _, no := range ta.Triggers {
					o := st.Trade.Orders[no]
					if o.Parent == 0 || o.TrigState != trade.TrigArmed {
						continue
					}
					pos := st.Trade.Position(acct.acct, o.MarketID)
					if pos.Contracts == 0 || pos.Side != -o.Side {
						t.Fatalf("entry %d: armed leg %s/%s (%s %d) faces position %+v", i, acct.acct, o.OrderID, o.Side.Name(), o.Contracts, pos)
					}
				}
			}
		})
	}
	t.Logf("outcomes %v", tally)
	// A replica restored from the middle's snapshot (its derived indexes
	// and sets rebuilt) applies the rest to the same state.
	m := NewMachine(Options{CheckInvariants: true})
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	for j, b := range w.log[snapAt:] {
		m.Apply(uint64(snapNext+j), b)
	}
	if _, h, _ := m.StateHash(); h != w.hash() {
		t.Fatal("a replica restored mid-run hashes differently at the end")
	}
}

// print1 applies a print of feed at midQ8 observed at tsMs.
func (w *tradeWorld) print1(feed string, midQ8, tsMs int64) *Result {
	w.t.Helper()
	return w.at(mustCommand(w.t, CmdOraclePrint, 0, OraclePrintPayload{FeedID: feed, MidQ8: midQ8, ConfQ9: 300_000, TsMs: tsMs}))
}
