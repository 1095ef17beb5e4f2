package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Feature level 7, markets and the oracle (review of 2026-11-27). Each
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

// TestRestingLimitFillsWhenAHaltEnds: a resting limit order whose level a
// print crossed while its market was halted waited one q8 unit past that
// print's mid, so once the market was live again it was checked only when
// a print crossed that new level: a buy limit at 99,000 passed by a print
// of 95,000 during the halt stayed unfilled at a live mid of 95,500, far
// below its limit. From the level it keeps its limit as its level while
// the market is halted, and resuming the market runs the orders the mid
// has reached.
func TestRestingLimitFillsWhenAHaltEnds(t *testing.T) {
	for _, level := range []uint32{trade.LevelHaltResume - 1, trade.LevelHaltResume} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			limit := usdQ8(99_000)
			created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, limit)), trade.StatusResting)
			halted, live := market.StatusHalted, market.StatusLive
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
			wantOK(t, w.print("BTCUSD", usdQ8(95_000)))
			if o := w.orderOf(acct, "l1"); o.Status != trade.StatusAccepted {
				t.Fatalf("filled in a halted market: %+v", o)
			}
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
			wantOK(t, w.print("BTCUSD", usdQ8(95_500)))
			o := w.orderOf(acct, "l1")
			if level < trade.LevelHaltResume {
				if o.Status != trade.StatusAccepted {
					t.Fatalf("below the level the order was expected to stay unfilled: %+v", o)
				}
				return
			}
			if o.Status != trade.StatusFilled {
				t.Fatalf("a buy limit at 99,000 is still unfilled at a live mid of 95,500: %+v", o)
			}
			if f := w.lastFill(acct); f.ExecQ8 > limit || f.OracleMidQ8 != usdQ8(95_000) {
				t.Fatalf("fill %+v: want it at the resume, at the mid of 95,000", f)
			}
		})
	}
}

// TestStopPassedDuringAHaltExecutesWhenItEnds: a stop-loss whose level the
// price passed while the market was halted was blocked for good
// (market_halted), so its position had no stop once trading resumed. From
// the level it waits, and executes when the market resumes below it.
func TestStopPassedDuringAHaltExecutesWhenItEnds(t *testing.T) {
	for _, level := range []uint32{trade.LevelHaltResume - 1, trade.LevelHaltResume} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			created(t, w.order(acct, key, levered(mktOrder("pos", "BTC-PERP", "buy", 1000), 2)), trade.StatusFilled)
			stop := stopOrder("stop", "BTC-PERP", "sell", 1000, usdQ8(97_000))
			stop.ReduceOnly = true
			created(t, w.order(acct, key, stop), trade.StatusWorking)
			halted, live := market.StatusHalted, market.StatusLive
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
			wantOK(t, w.print("BTCUSD", usdQ8(95_000)))
			if level < trade.LevelHaltResume {
				w.wantTrigger(acct, "stop", "blocked", wire.CodeMarketHalted)
				w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
				if p := w.position(acct, "BTC-PERP"); p.Contracts != 1000 {
					t.Fatalf("position %+v", p)
				}
				return
			}
			w.wantTrigger(acct, "stop", "armed", "")
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
			w.wantTrigger(acct, "stop", "executed", "")
			if p := w.position(acct, "BTC-PERP"); p.Contracts != 0 {
				t.Fatalf("the stop did not close the position at the resume: %+v", p)
			}
		})
	}
}
