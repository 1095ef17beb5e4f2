package funds

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
)

// BenchmarkWithdrawWithHeldHistory measures one Spark withdrawal request
// (the per-account open count apply asks first, then RequestWithdrawal
// with its retention trim) against an account whose closed withdrawals
// are all younger than WithdrawalRetainMs, so none may go: the history a
// client at the withdraw budget (20 a minute) holds after two days is
// about 57,600. Every request walks the whole history (and the trim
// copies it); the cost grows with it.
func BenchmarkWithdrawWithHeldHistory(b *testing.B) {
	for _, held := range []int{1_000, 50_000} {
		b.Run(fmt.Sprint(held), func(b *testing.B) {
			s, l := NewState(), ledger.New()
			if err := l.Credit(ledger.Free("a"), 1<<50); err != nil {
				b.Fatal(err)
			}
			for i := range held {
				seq := uint64(i + 1)
				w := &Withdrawal{Seq: seq, AccountID: "a", State: StatePaid, Path: PathSpark, RailRef: fmt.Sprint("old-", i), ClosedTsMs: 1}
				s.Withdrawals[seq] = w
				s.WithdrawalsByAccount["a"] = append(s.WithdrawalsByAccount["a"], seq)
				s.WithdrawalByChange[seq] = seq
				s.WithdrawalByRailRef[w.RailRef] = seq
			}
			seq := uint64(held + 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = s.OpenWithdrawals("a")
				r := WithdrawalRequest{AmountMsat: 1_000, FeeMsat: 1, Path: PathSpark, Destination: "d", RailRef: fmt.Sprint("new-", i)}
				if _, ref := s.RequestWithdrawal(l, "a", r, seq, 2); ref != nil {
					b.Fatal(ref)
				}
				seq++
			}
		})
	}
}

// TestTrimCopiesNothingWhileEverythingIsHeld: an account past
// MaxClosedWithdrawalsPerAccount whose closed withdrawals are all inside
// their two-day hold keeps them all, and each request's trim used to copy
// the whole index anyway. Now nothing is allocated; a trim that drops
// keeps the rest in order.
func TestTrimCopiesNothingWhileEverythingIsHeld(t *testing.T) {
	s := NewState()
	held := 3 * MaxClosedWithdrawalsPerAccount
	for i := range held {
		seq := uint64(i + 1)
		w := &Withdrawal{Seq: seq, AccountID: "a", State: StatePaid, Path: PathSpark, RailRef: fmt.Sprint("old-", i), ClosedTsMs: int64(i + 1)}
		s.Withdrawals[seq] = w
		s.WithdrawalsByAccount["a"] = append(s.WithdrawalsByAccount["a"], seq)
		s.WithdrawalByChange[seq] = seq
		s.WithdrawalByRailRef[w.RailRef] = seq
	}
	if allocs := testing.AllocsPerRun(10, func() { s.trimWithdrawals("a", WithdrawalRetainMs) }); allocs != 0 {
		t.Fatalf("a trim that drops nothing allocated %v times", allocs)
	}
	if got := len(s.WithdrawalsByAccount["a"]); got != held {
		t.Fatalf("%d kept, want all %d (all held)", got, held)
	}
	// Ten have closed two days ago at ts 10: those ten go, in order.
	s.trimWithdrawals("a", 10+WithdrawalRetainMs)
	seqs := s.WithdrawalsByAccount["a"]
	if len(seqs) != held-10 || seqs[0] != 11 || seqs[len(seqs)-1] != uint64(held) {
		t.Fatalf("after the hold of ten ended: %d kept, from %d to %d", len(seqs), seqs[0], seqs[len(seqs)-1])
	}
	if _, ok := s.WithdrawalByRailRef["old-9"]; ok {
		t.Fatal("a dropped withdrawal is still indexed by its rail reference")
	}
	// Past MaxClosedWithdrawalsHeld the oldest go however recent.
	s.CapHeldWithdrawals("a", 11)
	if got := len(s.WithdrawalsByAccount["a"]); got != min(held-10, MaxClosedWithdrawalsHeld) {
		t.Fatalf("capped: %d kept", got)
	}
}
