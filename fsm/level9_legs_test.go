package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
)

// TestBracketLegsSizedToWhatTheirEntryOpened: a buy bracket of 1,000
// contracts placed on a 800-contract short closes the short and opens a
// 200-contract long; its legs defaulted to the entry's 1,000. When the
// trader later bought 2,000 more (another order), the bracket's stop
// closed 1,000 contracts: 800 of them were the other order's, which the
// stop never protected (the partial case of LevelLegsNeedPosition: an
// entry that opens less than its contracts). From
// trade.LevelLegsSizedToEntry the legs arm trimmed to what the entry
// opened, and a partial leg trims the other to what is left of that.
func TestBracketLegsSizedToWhatTheirEntryOpened(t *testing.T) {
	for _, level := range []uint32{trade.LevelLegsSizedToEntry - 1, trade.LevelLegsSizedToEntry} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			old := level < trade.LevelLegsSizedToEntry
			w := newTradeWorldAt(t, level)
			acct, key := w.account(btcBTC)
			lev2 := func(r trade.PlaceRequest) trade.PlaceRequest { r.Leverage = 2; return r }
			created(t, w.order(acct, key, lev2(mktOrder("short", "BTC-PERP", "sell", 800))), trade.StatusFilled)
			created(t, w.order(acct, key, lev2(bracket("b", "buy", 1000, 0, usdQ8(99_000), usdQ8(110_000)))), trade.StatusFilled)
			if p := w.position(acct, "BTC-PERP"); p.Side != trade.Long || p.Contracts != 200 {
				t.Fatalf("after the bracket %+v", p)
			}
			legs := int64(200)
			if old {
				legs = 1000
			}
			for _, id := range []string{"b.stop", "b.tp"} {
				if v := w.trigger(acct, id); v.Status != trade.TrigArmed || int64(v.Contracts) != legs {
					t.Fatalf("%s armed %+v, want %d contracts", id, v, legs)
				}
			}
			created(t, w.order(acct, key, lev2(mktOrder("add", "BTC-PERP", "buy", 2000))), trade.StatusFilled)
			w.print("BTCUSD", usdQ8(98_900))
			w.wantTrigger(acct, "b.stop", trade.TrigExecuted, "")
			w.wantTrigger(acct, "b.tp", trade.TrigCancelled, trade.ReasonOCO)
			if f := w.lastFill(acct); f.OrderID != "b.stop" || f.Closed != legs {
				t.Fatalf("the stop's fill %s closed %d, want %d", f.OrderID, f.Closed, legs)
			}
			if p := w.position(acct, "BTC-PERP"); p.Contracts != 2200-legs {
				t.Fatalf("after the stop %+v, want %d left", p, 2200-legs)
			}

			// A partial take-profit trims the stop to what is left of the
			// 200 the entry opened, not of its 1,000 contracts.
			acct, key = w.account(btcBTC)
			created(t, w.order(acct, key, lev2(mktOrder("short", "BTC-PERP", "sell", 800))), trade.StatusFilled)
			c := lev2(bracket("c", "buy", 1000, 0, usdQ8(90_000), usdQ8(100_000)))
			c.Bracket.TakeProfitContracts = 150
			created(t, w.order(acct, key, c), trade.StatusFilled)
			created(t, w.order(acct, key, lev2(mktOrder("add", "BTC-PERP", "buy", 2000))), trade.StatusFilled)
			w.print("BTCUSD", usdQ8(100_000))
			w.wantTrigger(acct, "c.tp", trade.TrigExecuted, "")
			w.wantTrigger(acct, "c.stop", trade.TrigArmed, "")
			stop := int64(50)
			if old {
				stop = 850
			}
			if n := w.orderOf(acct, "c.stop").Contracts; n != stop {
				t.Fatalf("the stop covers %d after the take-profit, want %d", n, stop)
			}
		})
	}
}
