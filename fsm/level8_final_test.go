package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
)

// Feature level 8, the release review of the level's changes together
// (2026-11-27).

// TestPartialLegKeepsTheSiblingAfterTheEntryAgedOut: a bracket of 10,000
// contracts with a take-profit for 4,000; then the trader's bot places
// ClosedOrdersKept market orders, so the bracket's filled entry would be
// the oldest closed order past the bound. The partial take-profit must
// still leave the stop armed for the 6,000 left
// (LevelPartialLegsKeepSibling), and the bracket's id must still cancel
// what is live of it. Without the entry kept the take-profit cancelled the
// stop for all of them (oco), the very loss the level closes, and the
// bracket's id answered 404 while its stop was live.
func TestPartialLegKeepsTheSiblingAfterTheEntryAgedOut(t *testing.T) {
	for _, level := range []uint32{trade.LevelPartialLegsKeepSibling - 1, trade.LevelPartialLegsKeepSibling} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			b := bracket("b", "buy", 10_000, 0, usdQ8(95_000), usdQ8(101_000))
			b.Leverage = 10
			b.Bracket.TakeProfitContracts = 4_000
			created(t, w.order(acct, key, b), trade.StatusFilled)
			for i := range trade.ClosedOrdersKept {
				side := "buy"
				if i%2 == 1 {
					side = "sell"
				}
				o := mktOrder(fmt.Sprintf("bot%d", i), "BTC-PERP", side, 1)
				o.Leverage = 10
				created(t, w.order(acct, key, o), trade.StatusFilled)
			}
			w.print("BTCUSD", usdQ8(101_500))
			w.wantTrigger(acct, "b.tp", trade.TrigExecuted, "")
			if p := w.position(acct, "BTC-PERP"); p.Contracts != 6_000 {
				t.Fatalf("after the take-profit: %+v", p)
			}
			if level < trade.LevelPartialLegsKeepSibling {
				w.wantTrigger(acct, "b.stop", trade.TrigCancelled, trade.ReasonOCO)
				return
			}
			w.wantTrigger(acct, "b.stop", trade.TrigArmed, "")
			if n := w.orderOf(acct, "b.stop").Contracts; n != 6_000 {
				t.Fatalf("the stop covers %d contracts, want the bracket's 6,000 left", n)
			}
			if res := w.cancel(acct, key, "b", "cancel-b"); res.Status != http.StatusOK {
				t.Fatalf("cancel by the bracket's id: %d %s", res.Status, res.Body)
			}
			w.wantTrigger(acct, "b.stop", trade.TrigCancelled, "")
		})
	}
}
