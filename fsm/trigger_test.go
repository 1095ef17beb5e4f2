package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// stopOrder is a stop_market order on BTC-PERP-like markets.
func stopOrder(id, mkt, side string, n, levelQ8 int64) trade.PlaceRequest {
	return trade.PlaceRequest{OrderID: id, MarketID: mkt, Side: side, Type: trade.TypeStopMarket, Contracts: n, TriggerPriceQ8: levelQ8}
}

func tpOrder(id, mkt, side string, n, levelQ8 int64) trade.PlaceRequest {
	return trade.PlaceRequest{OrderID: id, MarketID: mkt, Side: side, Type: trade.TypeTakeProfitMarket, Contracts: n, TriggerPriceQ8: levelQ8}
}

func entryOrder(id, mkt, side string, n, levelQ8 int64) trade.PlaceRequest {
	return trade.PlaceRequest{OrderID: id, MarketID: mkt, Side: side, Type: trade.TypeMarket, Contracts: n,
		TriggerKind: trade.KindEntry, TriggerLevelQ8: levelQ8}
}

// bracket is a BTC-PERP bracket; entryQ8 0 is a market entry, a zero leg
// level leaves that leg out.
func bracket(id, side string, n, entryQ8, stopQ8, tpQ8 int64) trade.PlaceRequest {
	b := &trade.BracketRequest{EntryKind: trade.BracketEntryMarket, StopLevelQ8: stopQ8, TakeProfitLevelQ8: tpQ8}
	if entryQ8 != 0 {
		b.EntryKind, b.EntryLevelQ8 = trade.BracketEntryTrigger, entryQ8
	}
	return trade.PlaceRequest{OrderID: id, MarketID: "BTC-PERP", Side: side, Type: trade.TypeMarket, Contracts: n, Bracket: b}
}

func (w *tradeWorld) trigger(acct, id string) trade.TriggerView {
	w.t.Helper()
	o := w.orderOf(acct, id)
	return trade.NewTriggerView(&o)
}

func (w *tradeWorld) wantTrigger(acct, id, status, reason string) {
	w.t.Helper()
	v := w.trigger(acct, id)
	got := ""
	if v.Reason != nil {
		got = *v.Reason
	}
	if v.Status != status || got != reason {
		w.t.Fatalf("trigger %s: %s (%q), want %s (%q)", id, v.Status, got, status, reason)
	}
}

func (w *tradeWorld) triggersPage(acct, state string) (p trade.TriggersPage) {
	w.m.Read(func(st *State, _ uint64) { p = st.Trade.TriggersPage(acct, state, 0, 50) })
	return p
}

func TestStopLossClosesALongWhenThePriceFalls(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	open := mktOrder("open", "BTC-PERP", "buy", 1000)
	open.Leverage = 10
	created(t, w.order(acct, key, open), trade.StatusFilled)
	stop := stopOrder("sl", "BTC-PERP", "sell", 1000, usdQ8(99_500))
	stop.ReduceOnly = true
	created(t, w.order(acct, key, stop), trade.StatusWorking)
	w.wantTrigger(acct, "sl", trade.TrigArmed, "")
	if v := w.orderOf(acct, "sl"); v.Status != trade.StatusAccepted || v.Type != trade.TypeStopMarket {
		t.Fatalf("order view of a live stop: %+v", v)
	}
	if p := w.triggersPage(acct, trade.TrigArmed); len(p.Triggers) != 1 || p.Triggers[0].OrderID != "sl" || p.Triggers[0].Kind != trade.KindStop {
		t.Fatalf("armed page %+v", p)
	}
	free := w.balance(ledger.Free(acct))

	w.print("BTCUSD", usdQ8(99_501)) // not reached
	w.wantTrigger(acct, "sl", trade.TrigArmed, "")
	w.events = nil
	w.print("BTCUSD", usdQ8(99_400)) // through the level: executes at this print
	w.wantTrigger(acct, "sl", trade.TrigExecuted, "")
	if p := w.position(acct, "BTC-PERP"); p.Contracts != 0 {
		t.Fatalf("position after the stop %+v", p)
	}
	f := w.lastFill(acct)
	if f.OrderID != "sl" || f.Side != trade.Short || f.Closed != 1000 || f.OracleMidQ8 != usdQ8(99_400) || f.ExecQ8 >= usdQ8(99_400) {
		t.Fatalf("stop fill %+v", f)
	}
	if f.RealizedPnlMsat >= 0 || w.balance(ledger.Free(acct)) <= free {
		t.Fatalf("a stop on a loss: pnl %d, free %d -> %d", f.RealizedPnlMsat, free, w.balance(ledger.Free(acct)))
	}
	// Events: the fill, the trigger's change and the position, fresh seqs.
	var kinds []string
	var last uint64
	for _, ev := range w.events {
		if ev.Account != acct {
			continue
		}
		kinds = append(kinds, ev.Kind)
		if ev.Seq <= last {
			t.Fatalf("seqs not increasing: %v", w.events)
		}
		last = ev.Seq
	}
	if len(kinds) != 3 || kinds[0] != "fill" || kinds[1] != "trigger" || kinds[2] != "position" {
		t.Fatalf("events %v", kinds)
	}
	if len(w.triggersPage(acct, trade.TrigArmed).Triggers) != 0 {
		t.Fatal("executed trigger still on the armed page")
	}
}

