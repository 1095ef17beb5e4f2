package fsm

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node/tokenrail"
)

// TestUSDxWithdrawalLateRetryIsNotPaidTwice: a USDx withdrawal's late
// retry (the same idempotency key and body, after the idempotency store
// forgot the key: its 24 hours, or an early eviction under a flood) was
// answered by the withdrawal record only while it was among the account's
// newest WithdrawalsKept; past that it made and paid a second withdrawal.
// Sats withdrawals hold a paid record funds.WithdrawalRetainMs (two days)
// for exactly this; from usdx.LevelUSDxWithdrawalsHeld a paid USDx
// withdrawal is held as long, so the retry answers the first one and
// moves nothing. Below the level the old rule stays, for replay.
func TestUSDxWithdrawalLateRetryIsNotPaidTwice(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{usdx.LevelUSDxWithdrawalsHeld - 1, usdx.LevelUSDxWithdrawalsHeld} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			acct, key := w.account(btcBTC)
			w.balancedBy(1_000)
			w.mintN(acct, key, 400)
			rl := tokenrail.NewSim()
			const addr = "sprt1abcdefgh"
			pay := func(wid string, q int64) {
				t.Helper()
				var railID string
				w.m.Read(func(st *State, _ uint64) { railID = st.USDx.Withdrawals[wid].TransferID() })
				ref, err := rl.Transfer(context.Background(), railID, q, addr)
				if err != nil {
					t.Fatal(err)
				}
				wantOK(t, w.op(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: wid, IssuerRef: ref}))
			}
			const id = "uwd_first" // as httpapi's accountScopedID of the client's key
			first := USDxWithdrawPayload{ID: id, Usdx: 7, SparkAddress: addr}
			firstRes := w.cmd(acct, key, CmdUSDxWithdraw, first, "withdraw-1")
			wantOK(t, firstRes)
			pay(id, 7)
			for i := range usdx.WithdrawalsKept {
				wid := fmt.Sprintf("uwd_other_%d", i)
				wantOK(t, w.cmd(acct, key, CmdUSDxWithdraw, USDxWithdrawPayload{ID: wid, Usdx: 1, SparkAddress: addr}, wid))
				pay(wid, 1)
			}
			// A day passes: the idempotency store forgets the key.
			for end := w.ts + IdemRetentionMs + 60_000; w.ts < end; {
				w.ts += MaxClockStepMs - 1
				wantOK(t, w.at(&Command{Type: CmdTick}))
			}
			before := w.holder(acct).Usdx
			retry := w.cmd(acct, key, CmdUSDxWithdraw, first, "withdraw-1")
			wantOK(t, retry)
			after := w.holder(acct).Usdx
			if level < usdx.LevelUSDxWithdrawalsHeld {
				if after != before-7 {
					t.Fatalf("below the level the late retry withdrew again: USDx %d -> %d", before, after)
				}
				return
			}
			if after != before {
				t.Fatalf("the late retry withdrew again: USDx %d -> %d", before, after)
			}
			var v usdx.WithdrawalView
			if err := retry.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if v.State != usdx.WithdrawalPaid {
				t.Fatalf("the late retry answered %+v, want the first withdrawal, paid", v)
			}
			// The same key with another amount is a reuse, not a new withdrawal.
			other := first
			other.Usdx = 8
			wantRefused(t, w.cmd(acct, key, CmdUSDxWithdraw, other, "withdraw-1"), http.StatusConflict, wire.CodeIdempotencyReused)
			// Held, not kept for ever: two days after it was paid the next
			// withdrawal trims it and the kept list is back at its bound.
			for end := w.ts + usdx.WithdrawalRetainMs; w.ts < end; {
				w.ts += MaxClockStepMs - 1
				wantOK(t, w.at(&Command{Type: CmdTick}))
			}
			wantOK(t, w.cmd(acct, key, CmdUSDxWithdraw, USDxWithdrawPayload{ID: "uwd_last", Usdx: 1, SparkAddress: addr}, "last"))
			w.m.Read(func(st *State, _ uint64) {
				if _, kept := st.USDx.Withdrawals[id]; kept {
					t.Error("the first withdrawal is kept past its hold")
				}
				if n := len(st.USDx.Holders[acct].Withdrawals); n != usdx.WithdrawalsKept {
					t.Errorf("%d withdrawals kept, want %d", n, usdx.WithdrawalsKept)
				}
			})
		})
	}
}

