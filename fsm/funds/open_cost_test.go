package funds

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// openState holds n open withdrawals, seqs 1..n, as RequestWithdrawal
// leaves them (the ledger side is not needed to close them).
func openState(n int) *State {
	s := NewState()
	for i := range n {
		seq := uint64(i + 1)
		s.Withdrawals[seq] = &Withdrawal{Seq: seq, State: StateRequested, Path: PathSpark}
		s.Open = append(s.Open, seq)
	}
	return s
}

// Closing a withdrawal costs what it removes, not a copy of every open
// withdrawal: before the fix each close allocated a new Open (800 KB with
// 100,000 open), so draining them copied 80 GB.
func TestCloseCostsWhatItRemovesNotTheOpenList(t *testing.T) {
	const open = 100_000
	s := openState(open)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	next := uint64(1)
	allocs := testing.AllocsPerRun(1000, func() { // oldest first, as the rail pays
		s.close(s.Withdrawals[next], StatePaid, "", 1)
		next++
	})
	mid := uint64(open / 2)
	for range 100 { // and from the middle, the worst place
		s.close(s.Withdrawals[mid], StateReturned, "r", 1)
		mid++
	}
	runtime.ReadMemStats(&after)
	if allocs > 0.01 {
		t.Fatalf("%.2f allocations per close of %d open withdrawals", allocs, open)
	}
	if perClose := (after.TotalAlloc - before.TotalAlloc) / 1101; perClose > 1024 {
		t.Fatalf("%d bytes allocated per close of %d open withdrawals", perClose, open)
	}
	if len(s.Open) != open-1101 || s.Open[0] != 1002 || !slices.IsSorted(s.Open) || slices.Contains(s.Open, open/2) {
		t.Fatalf("Open has %d, first %d, sorted %v", len(s.Open), s.Open[0], slices.IsSorted(s.Open))
	}
}

// Open after any sequence of closes is what the old whole-list copy left:
// the same seqs in the same order, nil when empty.
func TestCloseLeavesOpenAsTheCopyDid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		n := 1 + rng.IntN(200)
		s := openState(n)
		want := slices.Clone(s.Open)
		for _, k := range rng.Perm(n) {
			seq := uint64(k + 1)
			s.close(s.Withdrawals[seq], StatePaid, "", 1)
			for i, q := range want { // the code before the fix
				if q == seq {
					want = append(want[:i:i], want[i+1:]...)
					break
				}
			}
			if len(want) == 0 {
				want = nil
			}
			if !slices.Equal(s.Open, want) || (s.Open == nil) != (want == nil) {
				t.Fatalf("round %d: closing %d left %v, the copy left %v", round, seq, s.Open, want)
			}
		}
	}
}