func TestTakeProfitAndEntryTriggers(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	// Short, with a take-profit buy below the price.
	created(t, w.order(acct, key, mktOrder("open", "ETH-PERP", "sell", 100_000)), trade.StatusFilled)
	tp := tpOrder("tp", "ETH-PERP", "buy", 100_000, usdQ8(3_300))
	tp.ReduceOnly = true
	created(t, w.order(acct, key, tp), trade.StatusWorking)
	// A buy entry above the price (a breakout), and one below (a dip).
	up, dip := entryOrder("up", "BTC-PERP", "buy", 500, usdQ8(101_000)), entryOrder("dip", "BTC-PERP", "buy", 300, usdQ8(99_000))
	up.Leverage, dip.Leverage = 10, 10
	created(t, w.order(acct, key, up), trade.StatusWorking)
	created(t, w.order(acct, key, dip), trade.StatusWorking)

	w.print("ETHUSD", usdQ8(3_299))
	w.wantTrigger(acct, "tp", trade.TrigExecuted, "")
	if f := w.lastFill(acct); f.OrderID != "tp" || f.RealizedPnlMsat <= 0 || f.After.Contracts != 0 {
		t.Fatalf("take-profit fill %+v", f)
	}
	w.print("BTCUSD", usdQ8(100_500))
	w.wantTrigger(acct, "up", trade.TrigArmed, "")
	w.print("BTCUSD", usdQ8(101_000)) // exactly the level
	w.wantTrigger(acct, "up", trade.TrigExecuted, "")
	w.wantTrigger(acct, "dip", trade.TrigArmed, "")
	w.print("BTCUSD", usdQ8(98_000))
	w.wantTrigger(acct, "dip", trade.TrigExecuted, "")
	if p := w.position(acct, "BTC-PERP"); p.Side != trade.Long || p.Contracts != 800 {
		t.Fatalf("position after two entries %+v", p)
	}
	if v := w.orderOf(acct, "dip"); v.Status != trade.StatusFilled || v.Type != trade.TypeMarket {
		t.Fatalf("executed entry's order view %+v", v)
	}
}

func TestTriggersThatCannotExecuteAreBlockedWithTheReason(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	// A reduce-only stop with no position to reduce.
	stop := stopOrder("lonely", "BTC-PERP", "sell", 10, usdQ8(99_000))
	stop.ReduceOnly = true
	created(t, w.order(acct, key, stop), trade.StatusWorking)
	// An entry whose margin is gone when it fires.
	poor, poorKey := w.account(btcBTC / 1000)
	created(t, w.order(poor, poorKey, entryOrder("big", "BTC-PERP", "sell", 100_000, usdQ8(98_500))), trade.StatusWorking)
	// A stop whose slippage bound the spread already breaks.
	slip := stopOrder("slip", "BTC-PERP", "sell", 10, usdQ8(98_500))
	slip.HasMaxSlippage, slip.MaxSlippageQ9 = true, 0
	created(t, w.order(acct, key, slip), trade.StatusWorking)
	before := w.balance(ledger.Free(poor))

	w.print("BTCUSD", usdQ8(98_000))
	w.wantTrigger(acct, "lonely", trade.TrigBlocked, wire.CodeReduceOnly)
	w.wantTrigger(poor, "big", trade.TrigBlocked, wire.CodeInsufficientMargin)
	w.wantTrigger(acct, "slip", trade.TrigBlocked, trade.ReasonSlippage)
	if v := w.orderOf(acct, "lonely"); v.Status != trade.StatusRejected {
		t.Fatalf("blocked trigger's order view %+v", v)
	}
	if w.balance(ledger.Free(poor)) != before || w.position(poor, "BTC-PERP").Contracts != 0 {
		t.Fatal("a blocked trigger moved money or opened a position")
	}

	// A halted market's book waits (from trade.LevelHaltResume; below it
	// the stop was blocked market_halted, TestStopPassedDuringAHaltExecutesWhenItEnds):
	// the stop the price passes fires when the market resumes.
	created(t, w.order(acct, key, stopOrder("halt", "BTC-PERP", "buy", 10, usdQ8(99_000))), trade.StatusWorking)
	halted, live := market.StatusHalted, market.StatusLive
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
	w.print("BTCUSD", usdQ8(99_500))
	w.wantTrigger(acct, "halt", trade.TrigArmed, "")
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
	w.wantTrigger(acct, "halt", trade.TrigExecuted, "")
}

