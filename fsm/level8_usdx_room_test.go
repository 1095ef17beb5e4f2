package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// TestMintIntoAFullHedgeMarketIsRefused: a market takes no new position
// once its liquidation index holds market.PriceIndexEntriesMax of them
// (trade's positionRoom). The first mint after the hedge went flat opens
// a new position for the hedge, and pricing it never asked for that room:
// the quote was given, the mint moved the sats and then the hedge's order
// was refused, a broken invariant, so every replica halted on a client's
// mint. From usdx.LevelHedgeNeedsRoom the quote and the mint are refused
// (usdx_capacity) and change nothing.
func TestMintIntoAFullHedgeMarketIsRefused(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{usdx.LevelHedgeNeedsRoom - 1, usdx.LevelHedgeNeedsRoom} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			a, k := w.account(btcBTC)
			res, q := w.quote(a, k, usdx.SideMint, 100)
			wantOK(t, res)
			w.at(tickAt(0))
			before := w.hash()
			// The index is full: stand-ins in its entries, whose count
			// is what the room asks (no print here walks its trees).
			w.unchecked, w.m.opts.CheckInvariants = true, false
			var book *trade.Book
			w.m.Read(func(st *State, _ uint64) {
				book = st.Trade.Books["BTC-PERP"]
				b := &trade.Book{Index: market.NewPriceIndex()}
				if book != nil {
					b = &trade.Book{Index: book.Index, LastMidQ8: book.LastMidQ8, Liq: book.Liq}
				}
				st.Trade.Books["BTC-PERP"] = b
				if b.Liq == nil {
					b.Liq = market.NewPriceIndex()
				}
				for i := b.Liq.Len(); i < market.PriceIndexEntriesMax; i++ {
					b.Liq.Entries[fmt.Sprintf("standin%07d", i)] = market.IndexEntry{LevelQ8: usdQ8(1_000) + int64(i), Dir: market.Falling}
				}
			})
			if level < usdx.LevelHedgeNeedsRoom {
				res, _ = w.mint(a, k, q.QuoteID)
				if w.m.Halted() == nil {
					t.Fatalf("below the level the mint was expected to halt the replica: %d %s", res.Status, res.Body)
				}
				return
			}
			// The mint on the quote given before, and a new quote, at the
			// log time of the tick before them (no timer in between); the
			// stand-ins go before the state is compared.
			w.ts--
			res, _ = w.mint(a, k, q.QuoteID)
			wantRefused(t, res, http.StatusConflict, wire.CodeUSDxCapacity)
			w.ts--
			res, _ = w.quote(a, k, usdx.SideMint, 100)
			wantRefused(t, res, http.StatusConflict, wire.CodeUSDxCapacity)
			w.m.Read(func(st *State, _ uint64) {
				if book == nil {
					delete(st.Trade.Books, "BTC-PERP")
					return
				}
				st.Trade.Books["BTC-PERP"] = book
				for i := range market.PriceIndexEntriesMax {
					delete(book.Liq.Entries, fmt.Sprintf("standin%07d", i))
				}
			})
			if w.hash() != before {
				t.Fatal("a refused mint or quote changed the state")
			}
			if w.m.Halted() != nil || w.holder(a).Usdx != 0 {
				t.Fatalf("halted %v, holding %d USDx", w.m.Halted(), w.holder(a).Usdx)
			}
		})
	}
}
