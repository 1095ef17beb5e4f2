package funds

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/perpd/perpd/fsm/ledger"
)

func TestCleanReasonCutsAtARuneBoundary(t *testing.T) {
	long := strings.Repeat("é", MaxReasonBytes) // 2 bytes each
	got := CleanReason("x" + long)
	if len(got) > MaxReasonBytes || !utf8.ValidString(got) || !strings.HasPrefix(got, "xé") {
		t.Fatalf("cut to %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if CleanReason("\xff") == "\xff" {
		t.Fatal("invalid UTF-8 stored")
	}
	if CleanReason("short") != "short" {
		t.Fatal("short reason changed")
	}
}

// The known-destination list is bounded; the oldest is forgotten first and
// becomes first-seen again.
func TestKnownDestinationsAreBounded(t *testing.T) {
	s := NewState()
	for i := range MaxKnownDestinations + 1 {
		s.rememberDestination("a", DestinationKey(fmt.Sprint(i)))
	}
	if len(s.KnownDests["a"]) != MaxKnownDestinations {
		t.Fatalf("%d known", len(s.KnownDests["a"]))
	}
	if s.DestinationKnown("a", DestinationKey("0")) || !s.DestinationKnown("a", DestinationKey("1")) ||
		!s.DestinationKnown("a", DestinationKey(fmt.Sprint(MaxKnownDestinations))) {
		t.Fatal("eviction is not oldest first")
	}
	if s.DestinationKnown("b", DestinationKey("1")) {
		t.Fatal("known destinations leak across accounts")
	}
	if !s.ConfirmRequired("a", DestinationKey("0"), ConfirmThresholdMsat) || s.ConfirmRequired("a", DestinationKey("0"), ConfirmThresholdMsat-1) {
		t.Fatal("threshold boundary")
	}
}

// A full spent-token set forgets the oldest first.
func TestUsedTokensAreBounded(t *testing.T) {
	s := NewState()
	for i := range 5 {
		s.useToken(&Confirm{TokenID: fmt.Sprint(i), ExpiresAtMs: int64(100 + i)})
	}
	s.PruneTokens(102) // ids 0..2 expire at or before 102
	if len(s.UsedTokens) != 2 || len(s.UsedOrder) != 2 || s.UsedOrder[0] != "3" {
		t.Fatalf("after prune: %v %v", s.UsedTokens, s.UsedOrder)
	}
	s.PruneTokens(1_000)
	if s.UsedOrder != nil || len(s.UsedTokens) != 0 {
		t.Fatal("prune left tokens")
	}
}

// Invariant of the pending pool: it holds amount + fee of every open
// withdrawal, through requests, results and refunds.
func TestPendingPoolMatchesOpenWithdrawals(t *testing.T) {
	s, l := NewState(), ledger.New()
	if err := l.Credit(ledger.Free("a"), 10_000_000); err != nil {
		t.Fatal(err)
	}
	for i, status := range []string{PayoutPaid, PayoutReturned, PayoutPending, ""} {
		r := WithdrawalRequest{IdempotencyKey: fmt.Sprint(i), AmountMsat: 100_000, FeeMsat: 1_000, Path: PathSpark,
			Destination: "d", RailRef: fmt.Sprint("r", i)}
		if _, ref := s.RequestWithdrawal(l, "a", r, uint64(i+1), 1); ref != nil {
			t.Fatal(ref)
		}
		if status != "" {
			if _, ref := s.ApplyPayout(l, PayoutResult{RailRef: r.RailRef, Status: status}, uint64(100+i), 2); ref != nil {
				t.Fatal(ref)
			}
		}
		var open int64
		for _, q := range s.Open {
			open += s.Withdrawals[q].AmountMsat + s.Withdrawals[q].FeeMsat
		}
		if got := l.Balance(ledger.PendingWithdrawals); got != open {
			t.Fatalf("step %d: pending %d, open withdrawals hold %d", i, got, open)
		}
		if err := l.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// Retention drops the oldest closed withdrawals past the bound once they
// are old enough, and never an open one, however old.
func TestRetentionNeverDropsOpenWithdrawals(t *testing.T) {
	s, l := NewState(), ledger.New()
	if err := l.Credit(ledger.Free("a"), 1<<40); err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	next := func() uint64 { seq++; return seq }
	req := func(ref string, nowMs int64) {
		r := WithdrawalRequest{AmountMsat: 1_000, Path: PathSpark, Destination: "d", RailRef: ref}
		if _, refusal := s.RequestWithdrawal(l, "a", r, next(), nowMs); refusal != nil {
			t.Fatal(refusal)
		}
	}
	req("open", 1) // the oldest of all, and never answered
	for i := range MaxClosedWithdrawalsPerAccount + 5 {
		ref := fmt.Sprint("c", i)
		req(ref, 2)
		if _, refusal := s.ApplyPayout(l, PayoutResult{RailRef: ref, Status: PayoutPaid}, next(), 2); refusal != nil {
			t.Fatal(refusal)
		}
	}
	if n := len(s.WithdrawalsByAccount["a"]); n != MaxClosedWithdrawalsPerAccount+6 {
		t.Fatalf("dropped before WithdrawalRetainMs: %d listed", n)
	}
	req("late", 2+WithdrawalRetainMs)
	if n := len(s.WithdrawalsByAccount["a"]); n != MaxClosedWithdrawalsPerAccount+2 {
		t.Fatalf("%d listed, want the bound plus two open", n)
	}
	if _, ok := s.WithdrawalByRailRef["open"]; !ok || len(s.Open) != 2 {
		t.Fatal("an open withdrawal was dropped")
	}
	if _, ok := s.WithdrawalByRailRef["c0"]; ok {
		t.Fatal("the oldest closed withdrawal was kept")
	}
	if len(s.Withdrawals) != len(s.WithdrawalByChange) || len(s.Withdrawals) != len(s.WithdrawalByRailRef) {
		t.Fatal("indexes disagree after retention")
	}
}

// A dropped Spark deposit's rail reference still refuses a repeated
// settlement for RailRefRetentionMs, then is forgotten by the timer.
func TestDroppedDepositRailRefOutlivesItsRecord(t *testing.T) {
	s, l := NewState(), ledger.New()
	for i := range MaxDepositsPerAccount + 1 {
		st := Settlement{AccountID: "a", AmountMsat: 10, RailRef: fmt.Sprint("spark-", i), Path: PathSpark}
		if _, refusal := s.Settle(l, st, uint64(i+1), 5); refusal != nil {
			t.Fatal(refusal)
		}
	}
	if _, kept := s.Deposits[1]; kept || len(s.ByAccount["a"]) != MaxDepositsPerAccount {
		t.Fatal("deposit history not bounded")
	}
	again := Settlement{AccountID: "a", AmountMsat: 10, RailRef: "spark-0", Path: PathSpark}
	if _, refusal := s.Settle(l, again, 999, 6); refusal == nil {
		t.Fatal("a dropped deposit's settlement credited again")
	}
	s.Prune(5 + RailRefRetentionMs)
	if _, ok := s.ByRailRef["spark-0"]; ok || len(s.ForgottenRefs) != 0 {
		t.Fatal("rail reference kept past its retention")
	}
}

// TestPruneCostsWhatExpiresNotWhatIsKept: a tick that forgets one old
// deposit's rail reference must not copy the 30 days of references kept
// behind it. Before, every tick that dropped any copied the whole list:
// with 100,000 kept, a tick dropping one allocated 100,000 x 24 bytes.
func TestPruneCostsWhatExpiresNotWhatIsKept(t *testing.T) {
	const kept = 100_000
	s := NewState()
	for i := range kept {
		ref := fmt.Sprintf("spark-%d", i)
		s.ByRailRef[ref] = uint64(i + 1)
		s.ForgottenRefs = append(s.ForgottenRefs, ForgottenRef{RailRef: ref, DropAtMs: int64(i + 1)})
	}
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now++ // one reference falls due per tick
		s.Prune(now)
	})
	if allocs > 0.01 {
		t.Fatalf("%.2f allocations per tick that forgets one reference of %d", allocs, kept)
	}
	if len(s.ForgottenRefs) != kept-1001 || s.ForgottenRefs[0].DropAtMs != 1002 {
		t.Fatalf("%d references kept, the oldest due at %d", len(s.ForgottenRefs), s.ForgottenRefs[0].DropAtMs)
	}
	s.Prune(kept)
	if len(s.ForgottenRefs) != 0 || len(s.ByRailRef) != 0 {
		t.Fatalf("%d references, %d rail refs left", len(s.ForgottenRefs), len(s.ByRailRef))
	}
}
