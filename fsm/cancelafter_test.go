package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// cancelAfterCmd is what POST /v1/cancel-all-after proposes.
func cancelAfterCmd(t testing.TB, acct, key, idem string, timeoutMs int64) *Command {
	c := mustCommand(t, CmdCancelAllAfter, 0, CancelAllAfterPayload{TimeoutMs: timeoutMs})
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+idem, []byte(fmt.Sprint(timeoutMs))
	return c
}

func (w *tradeWorld) cancelAfter(acct, key, idem string, timeoutMs int64) trade.CancelAfterView {
	w.t.Helper()
	res := w.at(cancelAfterCmd(w.t, acct, key, idem, timeoutMs))
	var v trade.CancelAfterView
	if err := res.Decode(&v); err != nil || res.Status != http.StatusOK {
		w.t.Fatalf("cancel-all-after %d: %d %s", timeoutMs, res.Status, res.Body)
	}
	return v
}

// tickTo applies a tick stamped tsMs and returns its events.
func (w *tradeWorld) tickTo(tsMs int64) []Event {
	w.t.Helper()
	w.ts = tsMs - 1
	from := len(w.events)
	wantOK(w.t, w.at(&Command{Type: CmdTick}))
	return w.events[from:]
}

func armedAt(t *testing.T, v trade.CancelAfterView, deadlineTsMs int64) {
	t.Helper()
	if !v.Armed || v.DeadlineTsMs == nil || int64(*v.DeadlineTsMs) != deadlineTsMs {
		t.Fatalf("answer %+v, want armed until %d", v, deadlineTsMs)
	}
}

func TestCancelAllAfterArmRefreshAndDisarmAnswers(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	v := w.cancelAfter(acct, key, "c1", 5_000)
	armedAt(t, v, w.ts+5_000) // log time of the arming entry + timeoutMs
	w.tickTo(w.ts + 2_000)
	v = w.cancelAfter(acct, key, "c2", 10_000)
	armedAt(t, v, w.ts+10_000) // refreshed from the refresh's log time
	res := w.at(cancelAfterCmd(t, acct, key, "c3", 0))
	if string(res.Body) != `{"armed":false,"deadlineTsMs":null}` {
		t.Fatalf("disarm answers %s", res.Body)
	}
	// Zero on a disarmed switch answers disarmed too.
	if v := w.cancelAfter(acct, key, "c4", 0); v.Armed || v.DeadlineTsMs != nil {
		t.Fatalf("disarm again: %+v", v)
	}
}

func TestCancelAllAfterRefusalsChangeNothing(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	w.cancelAfter(acct, key, "arm", 60_000)
	readKey := "key_read"
	sum := sha256.Sum256([]byte(readKey))
	scopes := access.ScopeRead
	mint := mustCommand(t, CmdMintKey, 0, access.NewKey{KeyID: readKey, KeyHashHex: hex.EncodeToString(sum[:]), Label: "ro", Scopes: &scopes})
	mint.Account, mint.KeyID = acct, key
	wantOK(t, w.at(mint))
	for _, tc := range []struct {
		name      string
		key       string
		timeoutMs int64
		status    int
		code      string
	}{
		{"negative", key, -1, http.StatusBadRequest, wire.CodeValidation},
		{"below the minimum", key, trade.CancelAfterMinMs - 1, http.StatusBadRequest, wire.CodeValidation},
		{"above the maximum", key, trade.CancelAfterMaxMs + 1, http.StatusBadRequest, wire.CodeValidation},
		{"read-only key", readKey, 5_000, http.StatusForbidden, wire.CodeInsufficientScope},
	} {
		before := w.hash()
		c := cancelAfterCmd(t, acct, tc.key, "r-"+tc.name, tc.timeoutMs)
		c.TsMs = w.ts // no time passes, so no timer runs
		res, evs := w.applyEvents(c)
		wantRefused(t, res, tc.status, tc.code)
		if len(evs) != 0 || w.hash() != before {
			t.Fatalf("%s: the refusal changed the state or emitted %d events", tc.name, len(evs))
		}
	}
	// The bounds themselves are accepted.
	w.cancelAfter(acct, key, "min", trade.CancelAfterMinMs)
	w.cancelAfter(acct, key, "max", trade.CancelAfterMaxMs)
}

