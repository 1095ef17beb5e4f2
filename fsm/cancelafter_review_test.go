package fsm

import (
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
)

// Regression tests from the dead-man/trigger review of 2026-11-28: each
// pins a behaviour the review checked (none failed; they guard it).

// A print stamped at the deadline that crosses a stop: the switch fires
// first (timers run before the entry's command), so the stop never executes.
func TestCancelAllAfterFiresBeforeAPrintAtTheDeadline(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, mktOrder("m", "BTC-PERP", "buy", 10)), trade.StatusFilled)
	created(t, w.order(acct, key, stopOrder("s", "BTC-PERP", "sell", 10, usdQ8(99_800))), trade.StatusWorking)
	d := int64(*w.cancelAfter(acct, key, "arm", 2_000).DeadlineTsMs)
	w.ts = d - 1
	w.print("BTCUSD", usdQ8(99_700))
	w.wantTrigger(acct, "s", trade.TrigCancelled, trade.ReasonCancelAllAfter)
	if w.position(acct, "BTC-PERP").Contracts != 10 {
		t.Fatal("stop executed")
	}
}

// One group entry: a refresh stamped before the deadline, then a print at
// the deadline: each sub-command has its own stamp, the refresh holds, and
// the stop executes.
func TestCancelAllAfterRefreshInAGroupBeforeAPrintKeepsTheStop(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, mktOrder("m", "BTC-PERP", "buy", 10)), trade.StatusFilled)
	created(t, w.order(acct, key, stopOrder("s", "BTC-PERP", "sell", 10, usdQ8(99_800))), trade.StatusWorking)
	d := int64(*w.cancelAfter(acct, key, "arm", 2_000).DeadlineTsMs)
	w.ts = d - 2
	res, _ := w.group(cancelAfterCmd(t, acct, key, "r", 5_000),
		printAt(t, 0, "BTCUSD", usdQ8(99_700), d))
	for _, r := range res.Group {
		wantOK(t, r)
	}
	w.wantTrigger(acct, "s", trade.TrigExecuted, "")
}

// Arm and disarm in one group entry: disarmed, nothing fires later.
func TestCancelAllAfterArmThenDisarmInOneGroup(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	w.group(cancelAfterCmd(t, acct, key, "a", 1_000), cancelAfterCmd(t, acct, key, "b", 0))
	w.tickTo(w.ts + 5_000)
	if w.orderOf(acct, "l").Status != trade.StatusAccepted {
		t.Fatal("fired after disarm")
	}
}

// A take-profit for 4 of 10 contracts executed and trimmed the stop to 6;
// the switch cancels the stop and a resting limit, releases exactly the
// reservation, and leaves the 6 contracts open.
func TestCancelAllAfterCancelsATrimmedLegAndReleasesExactly(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	b := bracket("b", "buy", 10, 0, usdQ8(98_000), usdQ8(101_000))
	b.Bracket.TakeProfitContracts = 4
	created(t, w.order(acct, key, b), trade.StatusFilled)
	created(t, w.order(acct, key, limitOrder("l", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	w.print("BTCUSD", usdQ8(101_500))
	w.wantTrigger(acct, "b.tp", trade.TrigExecuted, "")
	if o := w.orderOf(acct, "b.stop"); o.Contracts != 6 || o.Status != trade.StatusAccepted {
		t.Fatalf("stop %+v", o)
	}
	free, res := w.balance(ledger.Free(acct)), w.balance(ledger.Reserved(acct))
	w.cancelAfter(acct, key, "arm", 1_000)
	w.tickTo(w.ts + 2_000)
	w.wantTrigger(acct, "b.stop", trade.TrigCancelled, trade.ReasonCancelAllAfter)
	if w.balance(ledger.Free(acct)) != free+res || w.balance(ledger.Reserved(acct)) != 0 {
		t.Fatal("money")
	}
	if w.position(acct, "BTC-PERP").Contracts != 6 {
		t.Fatal("position")
	}
}

// An entry stamped an hour ahead moves log time by MaxClockStepMs only:
// a 90 s switch survives the first such entry and fires at the second.
func TestCancelAllAfterFollowsTheBoundedClockStep(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	w.cancelAfter(acct, key, "arm", 90_000)
	w.tickTo(w.ts + 3_600_000)
	if w.orderOf(acct, "l").Status != trade.StatusAccepted {
		t.Fatal("fired past the step cap")
	}
	w.tickTo(w.ts + 3_600_000)
	if w.orderOf(acct, "l").Status != trade.StatusCanceled {
		t.Fatal("not fired")
	}
}

// A refused command stamped at the deadline still fires the switch: the
// time it reflects did pass.
func TestCancelAllAfterFiresOnARefusedEntry(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	d := int64(*w.cancelAfter(acct, key, "arm", 2_000).DeadlineTsMs)
	w.ts = d - 1
	res := w.order(acct, key, limitOrder("bad", "NOPE", "buy", 1, usdQ8(90_000)))
	if res.Status == 200 || res.Status == 201 {
		t.Fatal("accepted")
	}
	if w.orderOf(acct, "l").Status != trade.StatusCanceled {
		t.Fatal("not fired on a refused entry")
	}
}

// A trigger-entry bracket whose stop the entry's own print already passed:
// the stop executes at once; a full stop cancels the take-profit (oco), a
// stop for 4 of 10 leaves it armed for the 6 left.
func TestBracketStopPassedByTheEntrysPrint(t *testing.T) {
	for _, stopN := range []int64{0, 4} {
		w := newTradeWorld(t)
		acct, key := w.account(btcBTC)
		b := bracket("b", "buy", 10, usdQ8(99_900), usdQ8(99_800), usdQ8(101_000))
		b.Bracket.StopContracts = stopN
		b.Leverage = 10
		created(t, w.order(acct, key, b), trade.StatusWorking)
		w.print("BTCUSD", usdQ8(99_700))
		w.wantTrigger(acct, "b", trade.TrigExecuted, "")
		w.wantTrigger(acct, "b.stop", trade.TrigExecuted, "")
		pos := w.position(acct, "BTC-PERP").Contracts
		tp := w.orderOf(acct, "b.tp")
		if stopN == 0 {
			if pos != 0 || tp.Status != trade.StatusCanceled {
				t.Fatalf("pos %d tp %+v", pos, tp)
			}
			continue
		}
		if pos != 6 || tp.Status != trade.StatusAccepted || tp.Contracts != 6 || tp.TrigState != trade.TrigArmed {
			t.Fatalf("pos %d tp %+v", pos, tp)
		}
	}
}

// A print held by the jump guard fires no trigger; the print that
// confirms it does, at its own mid.
func TestTriggerWaitsForTheConfirmingPrint(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, entryOrder("e", "BTC-PERP", "buy", 10, usdQ8(60_000))), trade.StatusWorking)
	var held PrintHeldResult
	res := w.print("BTCUSD", usdQ8(40_000))
	if err := res.Decode(&held); err != nil || !held.Held {
		t.Fatalf("not held: %s", res.Body)
	}
	w.wantTrigger(acct, "e", trade.TrigArmed, "")
	w.print("BTCUSD", usdQ8(41_000))
	w.wantTrigger(acct, "e", trade.TrigExecuted, "")
	f := w.lastFill(acct)
	if f.OracleMidQ8 != usdQ8(41_000) {
		t.Fatalf("fill at mid %d", f.OracleMidQ8)
	}
}
