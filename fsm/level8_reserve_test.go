package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// TestReserveTakesTwoEntriesPerPosition: with a market's index filled up
// to its reducing reserve, an account holding a 200-contract long (about
// 2,000 sats of margin at 100x) placed 200 one-contract reduce-only stops,
// every one of them in the reserve: their contracts total the position,
// within LevelReserveProtects' bound of twice it. 500 such accounts fill
// the 100,000-entry reserve, not the 50,000 the decision counted, and then
// no trader can place a stop-loss. From LevelReserveCountsEntries an
// account's reduce-only entries on one side of a market use the reserve
// for at most ReserveCoverMultiple entries (a stop-loss and a
// take-profit), whatever their size.
func TestReserveTakesTwoEntriesPerPosition(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{trade.LevelReserveCountsEntries - 1, trade.LevelReserveCountsEntries} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC / 100)
			created(t, w.order(a, k, mktOrder("pos", "BTC-PERP", "buy", 200)), trade.StatusFilled)
			base := market.PriceIndexEntriesMax - trade.IndexReservedForReducing
			w.fillIndex("BTC-PERP", base)
			placed := 0
			for i := 0; i < trade.RestingOrdersPerAccountMax; i++ {
				s := stopOrder(fmt.Sprintf("s%d", i), "BTC-PERP", "sell", 1, usdQ8(90_000)-int64(i)*usdQ8(10))
				s.ReduceOnly = true
				res := w.order(a, k, s)
				if res.Status != http.StatusCreated {
					wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
					break
				}
				placed++
			}
			want := trade.RestingOrdersPerAccountMax
			if level >= trade.LevelReserveCountsEntries {
				want = trade.ReserveCoverMultiple
			}
			if placed != want {
				t.Fatalf("%d one-contract stops of a 200-contract long entered the reserve, want %d", placed, want)
			}
			w.m.Read(func(st *State, _ uint64) {
				if n := st.Trade.Books["BTC-PERP"].Index.Len(); n != base+want {
					t.Errorf("index holds %d entries, want %d", n, base+want)
				}
			})
			if level < trade.LevelReserveCountsEntries {
				return
			}
			// The other side's entries count apart: after a flip to a
			// short, two buy stops protect it.
			created(t, w.order(a, k, mktOrder("flip", "BTC-PERP", "sell", 400)), trade.StatusFilled)
			for i := 0; i < 2; i++ {
				s := stopOrder(fmt.Sprintf("b%d", i), "BTC-PERP", "buy", 100, usdQ8(110_000)+int64(i)*usdQ8(10))
				s.ReduceOnly = true
				created(t, w.order(a, k, s), trade.StatusWorking)
			}
			s := stopOrder("b2", "BTC-PERP", "buy", 1, usdQ8(120_000))
			s.ReduceOnly = true
			wantRefused(t, w.order(a, k, s), http.StatusBadRequest, wire.CodeValidation)
		})
	}
}
