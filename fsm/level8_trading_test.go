package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Feature level 8, order-lifecycle review (2026-11-27). Each test runs at
// level 7 (the old rule, which must stay as it was for replay) and at
// level 8.

// TestBracketLegsGoWhenTheEntryLeavesNoPosition: a buy bracket whose
// market entry closes a 1,000-contract short leaves the account flat.
// Below the level its sell legs armed anyway, and the take-profit later
// closed an unrelated 500-contract long at 111,000; from the level the
// legs are cancelled (position_closed) by the entry's fill, and the long
// is left alone. The same holds for an entry that only reduces an
// opposite position.
func TestBracketLegsGoWhenTheEntryLeavesNoPosition(t *testing.T) {
	for _, level := range []uint32{trade.LevelLegsNeedPosition - 1, trade.LevelLegsNeedPosition} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			short := mktOrder("short", "BTC-PERP", "sell", 1_500)
			short.Leverage = 10
			created(t, w.order(acct, key, short), trade.StatusFilled)
			// Closes 1,000 of the 1,500 short: still short, nothing long to protect.
			b := bracket("b", "buy", 1_000, 0, usdQ8(95_000), usdQ8(110_000))
			b.Leverage = 10
			created(t, w.order(acct, key, b), trade.StatusFilled)
			// Closes the rest: flat.
			c := bracket("c", "buy", 500, 0, usdQ8(94_000), usdQ8(109_000))
			c.Leverage = 10
			created(t, w.order(acct, key, c), trade.StatusFilled)
			if p := w.position(acct, "BTC-PERP"); p.Contracts != 0 {
				t.Fatalf("position after the closing brackets %+v", p)
			}
			if level < trade.LevelLegsNeedPosition {
				// b's legs went with c's closing fill; c's armed after it.
				w.wantTrigger(acct, "b.tp", trade.TrigCancelled, trade.ReasonPositionClosed)
				w.wantTrigger(acct, "c.tp", trade.TrigArmed, "")
			} else {
				for _, id := range []string{"b.stop", "b.tp", "c.stop", "c.tp"} {
					w.wantTrigger(acct, id, trade.TrigCancelled, trade.ReasonPositionClosed)
				}
			}
			long := mktOrder("long", "BTC-PERP", "buy", 500)
			long.Leverage = 10
			created(t, w.order(acct, key, long), trade.StatusFilled)
			w.print("BTCUSD", usdQ8(111_000))
			p := w.position(acct, "BTC-PERP")
			if level < trade.LevelLegsNeedPosition {
				if p.Contracts != 0 || w.lastFill(acct).OrderID != "c.tp" {
					t.Fatalf("old rule: the orphan take-profit closes the long; position %+v, last fill %s", p, w.lastFill(acct).OrderID)
				}
				return
			}
			if p.Side != trade.Long || p.Contracts != 500 || w.lastFill(acct).OrderID != "long" {
				t.Fatalf("the unrelated long was touched: %+v, last fill %s", p, w.lastFill(acct).OrderID)
			}
		})
	}
}

// TestLimitOrderThatCouldNeverFillIsRefused: a buy limit at the top price
// with maxSlippageQ9 0 (below BTC-PERP's base spread) reserves 2 msat and
// can never fill. Below the level it rests, and each falling print
// re-indexes it one q8 unit below the new mid, so every later falling
// print checks it again; from the level it is refused (validation) and
// nothing changes.
func TestLimitOrderThatCouldNeverFillIsRefused(t *testing.T) {
	for _, level := range []uint32{trade.LevelSlippageBelowSpread - 1, trade.LevelSlippageBelowSpread} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			r := limitOrder("never", "BTC-PERP", "buy", 1, market.PriceQ8Max)
			r.HasMaxSlippage, r.MaxSlippageQ9 = true, 0
			if w.marketParams("BTC-PERP").BaseSpreadQ9 <= 0 {
				t.Fatal("the test needs a market with a base spread")
			}
			if level >= trade.LevelSlippageBelowSpread {
				w.refusedAsIs(acct, key, r, http.StatusBadRequest, wire.CodeValidation)
				// From the base spread up it could fill: it is taken.
				r.MaxSlippageQ9 = w.marketParams("BTC-PERP").BaseSpreadQ9
				if res := w.order(acct, key, r); res.Status != http.StatusCreated {
					t.Fatalf("a bound at the base spread: %d %s", res.Status, res.Body)
				}
				return
			}
			created(t, w.order(acct, key, r), trade.StatusResting)
			if o := w.orderOf(acct, "never"); o.ReservedMsat != 2 {
				t.Fatalf("reservation %d msat, want 2", o.ReservedMsat)
			}
			mid := usdQ8(100_000)
			for i := 0; i < 3; i++ {
				mid -= usdQ8(1)
				w.print("BTCUSD", mid)
				if o := w.orderOf(acct, "never"); o.Status != trade.StatusAccepted || o.LevelQ8 != mid-1 {
					t.Fatalf("after a falling print to %d: %+v", mid, o)
				}
			}
		})
	}
}