// cancelEvents returns the order events of evs that canceled an order.
func cancelEvents(evs []Event) []Event {
	var out []Event
	for _, ev := range evs {
		if v, ok := ev.Data.(trade.OrderView); ok && ev.Kind == "order" && v.Status == trade.StatusCanceled {
			out = append(out, ev)
		}
	}
	return out
}

func TestCancelAllAfterDeadlineCancelsRestingOrdersReleasesMarginAndDisarms(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	other, otherKey := w.account(btcBTC)
	created(t, w.order(acct, key, mktOrder("m1", "ETH-PERP", "buy", 10)), trade.StatusFilled)
	created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	created(t, w.order(acct, key, limitOrder("l2", "ETH-PERP", "sell", 5, usdQ8(4_000))), trade.StatusResting)
	created(t, w.order(other, otherKey, limitOrder("o1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	freeBefore, reservedBefore := w.balance(ledger.Free(acct)), w.balance(ledger.Reserved(acct))
	reserved := w.orderOf(acct, "l1").ReservedMsat + w.orderOf(acct, "l2").ReservedMsat
	if reservedBefore != reserved || reserved == 0 {
		t.Fatalf("reserved %d, orders reserve %d", reservedBefore, reserved)
	}
	pos := w.position(acct, "ETH-PERP")
	v := w.cancelAfter(acct, key, "arm", 3_000)
	deadline := int64(*v.DeadlineTsMs)
	var seq uint64
	w.m.Read(func(st *State, _ uint64) { seq = st.Seq })

	if evs := w.tickTo(deadline - 1); len(cancelEvents(evs)) != 0 || w.orderOf(acct, "l1").Status != trade.StatusAccepted {
		t.Fatal("canceled before the deadline")
	}
	evs := cancelEvents(w.tickTo(deadline))
	if len(evs) != 2 || evs[0].Data.(trade.OrderView).OrderID != "l1" || evs[1].Data.(trade.OrderView).OrderID != "l2" {
		t.Fatalf("cancel events %+v", evs)
	}
	for i, ev := range evs {
		if ev.Account != acct || ev.Seq != seq+uint64(i)+1 || ev.TsMs != deadline {
			t.Fatalf("event %d: %+v, want account %s seq %d at %d", i, ev, acct, seq+uint64(i)+1, deadline)
		}
	}
	for _, id := range []string{"l1", "l2"} {
		o := w.orderOf(acct, id)
		if o.Status != trade.StatusCanceled || o.Reason != trade.ReasonCancelAllAfter || o.ReservedMsat != 0 {
			t.Fatalf("order %s after the deadline: %+v", id, o)
		}
	}
	if w.balance(ledger.Reserved(acct)) != 0 || w.balance(ledger.Free(acct)) != freeBefore+reserved {
		t.Fatal("the reservation was not released exactly")
	}
	if w.position(acct, "ETH-PERP") != pos {
		t.Fatal("the switch touched a position")
	}
	if w.orderOf(other, "o1").Status != trade.StatusAccepted {
		t.Fatal("another account's order was canceled")
	}
	var view trade.CancelAfterView
	w.m.Read(func(st *State, _ uint64) { view = st.Trade.CancelAfter(acct) })
	if view.Armed || view.DeadlineTsMs != nil {
		t.Fatalf("still armed after firing: %+v", view)
	}
	// Disarmed: a later order rests undisturbed.
	created(t, w.order(acct, key, limitOrder("l3", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	w.tickTo(deadline + 10_000)
	if w.orderOf(acct, "l3").Status != trade.StatusAccepted {
		t.Fatal("a fired switch fired again")
	}
}

func TestCancelAllAfterRefreshBeforeTheDeadlinePreventsIt(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	first := int64(*w.cancelAfter(acct, key, "arm", 3_000).DeadlineTsMs)
	w.tickTo(first - 1_000)
	second := int64(*w.cancelAfter(acct, key, "refresh", 3_000).DeadlineTsMs)
	w.tickTo(first + 500)
	if w.orderOf(acct, "l1").Status != trade.StatusAccepted {
		t.Fatal("the old deadline fired after a refresh")
	}
	w.tickTo(second)
	if o := w.orderOf(acct, "l1"); o.Status != trade.StatusCanceled || o.Reason != trade.ReasonCancelAllAfter {
		t.Fatalf("the refreshed deadline did not fire: %+v", o)
	}
}

// A refresh is judged at its own entry's log time, after the timers: one
// stamped deadline-1 keeps the orders; one stamped at the deadline (or
// past it) comes too late: the switch fires first, then the call arms a
// new one and answers armed (docs/decisions.md, "When it fires"; the
// OpenAPI description of timeoutMs says so too).
func TestCancelAllAfterRefreshAtTheDeadlineComesTooLate(t *testing.T) {
	for _, late := range []int64{-1, 0, 1} {
		t.Run(fmt.Sprintf("deadline%+d", late), func(t *testing.T) {
			w := newTradeWorld(t)
			acct, key := w.account(btcBTC)
			created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
			deadline := int64(*w.cancelAfter(acct, key, "arm", 3_000).DeadlineTsMs)
			w.ts = deadline + late - 1 // the refresh's entry is stamped deadline+late
			v := w.cancelAfter(acct, key, "refresh", 3_000)
			armedAt(t, v, deadline+late+3_000)
			o := w.orderOf(acct, "l1")
			if late < 0 {
				if o.Status != trade.StatusAccepted {
					t.Fatalf("a refresh before the deadline lost the order: %+v", o)
				}
				return
			}
			if o.Status != trade.StatusCanceled || o.Reason != trade.ReasonCancelAllAfter || o.UpdatedTsMs != deadline+late {
				t.Fatalf("a refresh at or past the deadline kept the order: %+v", o)
			}
		})
	}
}

func TestCancelAllAfterDisarmPreventsIt(t *testing.T) {
	w := newTradeWorld(t)
	acct, key := w.account(btcBTC)
	created(t, w.order(acct, key, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	deadline := int64(*w.cancelAfter(acct, key, "arm", 3_000).DeadlineTsMs)
	w.cancelAfter(acct, key, "disarm", 0)
	w.tickTo(deadline + 60_000)
	if w.orderOf(acct, "l1").Status != trade.StatusAccepted {
		t.Fatal("a disarmed switch canceled an order")
	}
}

// The switch belongs to the account: revoking the key that armed it leaves
// it armed, and it still fires.
func TestCancelAllAfterOutlivesTheArmingKeysRevocation(t *testing.T) {
	w := newTradeWorld(t)
	acct, master := w.account(btcBTC)
	sessKey := "key_sess"
	sum := sha256.Sum256([]byte(sessKey))
	mint := mustCommand(t, CmdMintKey, 0, access.NewKey{KeyID: sessKey, KeyHashHex: hex.EncodeToString(sum[:]), Label: "bot"})
	mint.Account, mint.KeyID = acct, master
	wantOK(t, w.at(mint))
	created(t, w.order(acct, sessKey, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	deadline := int64(*w.cancelAfter(acct, sessKey, "arm", 5_000).DeadlineTsMs)
	rev := mustCommand(t, CmdRevokeKeys, 0, RevokePayload{KeyID: sessKey})
	rev.Account, rev.KeyID = acct, master
	wantOK(t, w.at(rev))
	w.tickTo(deadline)
	if o := w.orderOf(acct, "l1"); o.Status != trade.StatusCanceled || o.Reason != trade.ReasonCancelAllAfter {
		t.Fatalf("the revoked key's switch did not fire: %+v", o)
	}
}

// Two accounts with different deadlines: a tick between them fires only the
// earlier one.
func TestCancelAllAfterFiresOnlyDueDeadlines(t *testing.T) {
	w := newTradeWorld(t)
	a1, k1 := w.account(btcBTC)
	a2, k2 := w.account(btcBTC)
	created(t, w.order(a1, k1, limitOrder("x", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	created(t, w.order(a2, k2, limitOrder("x", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
	d2 := int64(*w.cancelAfter(a2, k2, "arm", 9_000).DeadlineTsMs)
	d1 := int64(*w.cancelAfter(a1, k1, "arm", 3_000).DeadlineTsMs)
	w.tickTo(d1)
	if w.orderOf(a1, "x").Status != trade.StatusCanceled || w.orderOf(a2, "x").Status != trade.StatusAccepted {
		t.Fatal("the earlier deadline alone should have fired")
	}
	w.tickTo(d2)
	if w.orderOf(a2, "x").Status != trade.StatusCanceled {
		t.Fatal("the later deadline did not fire")
	}
}

// Three replicas apply the same entries; the third is rebuilt from the
// first's snapshot between arming and the deadline (its ordered set of
// deadlines is derived afresh from the decoded state). All cancel at the
// same entry with the same events, and their state hashes agree throughout.
func TestCancelAllAfterFiresAtTheSameEntryOnEveryReplica(t *testing.T) {
	ws := []*tradeWorld{newTradeWorld(t), newTradeWorld(t), newTradeWorld(t)}
	same := func(step string) {
		t.Helper()
		for _, w := range ws[1:] {
			if w.hash() != ws[0].hash() {
				t.Fatalf("%s: state hashes differ", step)
			}
		}
	}
	var accts, keys []string
	for _, w := range ws {
		accts, keys = nil, nil
		for i := 0; i < 3; i++ {
			a, k := w.account(btcBTC)
			accts, keys = append(accts, a), append(keys, k)
			created(t, w.order(a, k, limitOrder("l1", "BTC-PERP", "buy", 1000, usdQ8(90_000))), trade.StatusResting)
			created(t, w.order(a, k, limitOrder("l2", "ETH-PERP", "sell", 5, usdQ8(4_000))), trade.StatusResting)
		}
		// Two accounts share a deadline: ties are ordered by account id.
		w.cancelAfter(accts[2], keys[2], "arm", 4_000)
		w.cancelAfter(accts[0], keys[0], "arm", 3_999)
		w.cancelAfter(accts[1], keys[1], "arm", 60_000)
	}
	same("armed")
	snap, err := ws[0].m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ws[2].m = NewMachine(Options{CheckInvariants: true})
	if err := ws[2].m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	same("restored")
	fired := make([]map[uint64][]Event, len(ws))
	for i := range fired {
		fired[i] = map[uint64][]Event{}
	}
	for step := 0; step < 10; step++ {
		for i, w := range ws {
			if evs := cancelEvents(w.tickTo(w.ts + 500)); len(evs) > 0 {
				fired[i][w.next-1] = evs
			}
		}
		same(fmt.Sprintf("tick %d", step))
	}
	if len(fired[0]) != 1 {
		t.Fatalf("want the two due switches to fire at one entry, got %d entries", len(fired[0]))
	}
	for idx, evs := range fired[0] {
		if len(evs) != 4 || evs[0].Account != accts[0] || evs[2].Account != accts[2] {
			t.Fatalf("entry %d events %+v", idx, evs)
		}
		for i := range ws[1:] {
			got := fired[i+1][idx]
			if len(got) != len(evs) {
				t.Fatalf("replica %d fired %d events at entry %d, want %d", i+1, len(got), idx, len(evs))
			}
			if !reflect.DeepEqual(got, evs) {
				t.Fatalf("replica %d events %+v, want %+v", i+1, got, evs)
			}
		}
	}
	if ws[2].orderOf(accts[1], "l1").Status != trade.StatusAccepted {
		t.Fatal("the later deadline fired early")
	}
}

// TestCancelAllAfterFiresAtMostABudgetAnEntry: deadlines are the client's
// to choose, so many accounts' switches, each over 200 resting orders, can
// come due at one entry (resource review, 2026-11-29: 880,000 cancels held
// apply for 5.8 s). From trade.LevelCancelAfterBudget one entry fires the
// due switches while their orders fit trade.CancelAfterFireBudget, and the
// next entry that advances log time fires the rest, in (deadline, account)
// order; below the level all fire at once, as the log's old entries did.
func TestCancelAllAfterFiresAtMostABudgetAnEntry(t *testing.T) {
	per := trade.RestingOrdersPerAccountMax
	accounts := trade.CancelAfterFireBudget/per + 1
	for _, level := range []uint32{trade.LevelCancelAfterBudget - 1, trade.LevelCancelAfterBudget} {
		w := newTradeWorldAt(t, level)
		w.unchecked, w.m.opts.CheckInvariants = true, false // O(state) a check, 20,000 times
		var accts []string
		for range accounts {
			wantOK(t, w.print("BTCUSD", usdQ8(100_000))) // log time passes: keep the oracle fresh
			a, k := w.account(btcBTC)
			for j := range per {
				created(t, w.order(a, k, limitOrder(fmt.Sprintf("r%d", j), "BTC-PERP", "buy", 1, usdQ8(90_000))), trade.StatusResting)
			}
			accts = append(accts, a)
			w.cancelAfter(a, k, "arm", 60_000)
		}
		// Every deadline within one second of log time: one tick covers all.
		var last int64
		w.m.Read(func(st *State, _ uint64) { last = int64(*st.Trade.CancelAfter(accts[len(accts)-1]).DeadlineTsMs) })
		first := len(cancelEvents(w.tickTo(last)))
		if level < trade.LevelCancelAfterBudget {
			if first != accounts*per {
				t.Fatalf("level %d: %d cancels at the deadline, want all %d", level, first, accounts*per)
			}
			continue
		}
		if first > trade.CancelAfterFireBudget || first < trade.CancelAfterFireBudget-per {
			t.Fatalf("level %d: %d cancels in the first entry, want at most the budget %d", level, first, trade.CancelAfterFireBudget)
		}
		left := 0
		w.m.Read(func(st *State, _ uint64) {
			for _, a := range accts {
				if st.Trade.CancelAfter(a).Armed {
					left++
				}
			}
		})
		if left*per != accounts*per-first {
			t.Fatalf("level %d: %d switches still armed after %d of %d cancels", level, left, first, accounts*per)
		}
		if rest := len(cancelEvents(w.tickTo(w.ts + 1_000))); first+rest != accounts*per {
			t.Fatalf("level %d: the next entry cancelled %d, want the other %d", level, rest, accounts*per-first)
		}
		w.unchecked, w.m.opts.CheckInvariants = false, true
		w.tickTo(w.ts + 1_000) // the invariants are checked after it
	}
}

// TestCancelAllAfterRefreshOfAnOverdueSwitchFiresItFirst: with the budget,
// a due switch can wait for a later entry; a refresh in that entry came
// after the deadline, so it must find the switch fired (its orders
// cancelled) and arm anew, not rescue the orders as a refresh in time does.
func TestCancelAllAfterRefreshOfAnOverdueSwitchFiresItFirst(t *testing.T) {
	per := trade.RestingOrdersPerAccountMax
	w := newTradeWorldAt(t, trade.LevelCancelAfterBudget)
	w.unchecked, w.m.opts.CheckInvariants = true, false
	// Two budgets' worth of other switches, all due before the honest one.
	for range 2*trade.CancelAfterFireBudget/per + 1 {
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		a, k := w.account(btcBTC)
		for j := range per {
			created(t, w.order(a, k, limitOrder(fmt.Sprintf("r%d", j), "BTC-PERP", "buy", 1, usdQ8(90_000))), trade.StatusResting)
		}
		w.cancelAfter(a, k, "arm", 60_000)
	}
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	h, hk := w.account(btcBTC)
	created(t, w.order(h, hk, limitOrder("mine", "BTC-PERP", "buy", 1, usdQ8(90_000))), trade.StatusResting)
	due := int64(*w.cancelAfter(h, hk, "arm", 60_000).DeadlineTsMs)
	w.tickTo(due) // fires the first budget only
	if w.orderOf(h, "mine").Status != trade.StatusAccepted {
		t.Fatal("the honest switch fired in the first entry; the test needs it left for later")
	}
	// The refresh's entry fires the second budget in its timer, then the
	// handler fires the honest switch before arming it again.
	armedAt(t, w.cancelAfter(h, hk, "late", 60_000), w.ts+60_000)
	if got := w.orderOf(h, "mine"); got.Status != trade.StatusCanceled {
		t.Fatalf("a refresh after the deadline rescued the order: %s", got.Status)
	}
	w.unchecked, w.m.opts.CheckInvariants = false, true
	w.tickTo(w.ts + 1_000)
}
