package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Feature level 7. Each test runs at level 6 (the old rule, which must
// stay as it was for replay) and at level 7.

// TestReserveKeepsRoomForPositions: with a market's index filled up to its
// reducing reserve, reduce-only triggers of an account with no position
// (which cost nothing) took the reserve below the level, and then a trader
// could not place a stop-loss for a real position. From the level they
// count as opening orders for the reserve; a stop that protects a position
// still gets in.
func TestReserveKeepsRoomForPositions(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{trade.LevelReserveProtects - 1, trade.LevelReserveProtects} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, mktOrder("pos", "BTC-PERP", "buy", 1_000)), trade.StatusFilled)
			w.fillIndex("BTC-PERP", market.PriceIndexEntriesMax-trade.IndexReservedForReducing)
			b, kb := w.account(0) // no money, no position
			squat := stopOrder("squat", "BTC-PERP", "sell", 1_000, usdQ8(50_000))
			squat.ReduceOnly = true
			res := w.order(b, kb, squat)
			if level < trade.LevelReserveProtects {
				created(t, res, trade.StatusWorking)
				return
			}
			wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
			// A reduce-only trigger on the same side as the position would
			// not reduce it either.
			same := stopOrder("same-side", "BTC-PERP", "buy", 1_000, usdQ8(150_000))
			same.ReduceOnly = true
			wantRefused(t, w.order(a, k, same), http.StatusBadRequest, wire.CodeValidation)
			stop := stopOrder("stop", "BTC-PERP", "sell", 1_000, usdQ8(90_000))
			stop.ReduceOnly = true
			created(t, w.order(a, k, stop), trade.StatusWorking)
			// A take-profit for the whole position gets in too (a resting
			// reduce-only limit), then nothing more: one small position
			// does not open the reserve to all of an account's entries.
			tp := limitOrder("tp", "BTC-PERP", "sell", 1_000, usdQ8(150_000))
			tp.ReduceOnly = true
			created(t, w.order(a, k, tp), "resting")
			more := stopOrder("stop-2", "BTC-PERP", "sell", 1, usdQ8(80_000))
			more.ReduceOnly = true
			wantRefused(t, w.order(a, k, more), http.StatusBadRequest, wire.CodeValidation)
			w.m.Read(func(st *State, _ uint64) {
				if n := st.Trade.Books["BTC-PERP"].Index.Len(); n != market.PriceIndexEntriesMax-trade.IndexReservedForReducing+2 {
					t.Errorf("index holds %d entries, want the reserve's first two taken by the stop and the take-profit", n)
				}
			})
		})
	}
}

// TestReduceOnlyTriggerWithoutPositionStillRests: below the reserve a
// reduce-only trigger may still wait for a position to come (decisions.md,
// triggers 8); the level changes only who may use the reserve.
func TestReduceOnlyTriggerWithoutPositionStillRests(t *testing.T) {
	w := newTradeWorldAt(t, trade.LevelReserveProtects)
	b, kb := w.account(0)
	s := stopOrder("early", "BTC-PERP", "sell", 1_000, usdQ8(50_000))
	s.ReduceOnly = true
	created(t, w.order(b, kb, s), trade.StatusWorking)
}
