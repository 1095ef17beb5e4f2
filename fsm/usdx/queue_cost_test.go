package usdx

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// queuedState holds n queued redemptions, one per account, as an oracle
// outage leaves them.
func queuedState(n int) *State {
	s := NewState()
	s.FillNil()
	for i := range n {
		id, acct := fmt.Sprintf("rdm-%d", i), fmt.Sprintf("acct-%d", i)
		s.Sagas[id] = &Saga{ID: id, AccountID: acct, Side: SideRedeem, State: SagaQueued}
		s.Queue = append(s.Queue, id)
	}
	return s
}

// Counting an account's queued redemptions (asked on every redemption
// while the oracle is stale) does not walk every account's: it walked the
// whole queue, 100,000 map lookups a redemption with 100,000 queued.
func TestQueuedCountCostsNotTheQueue(t *testing.T) {
	const queued = 100_000
	s := queuedState(queued)
	if got := s.queuedOf("acct-7"); got != 1 { // builds the count, once
		t.Fatalf("acct-7 has %d queued, want 1", got)
	}
	const calls = 2000
	start := time.Now()
	for i := range calls {
		if s.queuedOf(fmt.Sprintf("acct-%d", i)) != 1 {
			t.Fatalf("acct-%d: wrong count", i)
		}
	}
	// The walk took about 2 ms a call here, 4 s for these calls.
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Fatalf("%d counts against %d queued took %v", calls, queued, el)
	}
}

// The count is the walk's: after a rebuild from Queue (a restore), after
// appends, and after a drain.
func TestQueuedCountIsTheWalks(t *testing.T) {
	s := queuedState(10)
	walk := func(acct string) int {
		n := 0
		for _, id := range s.Queue {
			if s.Sagas[id].AccountID == acct {
				n++
			}
		}
		return n
	}
	for i := range 5 { // as Redeem queues: ask, then append and count
		acct := fmt.Sprintf("acct-%d", i%2)
		if got, want := s.queuedOf(acct), walk(acct); got != want {
			t.Fatalf("%s: %d, the walk counts %d", acct, got, want)
		}
		id := fmt.Sprintf("more-%d", i)
		s.Sagas[id] = &Saga{ID: id, AccountID: acct, State: SagaQueued}
		s.Queue = append(s.Queue, id)
		s.queuedBy[acct]++
	}
	for _, acct := range []string{"acct-0", "acct-1", "acct-9", "nobody"} {
		if got, want := s.queuedOf(acct), walk(acct); got != want {
			t.Fatalf("%s: %d, the walk counts %d", acct, got, want)
		}
	}
	s.Queue, s.queuedBy = nil, nil // as OnPrint drains
	if got := s.queuedOf("acct-0"); got != 0 {
		t.Fatalf("after the drain acct-0 has %d queued", got)
	}
}

// Paying a USDx withdrawal costs what it removes, not a copy of every
// account's in-flight list, and leaves InFlight as the copy did.
func TestPaidWithdrawalLeavesInFlightAsTheCopyDid(t *testing.T) {
	const inFlight = 100_000
	s := NewState()
	for i := range inFlight {
		s.InFlight = append(s.InFlight, fmt.Sprintf("w-%d", i))
	}
	want := slices.Clone(s.InFlight)
	next := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s.dropInFlight(s.InFlight[0])
		next++
	})
	if allocs > 0.01 {
		t.Fatalf("%.2f allocations per payment with %d in flight", allocs, inFlight)
	}
	want = want[next:]
	for _, id := range []string{"w-50000", "w-99999", "w-1500", "absent"} {
		s.dropInFlight(id)
		if i := slices.Index(want, id); i >= 0 {
			want = append(want[:i:i], want[i+1:]...)
		}
	}
	if !slices.Equal(s.InFlight, want) {
		t.Fatalf("InFlight differs from the copy's: %d vs %d entries", len(s.InFlight), len(want))
	}
}
