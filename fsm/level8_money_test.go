package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
)

// TestReturnedWithdrawalsAreNotHeld: every testnet Lightning payout is
// returned with a full refund, so a withdrawal that ends returned costs
// nothing. Below funds.LevelReturnedNotHeld each was held two days past
// the closed-withdrawal bound, like a paid one: 20 a minute, each keeping
// a Lightning invoice of up to 7 KB in every replica's State, for free.
// From the level a returned one past the bound is dropped at once; paid
// ones keep their two-day hold, which is what keeps a late retry from
// paying twice.
func TestReturnedWithdrawalsAreNotHeld(t *testing.T) {
	for _, level := range []uint32{funds.LevelReturnedNotHeld - 1, funds.LevelReturnedNotHeld} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newRailWorldAt(t, level)
			w.m.opts.CheckInvariants = false // hundreds of entries: the checks would dominate
			acct, key := w.account(big)
			w.withdrawPaid(acct, key, "paid-first") // the oldest record, held two days
			invoice := "lntb1" + strings.Repeat("q", 6_000)
			extra := 20
			for i := range funds.MaxClosedWithdrawalsPerAccount + extra {
				r := wreq(fmt.Sprint("ln-", i), 1_000, 2_001)
				r.Path, r.Destination = funds.PathLightning, invoice // the same invoice once returned
				wantOK(t, w.request(acct, key, r))
				wantOK(t, w.result(r.RailRef, funds.PayoutReturned, "unknown payout invoice"))
			}
			if got := w.balance(ledger.Free(acct)); got != big-5_000-10_000 {
				t.Fatalf("free %d: the returned withdrawals cost something", got)
			}
			var kept, destBytes int
			var paidKept bool
			w.m.Read(func(st *State, _ uint64) {
				kept = len(st.Funds.WithdrawalsByAccount[acct])
				for _, wd := range st.Funds.Withdrawals {
					destBytes += len(wd.Destination)
				}
				_, paidKept = st.Funds.WithdrawalByRailRef["paid-first"]
			})
			t.Logf("%d withdrawals kept, %d bytes of destinations", kept, destBytes)
			if !paidKept {
				t.Fatal("the paid withdrawal was dropped inside its two-day hold")
			}
			if level < funds.LevelReturnedNotHeld {
				if kept != funds.MaxClosedWithdrawalsPerAccount+extra+1 {
					t.Fatalf("%d kept below the level, want every one", kept)
				}
				return
			}
			if kept != funds.MaxClosedWithdrawalsPerAccount {
				t.Fatalf("%d closed withdrawals kept, want the bound %d", kept, funds.MaxClosedWithdrawalsPerAccount)
			}
		})
	}
}

// TestHeldWithdrawalsAreCapped: a paid withdrawal is held two days past
// the closed-withdrawal bound so a late retry answers it, and at the
// withdraw budget (20 a minute) that held about 57,600 records of one
// account, each walked by every withdrawal request the account makes (24
// ms of apply per request at 50,000, BenchmarkWithdrawWithHeldHistory).
// From funds.LevelClosedWithdrawalsCapped an account holds at most
// funds.MaxClosedWithdrawalsHeld; the newest stay, the oldest go first.
func TestHeldWithdrawalsAreCapped(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{funds.LevelClosedWithdrawalsCapped - 1, funds.LevelClosedWithdrawalsCapped} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newRailWorldAt(t, level)
			w.m.opts.CheckInvariants = false // thousands of entries: the checks would dominate
			acct, key := w.account(big)
			const extra = 20
			n := funds.MaxClosedWithdrawalsHeld + extra
			for i := range n {
				w.withdrawPaid(acct, key, fmt.Sprint("paid-", i)) // all within the two-day hold
			}
			var kept int
			var oldest, newest bool
			w.m.Read(func(st *State, _ uint64) {
				kept = len(st.Funds.WithdrawalsByAccount[acct])
				_, oldest = st.Funds.WithdrawalByRailRef["paid-0"]
				_, newest = st.Funds.WithdrawalByRailRef[fmt.Sprint("paid-", n-1)]
			})
			if !newest {
				t.Fatal("the newest paid withdrawal was dropped")
			}
			if level < funds.LevelClosedWithdrawalsCapped {
				if kept != n || !oldest {
					t.Fatalf("%d kept below the level (oldest kept %v), want all %d held", kept, oldest, n)
				}
				return
			}
			if kept != funds.MaxClosedWithdrawalsHeld || oldest {
				t.Fatalf("%d kept (oldest kept %v), want the cap %d and the oldest gone", kept, oldest, funds.MaxClosedWithdrawalsHeld)
			}
		})
	}
}
