package fsm

import (
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

// cmdTestCreditThenPanic credits money and then panics: the shape of a
// money path that breaks halfway (a debit done, the fee transfer failed).
const cmdTestCreditThenPanic = TestCmdBase + 1

func init() {
	RegisterTestCommand(cmdTestCreditThenPanic, func(c *Ctx) (int, any, *wire.Refusal) {
		if err := c.St.Ledger.Credit(ledger.Free("victim"), 1000); err != nil {
			return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "%v", err)
		}
		c.Emit(Event{Kind: "deposit", Account: "victim"})
		panic("fee transfer failed after the credit")
	})
}

func productionReplica(t *testing.T) *replica {
	return &replica{t: t, m: NewMachine(Options{}), next: 1}
}

func TestPanicInApplyHaltsTheMachine(t *testing.T) {
	r := productionReplica(t)
	wantOK(t, r.apply(tickAt(1000)))
	b, _ := (&Command{Type: cmdTestCreditThenPanic, TsMs: 2000}).Encode()
	res, evs := r.m.Apply(2, b)
	wantRefused(t, res, http.StatusServiceUnavailable, wire.CodeUnavailable)
	if len(evs) != 0 {
		t.Fatalf("the halting entry published %d events", len(evs))
	}
	h := r.m.Halted()
	if h == nil || h.Index != 2 || h.Type != cmdTestCreditThenPanic || !strings.Contains(h.Reason, "fee transfer failed") {
		t.Fatalf("halt = %+v, want index 2, the type and the panic", h)
	}
	if !strings.Contains(h.Stack, "halt_test.go") {
		t.Fatal("the halt must carry the panic's stack for the operator")
	}
	if r.m.Applied() != 1 {
		t.Fatalf("applied index %d, want 1: the halting entry is not applied", r.m.Applied())
	}
	// Nothing more is applied: not a tick, not a noop, not a raft entry.
	rs, _ := r.m.ApplyBatch([]uint64{3, 4, 5}, [][]byte{mustEncode(t, tickAt(9000)), nil, mustEncode(t, noopAt(9001, "k", []byte{1}))})
	if rs[1] != nil {
		t.Fatal("a raft-internal entry got a result")
	}
	for _, i := range []int{0, 2} {
		wantRefused(t, rs[i], http.StatusServiceUnavailable, wire.CodeUnavailable)
	}
	if r.m.Applied() != 1 {
		t.Fatalf("a halted machine advanced its index to %d", r.m.Applied())
	}
	var now int64
	var idem int
	r.m.Read(func(st *State, _ uint64) { now, idem = st.NowMs, len(st.Idem.Records) })
	if now != 2000 || idem != 0 {
		t.Fatalf("a halted machine applied entries: now %d, %d stored answers", now, idem)
	}
	// A half-applied state never leaves the replica.
	if _, err := r.m.Snapshot(); err == nil {
		t.Fatal("a halted machine must not snapshot")
	}
	if err := r.m.Restore(mustSnapshot(t, newReplica(t).m)); err == nil {
		t.Fatal("a halted machine stays halted")
	}
}

// Tests run with CheckInvariants: there the panic must surface, not halt.
func TestPanicInApplyFailsLoudlyUnderCheckInvariants(t *testing.T) {
	r := newReplica(t)
	defer func() {
		if recover() == nil {
			t.Fatal("a panic inside apply must reach the test")
		}
	}()
	r.apply(&Command{Type: cmdTestCreditThenPanic, TsMs: 2000})
}

func TestSnapshotWithBrokenLedgerHalts(t *testing.T) {
	r := productionReplica(t)
	wantOK(t, r.apply(tickAt(1000)))
	r.m.mu.Lock()
	r.m.st.Ledger.Balances[ledger.Free("ghost")] = 5 // money from nowhere
	r.m.mu.Unlock()
	if _, err := r.m.Snapshot(); err == nil || !strings.Contains(err.Error(), "conservation") {
		t.Fatalf("snapshot of a broken ledger: err %v, want a conservation failure", err)
	}
	h := r.m.Halted()
	if h == nil || h.Index != 1 || !strings.Contains(h.Reason, "ledger check failed") {
		t.Fatalf("halt = %+v, want a failed ledger check at index 1", h)
	}
	wantRefused(t, r.apply(tickAt(2000)), http.StatusServiceUnavailable, wire.CodeUnavailable)
}

func TestRestoreRefusesABrokenLedger(t *testing.T) {
	src := productionReplica(t)
	wantOK(t, src.apply(tickAt(1000)))
	src.m.st.Ledger.Balances[ledger.Free("ghost")] = 5
	body, err := Marshal(src.m.st)
	if err != nil {
		t.Fatal(err)
	}
	snap := append(append([]byte("PERPDSNP"), 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1), body...)
	dst := newReplica(t)
	if err := dst.m.Restore(snap); err == nil || !strings.Contains(err.Error(), "conservation") {
		t.Fatalf("restore of a broken ledger: %v", err)
	}
}

func mustEncode(t *testing.T, c *Command) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSnapshot(t *testing.T, m *Machine) []byte {
	t.Helper()
	b, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
