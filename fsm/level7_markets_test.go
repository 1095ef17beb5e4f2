package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Feature level 7, markets and the oracle (review of 2026-11-28). Each
// test runs at level 6 (the old rule, which must stay as it was for
// replay) and at level 7.

// TestFeedChangeCannotMoveTheMarkPastTheJumpGuard: an operator's
// `market set oracleFeedId` moved the market's mark at once to the new
// feed's last print, which no print guard judged, and the parameter hook
// liquidated at it. Re-pointing BTC-PERP to ETHUSD (a typo) valued BTC at
// 3,400 dollars and liquidated every long. From the level a market that is
// not halted changes its feed only to one whose last print is within
// market.PrintJumpFactor of the market's price; a halted market may take
// any feed (the operator checks the price before resuming it).
func TestFeedChangeCannotMoveTheMarkPastTheJumpGuard(t *testing.T) {
	for _, level := range []uint32{LevelFeedChangeGuard - 1, LevelFeedChangeGuard} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, levered(mktOrder("l", "BTC-PERP", "buy", 10_000), 10)), trade.StatusFilled)
			feed := func(id string) *string { return &id }
			res := w.at(mustCommand(t, CmdMarketSet, 0, MarketSetPayload{MarketID: "BTC-PERP", OracleFeedID: feed("ETHUSD")}))
			if level < LevelFeedChangeGuard {
				wantOK(t, res)
				if n := len(w.liquidations(a).Liquidations); n != 1 {
					t.Fatalf("below the level the long was liquidated at the ETH price; liquidations %d", n)
				}
				return
			}
			wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
			if p := w.position(a, "BTC-PERP"); p.Contracts != 10_000 || len(w.liquidations(a).Liquidations) != 0 {
				t.Fatalf("a refused feed change touched the position: %+v", p)
			}
			if w.marketParams("BTC-PERP").OracleFeedID != "BTCUSD" {
				t.Fatal("the refused change was kept")
			}
			// A feed without a print gives no price to compare: refused
			// while the market trades, taken once it is halted.
			wantRefused(t, w.at(mustCommand(t, CmdMarketSet, 0, MarketSetPayload{MarketID: "BTC-PERP", OracleFeedID: feed("BTCUSD2")})),
				http.StatusConflict, wire.CodeConflict)
			halted, live := market.StatusHalted, market.StatusLive
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", OracleFeedID: feed("BTCUSD2")})
			wantOK(t, w.print("BTCUSD2", usdQ8(100_200)))
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
			// Back to the first feed, within the factor, while live.
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", OracleFeedID: feed("BTCUSD")})
			if p := w.position(a, "BTC-PERP"); p.Contracts != 10_000 || len(w.liquidations(a).Liquidations) != 0 {
				t.Fatalf("position after sound re-points %+v", p)
			}
		})
	}
}
