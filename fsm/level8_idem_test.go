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