// TestADLOrderIDsAreReserved: auto-deleveraging books its fills under
// "adl-<liquidation seq>" on the accounts it closes. Below the level a
// client could name its own order the same, and such a fill then read as
// a fill of the client's order; from the level the prefix is refused
// (validation) and nothing changes, while a lookalike id is taken.
func TestADLOrderIDsAreReserved(t *testing.T) {
	for _, level := range []uint32{trade.LevelADLIDsReserved - 1, trade.LevelADLIDsReserved} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			r := mktOrder(trade.ADLOrderPrefix+"7", "BTC-PERP", "buy", 100)
			if level < trade.LevelADLIDsReserved {
				created(t, w.order(acct, key, r), trade.StatusFilled)
				return
			}
			w.refusedAsIs(acct, key, r, http.StatusBadRequest, wire.CodeValidation)
			created(t, w.order(acct, key, mktOrder("adl7", "BTC-PERP", "buy", 100)), trade.StatusFilled)
		})
	}
}

// TestPartialTakeProfitLeavesTheStopForTheRest: a trader scales out with
// a bracket of 10,000 contracts whose take-profit is for 4,000. Below the
// level the take-profit cancelled the stop for all of it (oco) and the
// 6,000 left had no stop; from the level the stop stays armed for the
// 6,000 left (trimmed to them, announced), and it still protects only the
// bracket's contracts, not another position's on the same side.
func TestPartialTakeProfitLeavesTheStopForTheRest(t *testing.T) {
	for _, level := range []uint32{trade.LevelPartialLegsKeepSibling - 1, trade.LevelPartialLegsKeepSibling} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, acct := takeProfitOnTopOf(t, level, 4_000)
			if p := w.position(acct, "BTC-PERP"); p.Contracts != 9_000 {
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
			// The stop fires for the bracket's 6,000 and leaves the other 3,000.
			w.print("BTCUSD", usdQ8(100_000))
			w.print("BTCUSD", usdQ8(94_900))
			w.wantTrigger(acct, "b.stop", trade.TrigExecuted, "")
			if p := w.position(acct, "BTC-PERP"); p.Contracts != 3_000 {
				t.Fatalf("after the stop: %+v", p)
			}
		})
	}
}

// TestFullLegStillCancelsTheOther: a take-profit for the whole bracket
// cancels the stop as before (oco), at both levels.
func TestFullLegStillCancelsTheOther(t *testing.T) {
	for _, level := range []uint32{trade.LevelPartialLegsKeepSibling - 1, trade.LevelPartialLegsKeepSibling} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, acct := takeProfitOnTopOf(t, level, 0)
			w.wantTrigger(acct, "b.stop", trade.TrigCancelled, trade.ReasonOCO)
			if p := w.position(acct, "BTC-PERP"); p.Contracts != 3_000 {
				t.Fatalf("after the take-profit: %+v", p)
			}
		})
	}
}

// takeProfitOnTopOf opens a 3,000-contract long, then bracket "b" buying
// 10,000 more (stop 95,000, take-profit 101,000 for tpContracts; 0: all
// of it), and prints past the take-profit, which executes.
func takeProfitOnTopOf(t *testing.T, level uint32, tpContracts int64) (*tradeWorld, string) {
	t.Helper()
	w := newTradeWorldAt(t, level)
	acct, key := w.account(btcBTC)
	other := mktOrder("other", "BTC-PERP", "buy", 3_000)
	other.Leverage = 10
	created(t, w.order(acct, key, other), trade.StatusFilled)
	b := bracket("b", "buy", 10_000, 0, usdQ8(95_000), usdQ8(101_000))
	b.Leverage = 10
	b.Bracket.TakeProfitContracts = tpContracts
	created(t, w.order(acct, key, b), trade.StatusFilled)
	w.print("BTCUSD", usdQ8(101_500))
	w.wantTrigger(acct, "b.tp", trade.TrigExecuted, "")
	return w, acct
}

// TestUnknownMarketOrderIs400: SPEC section 7 gives order placement 400
// for its refusals and keeps 404 for an unknown resource in the path; an
// order naming a market the venue does not list is a refusal of the
// order's body. Below the level it stays the stored 404.
func TestUnknownMarketOrderIs400(t *testing.T) {
	for _, level := range []uint32{LevelUnknownMarketIs400 - 1, LevelUnknownMarketIs400} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			r := mktOrder("xrp", "XRP-PERP", "buy", 1)
			if level >= LevelUnknownMarketIs400 {
				w.refusedAsIs(acct, key, r, http.StatusBadRequest, wire.CodeValidation)
				return
			}
			w.refusedAsIs(acct, key, r, http.StatusNotFound, wire.CodeNotFound)
		})
	}
}
