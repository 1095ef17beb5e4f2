package checker

import (
	"testing"

	"github.com/perpd/perpd/jepsen/history"
)

// A retry sent while the clients ran settles its original only when
// acknowledged: a refusal is not stored under the key, so the original may
// still be applied after it. The same refusal after the heal settles it.
func TestInRunRetrySettlesOnlyByAcknowledgement(t *testing.T) {
	refused := history.Op{Type: history.Fail, Status: 409, Code: "conflict"}
	if !Settles(refused) {
		t.Fatal("a conclusive refusal after the heal does not settle")
	}
	refused.InRun = true
	if Settles(refused) {
		t.Fatal("a refusal while the clients ran settles the write")
	}
	if !Settles(history.Op{Type: history.OK, InRun: true}) {
		t.Fatal("an acknowledged in-run retry does not settle")
	}

	b := &builder{}
	id := b.deposit(1, "a", 0, 10, history.Info)
	b.op(9, history.FFaucet, "a", "", 20, 30, history.Fail, history.Op{Resolves: id, Status: 409, Code: "conflict", InRun: true})
	if ws := Writes(b.sorted(), history.FFaucet); ws[0].Outcome != Indeterminate || ws[0].Resolved {
		t.Fatalf("an in-run refusal settled the write: %+v", ws[0])
	}
	b.op(9, history.FFaucet, "a", "", 40, 50, history.OK, history.Op{Resolves: id, Msat: history.Int64(grant), InRun: true})
	ws := Writes(b.sorted(), history.FFaucet)
	if ws[0].Outcome != Applied || !ws[0].Resolved || ws[0].CallNs != 0 || ws[0].ReturnNs != ms(50) {
		t.Fatalf("the acknowledged in-run retry did not settle it from the invocation to its answer: %+v", ws[0])
	}
}

// A write settled by an in-run retry is one deposit between the
// original's invocation and the retry's answer: a read before the
// invocation may not see it, a read after the answer must, a read in
// between may or may not.
func TestLinearizabilityPlacesInRunSettledDepositUpToTheRetrysAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		call, ret  int64
		value      int64
		want       Verdict
		unresolved bool
	}{
		{"read after the retry's answer sees it", 60, 70, grant, Valid, false},
		{"read after the retry's answer misses it", 60, 70, 0, Violation, false},
		{"read during the retry misses it", 35, 38, 0, Valid, false},
		{"read during the retry sees it", 35, 38, grant, Valid, false},
		{"read before the invocation sees it", 6, 8, grant, Violation, false},
		// Without the retry the deposit may happen at any time after its
		// invocation, or never: the same late read missing it is legal.
		{"unsettled: late read misses it", 60, 70, 0, Valid, true},
	} {
		b := &builder{}
		b.deposit(1, "b", 0, 5, history.OK) // so the grant amount is known
		id := b.deposit(2, "a", 10, 20, history.Info)
		if !tc.unresolved {
			b.op(9, history.FFaucet, "a", "", 30, 40, history.Info, history.Op{Resolves: id, InRun: true})
			b.op(10, history.FFaucet, "a", "", 45, 50, history.OK, history.Op{Resolves: id, Msat: history.Int64(grant), InRun: true})
		}
		b.read(3, "a", tc.call, tc.ret, tc.value)
		if res, _ := linCheck(t, b); res.Verdict != tc.want {
			t.Fatalf("%s: verdict %s, want %s (%v)", tc.name, res.Verdict, tc.want, res.Details)
		}
	}
}