func TestCancelATriggerAndItsAnswers(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, stopOrder("s", "BTC-PERP", "buy", 10, usdQ8(101_000))), trade.StatusWorking)
	res := w.cancel(acct, key, "s", "c1")
	var cr CancelResult
	if res.Status != http.StatusOK || res.Decode(&cr) != nil || !cr.Canceled {
		t.Fatalf("cancel: %d %s", res.Status, res.Body)
	}
	w.wantTrigger(acct, "s", trade.TrigCancelled, "")
	if res := w.cancel(acct, key, "s", "c2"); res.Decode(&cr) != nil || cr.Canceled {
		t.Fatalf("second cancel: %s", res.Body)
	}
	w.print("BTCUSD", usdQ8(102_000))
	if w.position(acct, "BTC-PERP").Contracts != 0 {
		t.Fatal("a cancelled stop fired")
	}
}

func TestBracketWithMarketEntryOCO(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	w.events = nil
	created(t, w.order(acct, key, bracket("b", "buy", 1000, 0, usdQ8(95_000), usdQ8(110_000))), trade.StatusFilled)
	if p := w.position(acct, "BTC-PERP"); p.Contracts != 1000 {
		t.Fatalf("entry position %+v", p)
	}
	w.wantTrigger(acct, "b.stop", trade.TrigArmed, "")
	w.wantTrigger(acct, "b.tp", trade.TrigArmed, "")
	if v := w.trigger(acct, "b.tp"); v.OCOGroup == nil || *v.OCOGroup != "b" || !v.ReduceOnly || v.Side != "sell" || v.Contracts != 1000 {
		t.Fatalf("leg %+v", v)
	}
	// One event per change: fill, order, position, then each leg armed.
	// No stats frame: open interest reaches the stats channel with the
	// next print (a frame per fill to every subscriber was most of the
	// WebSocket fan-out).
	var kinds []string
	for _, ev := range w.events {
		kinds = append(kinds, ev.Kind)
	}
	if want := []string{"fill", "order", "position", "trigger", "trigger"}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	w.print("BTCUSD", usdQ8(111_000))
	w.wantTrigger(acct, "b.tp", trade.TrigExecuted, "")
	w.wantTrigger(acct, "b.stop", trade.TrigCancelled, trade.ReasonOCO)
	if p := w.position(acct, "BTC-PERP"); p.Contracts != 0 {
		t.Fatalf("after take-profit %+v", p)
	}
	w.print("BTCUSD", usdQ8(90_000))
	if w.lastFill(acct).OrderID != "b.tp" {
		t.Fatal("the cancelled leg fired")
	}
	// Cancelling a finished bracket cancels nothing.
	var cr CancelResult
	if res := w.cancel(acct, key, "b", "cb"); res.Decode(&cr) != nil || cr.Canceled {
		t.Fatalf("cancel finished bracket: %s", res.Body)
	}
}

func TestBracketPartialLegsAndPositionClose(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	b := bracket("b", "sell", 1000, 0, usdQ8(103_000), usdQ8(97_000))
	b.Bracket.StopContracts, b.Leverage = 400, 10
	created(t, w.order(acct, key, b), trade.StatusFilled)
	w.print("BTCUSD", usdQ8(103_500))
	w.wantTrigger(acct, "b.stop", trade.TrigExecuted, "")
	// The take-profit stays for the 600 left (LevelPartialLegsKeepSibling;
	// oco below it, TestPartialTakeProfitLeavesTheStopForTheRest).
	w.wantTrigger(acct, "b.tp", trade.TrigArmed, "")
	if p := w.position(acct, "BTC-PERP"); p.Side != trade.Short || p.Contracts != 600 {
		t.Fatalf("after a partial stop %+v", p)
	}
	if n := w.orderOf(acct, "b.tp").Contracts; n != 600 {
		t.Fatalf("the take-profit covers %d, want the 600 left", n)
	}

	// A second bracket's legs go when the position is closed by hand.
	c := bracket("c", "sell", 100, 0, usdQ8(110_000), usdQ8(90_000))
	c.Leverage = 10
	created(t, w.order(acct, key, c), trade.StatusFilled)
	created(t, w.order(acct, key, mktOrder("flat", "BTC-PERP", "buy", 700)), trade.StatusFilled)
	w.wantTrigger(acct, "c.stop", trade.TrigCancelled, trade.ReasonPositionClosed)
	w.wantTrigger(acct, "c.tp", trade.TrigCancelled, trade.ReasonPositionClosed)
	w.wantTrigger(acct, "b.tp", trade.TrigCancelled, trade.ReasonPositionClosed)

	// Leg ids are taken: a bracket whose leg id is in use is refused.
	created(t, w.order(acct, key, mktOrder("d.tp", "BTC-PERP", "buy", 1)), trade.StatusFilled)
	w.refusedAsIs(acct, key, bracket("d", "buy", 10, 0, usdQ8(90_000), usdQ8(110_000)), http.StatusConflict, wire.CodeIdempotencyReused)
}

