package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
)

func (w *railWorld) snapshotBytes() int {
	w.t.Helper()
	b, err := w.m.Snapshot()
	if err != nil {
		w.t.Fatal(err)
	}
	return len(b)
}

// faucet takes a grant for acct, 21 minutes after the world's clock so the
// hourly limit never binds.
func (w *railWorld) faucet(acct, key string) {
	w.t.Helper()
	w.ts += 21 * 60 * 1000
	wantOK(w.t, w.at(w.cmd(CmdFaucet, acct, key, "", nil)))
}

// withdrawPaid requests a small Spark withdrawal and applies its payout.
// No idempotency-store key: the store's own retention is not measured here.
func (w *railWorld) withdrawPaid(acct, key, railRef string) {
	w.t.Helper()
	wantOK(w.t, w.at(w.cmd(CmdWithdrawalRequested, acct, key, "", wreq(railRef, 5_000, 10_000))))
	wantOK(w.t, w.result(railRef, funds.PayoutPaid, ""))
}

// State grows by a bounded amount per account, and by nothing per entry
// once an account's histories reach their retention bounds.
func TestStateGrowthPerAccountAndPerEntry(t *testing.T) {
	const accounts = 200
	w := newRailWorld(t)
	base := w.snapshotBytes()
	for i := range accounts {
		acct, key := w.account(0)
		w.faucet(acct, key)
		wantOK(t, w.at(w.cmd(CmdInvoiceCreated, acct, key, "", funds.NewInvoice{PaymentRequest: "lntb1x",
			PaymentRef: fmt.Sprintf("%064x", i+1), ExpiresAtMs: w.ts + 3_600_000})))
		w.withdrawPaid(acct, key, fmt.Sprint("wd-", acct))
	}
	perAccount := (w.snapshotBytes() - base) / accounts
	t.Logf("per account (signup, faucet grant, open invoice, paid withdrawal): %d bytes", perAccount)
	// Account, key and hash index, ledger balance, one deposit, one
	// invoice and its heap entry, one withdrawal and its four indexes.
	if perAccount > 2_000 {
		t.Errorf("an active account costs %d bytes of State, want at most 2000", perAccount)
	}

	// One account filling both histories past their bounds, in a venue
	// that has run a while: every seq has the same width (and so has a
	// faucet grant's "faucet:<seq>" reference), so what is measured below
	// is records, not digits. Test-only write; nothing else runs.
	w.m.Read(func(st *State, _ uint64) { st.Seq = 1_000_000 })
	acct, key := w.account(0)
	before := w.snapshotBytes()
	for range funds.MaxDepositsPerAccount + 10 {
		w.faucet(acct, key)
	}
	for i := range funds.MaxClosedWithdrawalsPerAccount + 10 {
		w.withdrawPaid(acct, key, fmt.Sprint("full-", i))
	}
	w.ts += funds.WithdrawalRetainMs
	w.faucet(acct, key) // warm-up: the first entries past the bounds drop the excess
	w.withdrawPaid(acct, key, "warm-up")
	full := w.snapshotBytes() - before
	t.Logf("an account at its retention bounds (%d deposits, %d closed withdrawals): %d bytes",
		funds.MaxDepositsPerAccount, funds.MaxClosedWithdrawalsPerAccount, full)
	if full > 256<<10 {
		t.Errorf("an account at its retention bounds holds %d bytes of State, want at most 256 KiB", full)
	}
	w.m.Read(func(st *State, _ uint64) {
		if n := len(st.Funds.ByAccount[acct]); n != funds.MaxDepositsPerAccount {
			t.Errorf("%d deposits kept, want %d", n, funds.MaxDepositsPerAccount)
		}
		if n := len(st.Funds.WithdrawalsByAccount[acct]); n != funds.MaxClosedWithdrawalsPerAccount {
			t.Errorf("%d withdrawals kept, want %d", n, funds.MaxClosedWithdrawalsPerAccount)
		}
	})

	// Averaged over many entries: a single one may shift a varint width or
	// the faucet's three-entry window by a few bytes either way.
	const more = 50
	s0 := w.snapshotBytes()
	for range more {
		w.faucet(acct, key)
	}
	s1 := w.snapshotBytes()
	for i := range more {
		w.withdrawPaid(acct, key, fmt.Sprint("more-", i))
	}
	s2 := w.snapshotBytes()
	perDeposit, perWithdrawal := float64(s1-s0)/more, float64(s2-s1)/more
	t.Logf("bytes added per deposit once retention binds: %.2f; per withdrawal: %.2f", perDeposit, perWithdrawal)
	for name, d := range map[string]float64{"deposit": perDeposit, "withdrawal": perWithdrawal} {
		if d > 1 || d < -1 {
			t.Errorf("each %s changed State by %.2f bytes once retention binds, want ~0", name, d)
		}
	}
}