// TestUSDxRedemptionLateRetryIsNotRedeemedTwice: a keyed redemption's
// late retry (after the idempotency store forgot the key) was answered by
// its saga only while the saga was among the account's newest SagasKept;
// past that it redeemed the holder's USDx a second time. From
// usdx.LevelRedemptionsHeld a redemption's saga is held two days.
func TestUSDxRedemptionLateRetryIsNotRedeemedTwice(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{usdx.LevelRedemptionsHeld - 1, usdx.LevelRedemptionsHeld} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			acct, key := w.account(btcBTC)
			w.balancedBy(1_000)
			w.mintN(acct, key, 400)
			const id = "urd_first" // as httpapi's accountScopedID of the client's key
			first := USDxAmountPayload{ID: id, Amount: 7}
			wantOK(t, w.cmd(acct, key, CmdUSDxRedeem, first, "usdx-redeem:redeem-1"))
			for i := range usdx.SagasKept {
				wantOK(t, w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: fmt.Sprintf("urd_other_%d", i), Amount: 1}, ""))
			}
			// A day passes with fresh prints: the idempotency store forgets
			// the key.
			for end := w.ts + IdemRetentionMs + 60_000; w.ts < end; {
				w.ts += 50_000
				wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			}
			before := w.holder(acct)
			retry := w.cmd(acct, key, CmdUSDxRedeem, first, "usdx-redeem:redeem-1")
			wantOK(t, retry)
			after := w.holder(acct)
			if level < usdx.LevelRedemptionsHeld {
				if after.Usdx+after.Pending != before.Usdx+before.Pending-7 {
					t.Fatalf("below the level the late retry redeemed again: USDx %d+%d -> %d+%d", before.Usdx, before.Pending, after.Usdx, after.Pending)
				}
				return
			}
			if after.Usdx != before.Usdx || after.Pending != before.Pending {
				t.Fatalf("the late retry redeemed again: USDx %d+%d -> %d+%d", before.Usdx, before.Pending, after.Usdx, after.Pending)
			}
			var v usdx.SagaView
			if err := retry.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if v.State != usdx.SagaPaid {
				t.Fatalf("the late retry answered %+v, want the first redemption, paid", v)
			}
			// Held, not kept for ever: two days after its last change the
			// next saga trims it.
			for end := w.ts + usdx.SagaRetainMs; w.ts < end; {
				w.ts += 50_000
				wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			}
			wantOK(t, w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: "urd_last", Amount: 1}, ""))
			w.m.Read(func(st *State, _ uint64) {
				if _, kept := st.USDx.Sagas[id]; kept {
					t.Error("the first redemption is kept past its hold")
				}
				if n := len(st.USDx.Holders[acct].Sagas); n != usdx.SagasKept {
					t.Errorf("%d sagas kept, want %d", n, usdx.SagasKept)
				}
			})
		})
	}
}

