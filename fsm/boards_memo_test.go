package fsm

import "testing"

// The leaderboard's memos (fsm/growth/boards_memo.go, derived, never
// encoded) change no byte: along the timers scenario (trades, prints,
// liquidations, funding flows, day roll-overs), each entry that
// recomputes the boards gives the same state hash on the replica that
// kept its memos since the start, or since a restore halfway, as on one
// restored from the snapshot just before that entry (no memo: every day
// folded from scratch).
func TestBoardsRecomputeWithMemosAsFromScratch(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	_, log := timersScenario(t)
	r := newBenchWorldAt(t, timersScenarioLevel, 0, 0)
	r.addAccounts(0, 400, btcBTC/10)
	computed := func(w *benchWorld) (ts int64) {
		w.m.Read(func(st *State, _ uint64) { ts = st.Growth.Board.ComputedTsMs })
		return ts
	}
	recomputes := 0
	for k, e := range log {
		before, err := r.m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if k == len(log)/2 {
			// A restore halfway: the memos start empty and refill.
			if err := r.m.Restore(before); err != nil {
				t.Fatal(err)
			}
		}
		was := computed(r)
		r.applyRaw(e)
		if computed(r) == was {
			continue
		}
		recomputes++
		x := &benchWorld{tb: t, m: NewMachine(Options{})}
		if err := x.m.Restore(before); err != nil {
			t.Fatal(err)
		}
		x.applyRaw(e)
		_, got, err := r.m.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		_, want, err := x.m.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("entry %d: the recompute with memos gives state %s, from scratch %s", k, got, want)
		}
	}
	if recomputes < 10 {
		t.Fatalf("%d recomputes along the scenario: it tests too little", recomputes)
	}
	t.Logf("%d recomputes compared", recomputes)
}
