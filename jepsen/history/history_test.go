package history

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRecorderStreamsAHistoryThatLoadsBackPaired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r, err := NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Invoke(Op{Process: 1, F: FFaucet, Account: "acc", IdemKey: "k1"})
	b := r.Invoke(Op{Process: 2, F: FRead, Account: "acc"})
	r.Complete(b, Op{Type: OK, Msat: Int64(5)})
	r.Complete(a, Op{Type: Info, Status: 503})
	c := r.Invoke(Op{Process: 3, F: FRead}) // never completes
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 5 {
		t.Fatalf("loaded %d events, want 5", len(ops))
	}
	for i, op := range ops {
		if op.Index != i || (i > 0 && op.TimeNs < ops[i-1].TimeNs) {
			t.Fatalf("event %d out of order: %+v", i, op)
		}
	}
	pairs := Pairs(ops)
	if len(pairs) != 3 {
		t.Fatalf("%d pairs, want 3", len(pairs))
	}
	if pairs[0].Invoke.ID != a.ID || pairs[0].Outcome() != Info || pairs[0].Done.IdemKey != "k1" || pairs[0].Done.F != FFaucet {
		t.Fatalf("first pair wrong: %+v %+v", pairs[0].Invoke, pairs[0].Done)
	}
	if pairs[1].Outcome() != OK || *pairs[1].Done.Msat != 5 {
		t.Fatalf("second pair wrong: %+v", pairs[1].Done)
	}
	if pairs[2].Invoke.ID != c.ID || pairs[2].Done != nil || pairs[2].Outcome() != Info {
		t.Fatal("an invocation that never completed must count as info")
	}
}

// A retry's completion carries what it settles and whether it was sent
// while the clients ran (the checkers judge the completion).
func TestCompleteCarriesTheRetrysMarks(t *testing.T) {
	r, err := NewRecorder("")
	if err != nil {
		t.Fatal(err)
	}
	inv := r.Invoke(Op{Process: 1, F: FFaucet, IdemKey: "k1", Resolves: 7, InRun: true})
	done := r.Complete(inv, Op{Type: Fail, Status: 409})
	if done.Resolves != 7 || !done.InRun || done.IdemKey != "k1" {
		t.Fatalf("completion %+v", done)
	}
	if plain := r.Complete(r.Invoke(Op{Process: 2, F: FFaucet}), Op{Type: OK}); plain.InRun || plain.Resolves != 0 {
		t.Fatalf("completion %+v", plain)
	}
}
