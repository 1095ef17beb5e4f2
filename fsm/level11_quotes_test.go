package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
)

// TestRedeemQuotesDoNotPushOutAnOpenMintQuote: an account asks for a mint
// quote, then for QuotesPerAccountMax redeem quotes (a client watching the
// redemption price), then mints on the first quote, well inside its
// validity. Below usdx.LevelQuotesKeepOpenMints the bound dropped the
// oldest quote whatever it was and the mint answered 404 (a black-box
// audit, 2026-11-29); from it the redeem quotes go first. Open mint
// quotes alone are still bounded: the oldest of them goes.
func TestRedeemQuotesDoNotPushOutAnOpenMintQuote(t *testing.T) {
	for _, level := range []uint32{usdx.LevelQuotesKeepOpenMints - 1, usdx.LevelQuotesKeepOpenMints} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			a, k := w.account(btcBTC)
			// Some supply first, so that redemptions can be quoted.
			res, q := w.quote(a, k, usdx.SideMint, 20)
			wantOK(t, res)
			res, _ = w.mint(a, k, q.QuoteID)
			wantOK(t, res)
			res, mintQuote := w.quote(a, k, usdx.SideMint, 10)
			wantOK(t, res)
			for range usdx.QuotesPerAccountMax {
				res, _ := w.quote(a, k, usdx.SideRedeem, 10)
				wantOK(t, res)
			}
			if n := len(w.st().u.Holders[a].Quotes); n != usdx.QuotesPerAccountMax {
				t.Fatalf("the account holds %d quotes", n)
			}
			res, _ = w.mint(a, k, mintQuote.QuoteID)
			if level < usdx.LevelQuotesKeepOpenMints {
				if res.Status != 404 {
					t.Fatalf("below the level the mint quote was expected gone: %d %s", res.Status, res.Body)
				}
				return
			}
			wantOK(t, res)
			// Only open mint quotes: the oldest goes.
			var first usdx.QuoteView
			for i := range usdx.QuotesPerAccountMax + 1 {
				res, q := w.quote(a, k, usdx.SideMint, 10)
				wantOK(t, res)
				if i == 0 {
					first = q
				}
			}
			if _, ok := w.st().u.Quotes[first.QuoteID]; ok {
				t.Fatal("21 open mint quotes kept")
			}
			if n := len(w.st().u.Holders[a].Quotes); n != usdx.QuotesPerAccountMax {
				t.Fatalf("the account holds %d quotes", n)
			}
			// A redeem quote asked for now is kept (its 201 names it); the
			// oldest mint quote makes room.
			oldest := w.st().u.Holders[a].Quotes[0]
			res, redeem := w.quote(a, k, usdx.SideRedeem, 10)
			wantOK(t, res)
			if _, ok := w.st().u.Quotes[redeem.QuoteID]; !ok {
				t.Fatal("the redeem quote just answered was dropped")
			}
			if _, ok := w.st().u.Quotes[oldest]; ok {
				t.Fatal("the oldest mint quote was kept past the bound")
			}
		})
	}
}