func TestBracketWithTriggerEntry(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, bracket("b", "buy", 1000, usdQ8(101_000), usdQ8(99_000), usdQ8(105_000))), trade.StatusWorking)
	w.wantTrigger(acct, "b", trade.TrigArmed, "")
	w.wantTrigger(acct, "b.stop", trade.TrigResting, "")
	if p := w.triggersPage(acct, trade.TrigResting); len(p.Triggers) != 2 {
		t.Fatalf("resting page %+v", p)
	}
	// Legs do not fire before their entry.
	w.print("BTCUSD", usdQ8(98_000))
	w.wantTrigger(acct, "b.stop", trade.TrigResting, "")
	w.print("BTCUSD", usdQ8(101_500))
	w.wantTrigger(acct, "b", trade.TrigExecuted, "")
	w.wantTrigger(acct, "b.stop", trade.TrigArmed, "")
	w.wantTrigger(acct, "b.tp", trade.TrigArmed, "")
	// The bracket's id cancels its live legs.
	var cr CancelResult
	if res := w.cancel(acct, key, "b", "cb"); res.Decode(&cr) != nil || !cr.Canceled {
		t.Fatalf("cancel bracket: %s", res.Body)
	}
	w.wantTrigger(acct, "b.stop", trade.TrigCancelled, "")
	w.wantTrigger(acct, "b.tp", trade.TrigCancelled, "")
	if w.position(acct, "BTC-PERP").Contracts != 1000 {
		t.Fatal("cancelling the legs touched the position")
	}

	// Cancelling an entry that has not fired takes its legs along.
	created(t, w.order(acct, key, bracket("e", "sell", 10, usdQ8(100_000), usdQ8(102_000), usdQ8(95_000))), trade.StatusWorking)
	w.cancel(acct, key, "e", "ce")
	w.wantTrigger(acct, "e", trade.TrigCancelled, "")
	w.wantTrigger(acct, "e.stop", trade.TrigCancelled, trade.ReasonEntryCanceled)

	// A gap: the entry fires beyond its take-profit, which executes at once.
	acct, key = w.account(btcBTC)
	created(t, w.order(acct, key, bracket("g", "sell", 100, usdQ8(100_000), usdQ8(103_000), usdQ8(99_000))), trade.StatusWorking)
	w.print("BTCUSD", usdQ8(98_500))
	w.wantTrigger(acct, "g", trade.TrigExecuted, "")
	w.wantTrigger(acct, "g.tp", trade.TrigExecuted, "")
	w.wantTrigger(acct, "g.stop", trade.TrigCancelled, trade.ReasonOCO)

	// An entry that cannot execute blocks, and its legs go with it.
	poor, poorKey := w.account(btcBTC / 10_000)
	created(t, w.order(poor, poorKey, bracket("p", "buy", 100_000, usdQ8(99_000), usdQ8(97_000), 0)), trade.StatusWorking)
	w.print("BTCUSD", usdQ8(99_100))
	w.wantTrigger(poor, "p", trade.TrigBlocked, wire.CodeInsufficientMargin)
	w.wantTrigger(poor, "p.stop", trade.TrigCancelled, trade.ReasonEntryBlocked)
}

func TestCancelAllAfterCancelsTriggersAndBrackets(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, stopOrder("s", "BTC-PERP", "buy", 10, usdQ8(101_000))), trade.StatusWorking)
	created(t, w.order(acct, key, bracket("b", "buy", 10, usdQ8(99_000), usdQ8(98_000), usdQ8(105_000))), trade.StatusWorking)
	created(t, w.order(acct, key, bracket("m", "buy", 10, 0, usdQ8(98_000), usdQ8(105_000))), trade.StatusFilled)
	w.cancelAfter(acct, key, "arm", 5_000)
	w.tickTo(w.ts + 6_000)
	for _, id := range []string{"s", "b", "b.stop", "b.tp", "m.stop", "m.tp"} {
		if v := w.trigger(acct, id); v.Status != trade.TrigCancelled {
			t.Fatalf("%s after the deadline: %+v", id, v)
		}
	}
	if w.position(acct, "BTC-PERP").Contracts != 10 {
		t.Fatal("the switch touched the position")
	}
}
