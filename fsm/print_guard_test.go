package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// newTradeWorldAt is newTradeWorld on a cluster started at level.
func newTradeWorldAt(t *testing.T, level uint32) *tradeWorld {
	r := newReplica(t)
	wantOK(t, r.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: level, Seed: 42, Deployment: "testnet"})))
	wantOK(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())))
	w := &tradeWorld{replica: r, ts: mktLaunchMs}
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	wantOK(t, w.print("ETHUSD", usdQ8(3_400)))
	return w
}

func (w *tradeWorld) lastMid(feed string) (mid int64) {
	w.m.Read(func(st *State, _ uint64) {
		if p, ok := st.Market.FeedLast(feed); ok {
			mid = p.MidQ8
		}
	})
	return mid
}

// TestPrintNearZeroNoLongerHaltsTheCluster: the review's print of $0.01
// against a 1,000,000-contract inverse long. Below LevelPrintGuard the
// liquidation's PnL overflowed and the replica halted on the entry (every
// replica, for good); from it the print is refused, the market keeps its
// price, and later prints are taken.
func TestPrintNearZeroNoLongerHaltsTheCluster(t *testing.T) {
	for _, level := range []uint32{LevelPrintGuard - 1, LevelPrintGuard} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, mktOrder("l", "BTC-PERP", "buy", 1_000_000)), trade.StatusFilled)
			w.m.opts.CheckInvariants = false // as a node runs: a panic halts
			// Applied without the world's after-entry check: a halted
			// replica keeps the state from before the entry.
			w.ts++
			b, err := mustCommand(t, CmdOraclePrint, w.ts, OraclePrintPayload{FeedID: "BTCUSD", MidQ8: 1_000_000, ConfQ9: 300_000, TsMs: w.ts}).Encode()
			if err != nil {
				t.Fatal(err)
			}
			res, _ := w.m.Apply(w.next, b)
			w.next++
			if level < LevelPrintGuard {
				if w.m.Halted() == nil {
					t.Fatalf("below the level the replica was expected to halt; answer %d %s", res.Status, res.Body)
				}
				return
			}
			if h := w.m.Halted(); h != nil {
				t.Fatalf("halted: %s", h.Reason)
			}
			wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
			if mid := w.lastMid("BTCUSD"); mid != usdQ8(100_000) {
				t.Fatalf("mark %d after a refused print", mid)
			}
			wantOK(t, w.print("BTCUSD", usdQ8(100_100)))
			if w.lastMid("BTCUSD") != usdQ8(100_100) || w.position(a, "BTC-PERP").Contracts != 1_000_000 {
				t.Fatalf("the next print was not taken: mark %d, position %+v", w.lastMid("BTCUSD"), w.position(a, "BTC-PERP"))
			}
		})
	}
}

// TestOneGlitchPrintIsHeldNotPaid: the review's 0.1 BTC account with a
// 100x short and one print of $1. Below LevelPrintGuard its close paid it
// more than every deposit of the venue; from it the print is held, the
// close fills at the last real price, and the feed going on is taken.
func TestOneGlitchPrintIsHeldNotPaid(t *testing.T) {
	for _, level := range []uint32{LevelPrintGuard - 1, LevelPrintGuard} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			w.account(100 * btcBTC)
			a, k := w.account(btcBTC / 10)
			created(t, w.order(a, k, mktOrder("s", "BTC-PERP", "sell", 100_000)), trade.StatusFilled)
			glitch := w.print("BTCUSD", usdQ8(1))
			wantOK(t, glitch)
			created(t, w.order(a, k, trade.PlaceRequest{OrderID: "c", MarketID: "BTC-PERP", Side: "buy", Type: trade.TypeMarket, Contracts: 100_000, ReduceOnly: true}), trade.StatusFilled)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			var credited int64
			w.m.Read(func(st *State, _ uint64) { credited = st.Ledger.CreditedMsat })
			free := w.balance(ledger.Free(a))
			if level < LevelPrintGuard {
				if free <= credited {
					t.Fatalf("below the level the glitch paid out; free %d, credited %d", free, credited)
				}
				return
			}
			if string(glitch.Body) != `{"held":true}` {
				t.Fatalf("the glitch was answered %s", glitch.Body)
			}
			if free > btcBTC/10 {
				t.Fatalf("the short's close at the real price paid %d msat on 0.1 BTC", free)
			}
			if w.lastMid("BTCUSD") != usdQ8(100_000) {
				t.Fatal("the feed going on was not taken")
			}
		})
	}
}

