package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// TestCrossedLimitWaitsInAnIndexPastItsBound: a bracket's legs arm past
// the price index's bound (LevelLegsArmPast), so a full index can hold
// PriceIndexEntriesMax + 1 entries once a trigger-entry bracket fired.
// A resting limit order that a print then crosses but cannot fill (the
// mid passed its limit, the execution price with spread did not) is
// taken out of the index and put back one q8 unit past the mid; below
// LevelReindexPast that insert was bounded, failed on the full index,
// and every replica halted on the print. From the level the order takes
// back the place it held.
func TestCrossedLimitWaitsInAnIndexPastItsBound(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{trade.LevelReindexPast - 1, trade.LevelReindexPast} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			open := market.PriceIndexEntriesMax - trade.IndexReservedForReducing
			a, ka := w.account(btcBTC)
			b, kb := w.account(btcBTC)
			created(t, w.order(b, kb, limitOrder("lim", "BTC-PERP", "buy", 1_000, usdQ8(98_990))), "resting")
			w.fillIndex("BTC-PERP", open-3)
			created(t, w.order(a, ka, bracket("br", "buy", 1_000, usdQ8(99_000), usdQ8(98_000), usdQ8(101_000))), trade.StatusWorking)
			// The reserve fills with the reduce-only entries of positions
			// (stand-ins here).
			w.fillIndex("BTC-PERP", market.PriceIndexEntriesMax)
			wantOK(t, w.print("BTCUSD", usdQ8(99_000))) // the entry fires, its two legs arm past the bound
			w.m.Read(func(st *State, _ uint64) {
				if n := st.Trade.Books["BTC-PERP"].Index.Len(); n != market.PriceIndexEntriesMax+1 {
					t.Fatalf("index holds %d entries", n)
				}
			})
			if p := w.position(a, "BTC-PERP"); p.Contracts != 1_000 {
				t.Fatalf("bracket position %+v", p)
			}
			// Crosses the limit at 98,990; 98,985 plus the spread is above it.
			res := w.print("BTCUSD", usdQ8(98_985))
			if level < trade.LevelReindexPast {
				if h := w.m.Halted(); h == nil {
					t.Fatalf("below the level the replica halts on this print (%d %s)", res.Status, res.Body)
				}
				return
			}
			if h := w.m.Halted(); h != nil {
				t.Fatalf("halted: %s", h.Reason)
			}
			wantOK(t, res)
			o := w.orderOf(b, "lim")
			if o.Status != trade.StatusAccepted || o.LevelQ8 != usdQ8(98_985)-1 {
				t.Fatalf("limit order %s at %d, want resting one unit below the mid", o.Status, o.LevelQ8)
			}
			// It still fills when the price comes to it.
			wantOK(t, w.print("BTCUSD", usdQ8(98_900)))
			if o := w.orderOf(b, "lim"); o.Status != trade.StatusFilled {
				t.Fatalf("limit order %s", o.Status)
			}
		})
	}
}
