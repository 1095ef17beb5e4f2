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