// TestAJumpIsTakenOnePrintLate: a print past PrintJumpFactor waits; the
// next print near it confirms the move, one near the old price drops it,
// and one that is not newer than the held one does not confirm it.
func TestAJumpIsTakenOnePrintLate(t *testing.T) {
	w := newTradeWorld(t)
	before := w.hashNow()
	if res := w.print("BTCUSD", usdQ8(40_000)); string(res.Body) != `{"held":true}` {
		t.Fatalf("a 60%% drop: %d %s", res.Status, res.Body)
	}
	if w.lastMid("BTCUSD") != usdQ8(100_000) || w.hashNow() == before {
		t.Fatal("a held print moved the mark, or was not recorded")
	}
	wantOK(t, w.print("BTCUSD", usdQ8(41_000)))
	if w.lastMid("BTCUSD") != usdQ8(41_000) {
		t.Fatalf("a confirmed jump was not taken: mark %d", w.lastMid("BTCUSD"))
	}
	// A glitch followed by the old price: the glitch is forgotten.
	if res := w.print("BTCUSD", usdQ8(100_000)); string(res.Body) != `{"held":true}` {
		t.Fatalf("a 2.4x rise: %s", res.Body)
	}
	wantOK(t, w.print("BTCUSD", usdQ8(41_500)))
	w.m.Read(func(st *State, _ uint64) {
		if f := st.Market.FeedsByID["BTCUSD"]; f.Held != nil || f.Last.MidQ8 != usdQ8(41_500) {
			t.Fatalf("held %+v last %+v", f.Held, f.Last)
		}
	})
	// The bounds are inclusive: exactly twice, exactly half.
	wantOK(t, w.print("BTCUSD", usdQ8(83_000)))
	wantOK(t, w.print("BTCUSD", usdQ8(41_500)))
	if w.lastMid("BTCUSD") != usdQ8(41_500) {
		t.Fatal("a move of exactly the factor was held")
	}
}

func (w *tradeWorld) hashNow() string {
	_, h, err := w.m.StateHash()
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

// TestFullIndexKeepsRoomForStops: the review's 5,000 accounts of 200
// far-away orders fill a market's price index (stood in for here by
// entries put straight into it). From LevelIndexReserve the last tenth of
// the index takes only reduce-only entries, so a trader can still protect
// a position; below it the next opening order took the room.
func TestFullIndexKeepsRoomForStops(t *testing.T) {
	for _, level := range []uint32{trade.LevelIndexReserve - 1, trade.LevelIndexReserve} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, mktOrder("pos", "BTC-PERP", "buy", 1_000)), trade.StatusFilled)
			w.unchecked, w.m.opts.CheckInvariants = true, false
			w.m.Read(func(st *State, _ uint64) {
				x := st.Trade.Books["BTC-PERP"].Index
				for i := x.Len(); i < market.PriceIndexEntriesMax-trade.IndexReservedForReducing; i++ {
					if err := x.Insert(fmt.Sprintf("standin%07d", i), usdQ8(1_000_000)+int64(i), market.Rising); err != nil {
						t.Fatal(err)
					}
				}
			})
			res := w.order(a, k, limitOrder("far", "BTC-PERP", "sell", 1_000, usdQ8(150_000)))
			if level < trade.LevelIndexReserve {
				created(t, res, "resting")
				return
			}
			wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
			opening := stopOrder("stop-open", "BTC-PERP", "sell", 1_000, usdQ8(90_000))
			wantRefused(t, w.order(a, k, opening), http.StatusBadRequest, wire.CodeValidation)
			stop := stopOrder("stop", "BTC-PERP", "sell", 1_000, usdQ8(90_000))
			stop.ReduceOnly = true
			created(t, w.order(a, k, stop), "working")
			tp := limitOrder("tp", "BTC-PERP", "sell", 1_000, usdQ8(150_000))
			tp.ReduceOnly = true
			created(t, w.order(a, k, tp), "resting")
		})
	}
}