// TestUSDxKeyedStakeAndUnstakeAreMadeOnce: stakes and unstakes had no id
// of their own, so once the idempotency store forgot a keyed one's answer
// (its 24 hours here; earlier when a flood spread over many accounts
// pushes the store past its record bound and the largest tenant's oldest
// records go entirely) its retry moved the holder's funds again. From
// usdx.LevelKeyedStakesOnce the key's id rides in the command: a stake's
// retry is refused 409 conflict (applied, not again), an unstake's
// answers the same unstake.
func TestUSDxKeyedStakeAndUnstakeAreMadeOnce(t *testing.T) {
	for _, level := range []uint32{usdx.LevelKeyedStakesOnce - 1, usdx.LevelKeyedStakesOnce} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			acct, key := w.account(btcBTC)
			w.balancedBy(1_000)
			w.mintN(acct, key, 400)
			stake := USDxAmountPayload{ID: "ustk_1", Amount: 50}
			unstake := USDxAmountPayload{ID: "uus_1", Amount: 10}
			wantOK(t, w.cmd(acct, key, CmdUSDxStake, stake, "stake-1"))
			first := w.cmd(acct, key, CmdUSDxUnstake, unstake, "unstake-1")
			wantOK(t, first)
			for end := w.ts + IdemRetentionMs + 60_000; w.ts < end; {
				w.ts += 50_000
				wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			}
			before := w.holder(acct)
			rs := w.cmd(acct, key, CmdUSDxStake, stake, "stake-1")
			ru := w.cmd(acct, key, CmdUSDxUnstake, unstake, "unstake-1")
			after := w.holder(acct)
			if level < usdx.LevelKeyedStakesOnce {
				wantOK(t, rs)
				wantOK(t, ru)
				if after.Usdx != before.Usdx-50 || len(after.Unstakes) != len(before.Unstakes)+1 {
					t.Fatalf("below the level both retries applied again: USDx %d -> %d, unstakes %d -> %d",
						before.Usdx, after.Usdx, len(before.Unstakes), len(after.Unstakes))
				}
				return
			}
			wantRefused(t, rs, http.StatusConflict, wire.CodeConflict)
			wantOK(t, ru)
			var u0, u1 usdx.UnstakeView
			if err := first.Decode(&u0); err != nil {
				t.Fatal(err)
			}
			if err := ru.Decode(&u1); err != nil {
				t.Fatal(err)
			}
			if u1.UnstakeID != u0.UnstakeID || u1.UnstakeID != "uus_1" {
				t.Fatalf("the unstake's retry answered %q, want the first unstake %q", u1.UnstakeID, u0.UnstakeID)
			}
			if after.Usdx != before.Usdx || after.Susdx != before.Susdx || len(after.Unstakes) != len(before.Unstakes) {
				t.Fatalf("a retry moved funds: USDx %d sUSDx %d unstakes %d -> %d, %d, %d", before.Usdx, before.Susdx, len(before.Unstakes), after.Usdx, after.Susdx, len(after.Unstakes))
			}
			// Another amount under the unstake's key is a reuse.
			other := unstake
			other.Amount = 11
			wantRefused(t, w.cmd(acct, key, CmdUSDxUnstake, other, "unstake-1"), http.StatusConflict, wire.CodeIdempotencyReused)
			// Unkeyed stakes are made each time, as before.
			wantOK(t, w.cmd(acct, key, CmdUSDxStake, USDxAmountPayload{Amount: 5}, ""))
			wantOK(t, w.cmd(acct, key, CmdUSDxStake, USDxAmountPayload{Amount: 5}, ""))
		})
	}
}

// TestIdemFloodOverManyAccountsCannotStakeTwice: the fair store takes
// room from the tenant holding the most bytes, so a flood spread over
// many accounts, each holding fewer bytes than the victim, takes the
// victim's records; past the record bound they go entirely (no
// tombstone), and the victim's retry finds no key at all. Here 500,000
// records over about 6,850 accounts (2.3 hours of the signup cap) flush
// a victim's answer that 60 more of its answers followed; the more the
// victim writes after an answer, the fewer accounts it takes. What must
// not happen twice rests on the account's own records: the keyed stake's
// retry is refused, not staked again.
func TestIdemFloodOverManyAccountsCannotStakeTwice(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w := &usdxWorld{tradeWorld: newTradeWorldAt(t, usdx.LevelKeyedStakesOnce)}
	acct, key := w.account(btcBTC)
	w.balancedBy(1_000)
	w.mintN(acct, key, 400)
	stake := USDxAmountPayload{ID: "ustk_1", Amount: 50}
	wantOK(t, w.cmd(acct, key, CmdUSDxStake, stake, "stake-1"))
	scoped := "acct:" + acct + ":stake-1"
	// The flood, stored straight into the store as apply would store it:
	// small answers (a cancel-all-after disarm is 127 accounted bytes),
	// each account holding fewer bytes than the victim.
	// The victim goes on writing (60 answers after the stake); the flood
	// takes its oldest records first, so it reaches the stake once each
	// account holds less than the stake and what came after it.
	st := w.m.st
	later := &Result{Status: http.StatusCreated, Body: []byte(`{"orderId":"mm-order-000000000000","status":"filled"}`)}
	victim := recordBytes(scoped, st.Idem.Records[scoped])
	for i := range 60 {
		k := fmt.Sprintf("acct:%s:mm-order-%012d", acct, i)
		st.Idem.storeFair(k, acct, make([]byte, 32), later, st.NowMs, w.next)
		victim += recordBytes(k, st.Idem.Records[k])
	}
	ok := &Result{Status: http.StatusOK, Body: []byte(`{"armed":false,"deadlineTsMs":null}`)}
	perTenant := 0
	for recordBytes("acct:acc_sybil000000:k000", &IdemRecord{ReqHash: make([]byte, 32), Body: ok.Body})*int64(perTenant+1) < victim {
		perTenant++
	}
	if perTenant == 0 {
		t.Fatalf("the victim holds %d bytes, less than one flood record", victim)
	}
	tenants := map[string]bool{}
	for i := 0; st.Idem.Records[scoped] != nil; i++ {
		if i > 3*IdemMaxRecords {
			t.Fatal("the flood never reached the victim's answer")
		}
		tenant := fmt.Sprintf("acc_sybil%06d", i/perTenant)
		tenants[tenant] = true
		st.Idem.storeFair(fmt.Sprintf("acct:%s:k%03d", tenant, i%perTenant), tenant, make([]byte, 32), ok, st.NowMs, w.next)
	}
	t.Logf("the victim's answer went entirely after a flood over %d accounts of %d records each (victim %d bytes)", len(tenants), perTenant, victim)
	before := w.holder(acct)
	wantRefused(t, w.cmd(acct, key, CmdUSDxStake, stake, "stake-1"), http.StatusConflict, wire.CodeConflict)
	if after := w.holder(acct); after.Usdx != before.Usdx || after.Susdx != before.Susdx {
		t.Fatalf("the retry staked again: USDx %d -> %d, sUSDx %d -> %d", before.Usdx, after.Usdx, before.Susdx, after.Susdx)
	}
}

