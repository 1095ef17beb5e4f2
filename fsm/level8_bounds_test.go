package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

// TestOpenWithdrawalsPerAccountAreBounded: an open withdrawal is never
// dropped and holds only its amount and fee, refunded in full when the rail
// returns it, so a payee that keeps its payouts pending (a hold invoice)
// grew an account's open withdrawals at the withdraw budget without
// bound. From LevelOpenWithdrawalsBounded the one past
// MaxOpenWithdrawalsPerAccount is refused (409 conflict) and changes
// nothing; once one closes there is room again. Level 7 keeps the old rule.
func TestOpenWithdrawalsPerAccountAreBounded(t *testing.T) {
	for _, level := range []uint32{funds.LevelOpenWithdrawalsBounded - 1, funds.LevelOpenWithdrawalsBounded} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newRailWorldAt(t, level)
			acct, key := w.account(10_000_000)
			other, otherKey := w.account(10_000_000)
			for i := range funds.MaxOpenWithdrawalsPerAccount {
				ref := fmt.Sprint("open-", i)
				wantOK(t, w.request(acct, key, wreq(ref, 1_000, 10_000)))
				wantOK(t, w.result(ref, funds.PayoutPending, "held by the payee"))
			}
			free, before := w.balance(ledger.Free(acct)), w.money()
			res := w.request(acct, key, wreq("one-more", 1_000, 10_000))
			if level < funds.LevelOpenWithdrawalsBounded {
				wantOK(t, res)
				return
			}
			wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
			if got := w.balance(ledger.Free(acct)); got != free || string(w.money()) != string(before) {
				t.Fatalf("the refusal changed state: free %d -> %d", free, got)
			}
			// Another account is not affected.
			wantOK(t, w.request(other, otherKey, wreq("other-0", 1_000, 10_000)))
			// A returned one makes room.
			wantOK(t, w.result("open-0", funds.PayoutReturned, "payee gave up"))
			wantOK(t, w.request(acct, key, wreq("one-more-again", 1_000, 10_000)))
		})
	}
}
