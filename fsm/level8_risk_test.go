package fsm

// The risk corrections feature level 8 gates, each tested at level 7 (the
// old behaviour, kept for replay) and at level 8.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// TestOpeningUnderMaintenanceIsRefused: a market whose base spread (1.5%,
// valid below LevelSpreadFitsMargin) passes its initial margin (1%). A 2x short opens at 100,000 and
// is in profit at 97,000; then a 100x long of 100,000 contracts buys at
// 98,455.5 with 1% of margin, already bankrupt at the mid. At level 7 the
// order fills, the sweep liquidates it in the same entry with a deficit of
// 2,078,334,807 msat, and auto-deleveraging closes the short that had done
// nothing and takes that from its profit. From level 8 the order is
// refused as insufficient_margin and changes nothing; a 10x long and the
// short's own close still go through, and so does a trigger that would
// open under maintenance get blocked rather than executed.
func TestOpeningUnderMaintenanceIsRefused(t *testing.T) {
	for _, level := range []uint32{trade.LevelOpensAboveMaintenance - 1, trade.LevelOpensAboveMaintenance} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			// The spread is set below the level: from LevelSpreadFitsMargin
			// no market may be given one past its margin cushion, but one
			// set before it keeps it.
			w := newTradeWorldAt(t, trade.LevelOpensAboveMaintenance-1)
			spread := int64(15_000_000)
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: &spread})
			if level >= trade.LevelOpensAboveMaintenance {
				w.raiseLevel(level)
			}
			s, sk := w.account(btcBTC)
			created(t, w.order(s, sk, levered(mktOrder("s", "BTC-PERP", "sell", 100_000), 2)), trade.StatusFilled)
			w.print("BTCUSD", usdQ8(97_000))
			short := w.position(s, "BTC-PERP")
			a, k := w.account(btcBTC / 10)
			long := mktOrder("l", "BTC-PERP", "buy", 100_000) // 100x
			if level < trade.LevelOpensAboveMaintenance {
				w.events = nil
				created(t, w.order(a, k, long), trade.StatusFilled)
				l := w.liquidations(a).Liquidations
				if len(l) != 1 || l[0].Partial || !l[0].ADLTriggered || l[0].DeficitMsat != 2_078_334_807 {
					t.Fatalf("liquidation %+v", l)
				}
				if p := w.position(s, "BTC-PERP"); p.Contracts != 0 {
					t.Fatalf("the short was not deleveraged: %+v (was %+v)", p, short)
				}
				adl := false
				for _, ev := range w.events {
					if f, ok := fillView(ev); ok && ev.Account == s && strings.HasPrefix(f.OrderID, trade.ADLOrderPrefix) {
						adl = true
					}
				}
				if !adl {
					t.Fatal("no ADL fill for the short")
				}
				return
			}
			w.refusedAsIs(a, k, long, http.StatusBadRequest, wire.CodeInsufficientMargin)
			// A stop that would open the same long is blocked when it fires.
			created(t, w.order(a, k, stopOrder("st", "BTC-PERP", "buy", 100_000, usdQ8(97_500))), trade.StatusWorking)
			w.print("BTCUSD", usdQ8(97_500))
			w.wantTrigger(a, "st", trade.TrigBlocked, wire.CodeInsufficientMargin)
			if p := w.position(a, "BTC-PERP"); p.Contracts != 0 || len(w.liquidations(a).Liquidations) != 0 {
				t.Fatalf("long %+v, liquidations %+v", p, w.liquidations(a))
			}
			// 10x holds 10% against 1.5% of spread: taken, and not liquidated.
			created(t, w.order(a, k, levered(mktOrder("l10", "BTC-PERP", "buy", 10_000), 10)), trade.StatusFilled)
			if p := w.position(a, "BTC-PERP"); p.Contracts != 10_000 || len(w.liquidations(a).Liquidations) != 0 {
				t.Fatalf("10x long %+v", p)
			}
			// The short keeps its position and may close it, spread and all.
			if p := w.position(s, "BTC-PERP"); p != short {
				t.Fatalf("short %+v, was %+v", p, short)
			}
			free := w.balance(ledger.Free(s))
			created(t, w.order(s, sk, mktOrder("c", "BTC-PERP", "buy", 100_000)), trade.StatusFilled)
			if w.position(s, "BTC-PERP").Contracts != 0 || w.balance(ledger.Free(s)) <= free {
				t.Fatal("the short could not close")
			}
		})
	}
}