// TestUSDxHeldRecordsAreBounded: the two-day holds of paid USDx
// withdrawals and of redemption sagas cannot grow an account's lists
// without bound: a withdrawal out to the holder's own address costs next
// to nothing, a 1 USDx mint and redemption a few hundred msat. Past
// usdx.WithdrawalsHeldMax (usdx.SagasHeldMax) the oldest paid
// withdrawals (sagas not queued) go before their hold ends.
func TestUSDxHeldRecordsAreBounded(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w := &usdxWorld{tradeWorld: newTradeWorldAt(t, usdx.LevelUSDxWithdrawalsHeld)}
	acct, key := w.account(100 * btcBTC)
	w.balancedBy(10_000)
	n := max(usdx.WithdrawalsHeldMax, usdx.SagasHeldMax) + 5
	w.mintN(acct, key, int64(2*n))
	rl := tokenrail.NewSim()
	const addr = "sprt1abcdefgh"
	for i := range n {
		wid := fmt.Sprintf("uwd_%d", i)
		wantOK(t, w.cmd(acct, key, CmdUSDxWithdraw, USDxWithdrawPayload{ID: wid, Usdx: 1, SparkAddress: addr}, wid))
		var railID string
		w.m.Read(func(st *State, _ uint64) { railID = st.USDx.Withdrawals[wid].TransferID() })
		ref, err := rl.Transfer(context.Background(), railID, 1, addr)
		if err != nil {
			t.Fatal(err)
		}
		wantOK(t, w.op(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: wid, IssuerRef: ref}))
		wantOK(t, w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: fmt.Sprintf("urd_%d", i), Amount: 1}, ""))
	}
	w.m.Read(func(st *State, _ uint64) {
		h := st.USDx.Holders[acct]
		if len(h.Withdrawals) != usdx.WithdrawalsHeldMax || st.USDx.Withdrawals["uwd_0"] != nil {
			t.Errorf("%d withdrawals kept (the first kept: %v), want the newest %d", len(h.Withdrawals), st.USDx.Withdrawals["uwd_0"] != nil, usdx.WithdrawalsHeldMax)
		}
		if len(h.Sagas) != usdx.SagasHeldMax || st.USDx.Sagas["urd_0"] != nil {
			t.Errorf("%d sagas kept (the first kept: %v), want the newest %d", len(h.Sagas), st.USDx.Sagas["urd_0"] != nil, usdx.SagasHeldMax)
		}
	})
}
