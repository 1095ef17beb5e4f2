package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// TestHeldPrintStopsLiquidations: BTC really falls by two thirds in one
// print, which the jump guard holds, and an hourly funding boundary
// passes before the next print. A 100x long sat one q8 unit above its
// liquidation level at the price from before the jump; the funding it
// pays puts it under maintenance there. Below the level the sweep after
// funding liquidated it at that old price, which no trader may trade at
// while the print is held (LevelHeldPrintStopsOrders): only part of the long was
// closed, without loss beyond its margin, and the house took the jump. From the level the risk engine
// waits for the next print as it does for a stale one, and liquidates at
// the confirmed price.
func TestHeldPrintStopsLiquidations(t *testing.T) {
	for _, level := range []uint32{trade.LevelHeldPrintStopsRisk - 1, trade.LevelHeldPrintStopsRisk} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, levered(mktOrder("l", "BTC-PERP", "buy", 10_000), 100)), trade.StatusFilled)
			p := w.marketParams("BTC-PERP")
			lvl, _, ok := trade.LiqLevel(&p, w.position(a, "BTC-PERP"))
			if !ok {
				t.Fatal("a 100x long with no liquidation level")
			}
			boundary := mktLaunchMs + 30*60_000
			w.walkTo(boundary - 3000)
			wantOK(t, w.print("BTCUSD", lvl+1))
			if res := w.print("BTCUSD", usdQ8(33_000)); string(res.Body) != `{"held":true}` {
				t.Fatalf("a fall to a third: %d %s", res.Status, res.Body)
			}
			w.ts = boundary - 1
			wantOK(t, w.at(&Command{Type: CmdTick}))
			if len(w.fundingFlows(a).Funding) == 0 {
				t.Fatal("no funding paid at the boundary")
			}
			liqs := w.liquidations(a).Liquidations
			if level < trade.LevelHeldPrintStopsRisk {
				if len(liqs) != 1 || int64(liqs[0].Oracle.MidQ8) != lvl+1 || liqs[0].DeficitMsat != 0 {
					t.Fatalf("below the level: liquidated at the held-over price, no deficit: got %+v", liqs)
				}
				return
			}
			if len(liqs) != 0 {
				t.Fatalf("liquidated at %d while the print of %d was held: %+v", liqs[0].Oracle.MidQ8, usdQ8(33_000), liqs)
			}
			wantOK(t, w.print("BTCUSD", usdQ8(33_100))) // confirms the jump
			liqs = w.liquidations(a).Liquidations
			if len(liqs) != 1 || int64(liqs[0].Oracle.MidQ8) != usdQ8(33_100) || liqs[0].DeficitMsat <= 0 {
				t.Fatalf("after the confirming print: %+v", liqs)
			}
		})
	}
}

// TestHeldPrintStopsTheResumingWalk: a 1x short (never liquidatable)
// guards itself with a buy stop at 101,000. The market is halted while
// BTC prints 102,000, then more than doubles in a print the guard holds,
// and the operator resumes the market before the next print. Below the
// level the resumption walked the book at the price from before the jump
// and the stop bought back at 102,000 plus spread, paid by the house at
// the price the held print announced; from the level the walk waits for
// the confirming print and the stop executes there.
func TestHeldPrintStopsTheResumingWalk(t *testing.T) {
	for _, level := range []uint32{trade.LevelHeldPrintStopsRisk - 1, trade.LevelHeldPrintStopsRisk} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, levered(mktOrder("s", "BTC-PERP", "sell", 10_000), 1)), trade.StatusFilled)
			sl := stopOrder("sl", "BTC-PERP", "buy", 10_000, usdQ8(101_000))
			sl.ReduceOnly = true
			created(t, w.order(a, k, sl), trade.StatusWorking)
			halted, live := market.StatusHalted, market.StatusLive
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
			wantOK(t, w.print("BTCUSD", usdQ8(102_000)))
			if res := w.print("BTCUSD", usdQ8(215_000)); string(res.Body) != `{"held":true}` {
				t.Fatalf("a jump past twice: %d %s", res.Status, res.Body)
			}
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
			if level < trade.LevelHeldPrintStopsRisk {
				if f := w.lastFill(a); f.OrderID != "sl" || f.OracleMidQ8 != usdQ8(102_000) {
					t.Fatalf("below the level: the stop at the price before the jump, got %+v", f)
				}
				return
			}
			if o := w.orderOf(a, "sl"); o.Status != trade.StatusAccepted {
				t.Fatalf("the stop acted while the jump was held: %+v", o)
			}
			wantOK(t, w.print("BTCUSD", usdQ8(216_000)))
			if f := w.lastFill(a); f.OrderID != "sl" || f.OracleMidQ8 != usdQ8(216_000) {
				t.Fatalf("after the confirming print: %+v", f)
			}
		})
	}
}
