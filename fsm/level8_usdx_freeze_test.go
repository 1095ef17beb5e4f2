package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// TestWithdrawalRefusedWhileAFreezeWaits: an operator freezes an address;
// until the custody worker reports the freeze applied, below
// LevelPendingFreezeRefuses a USDx withdrawal to it was accepted (and the
// token rail would pay it out there). From the level it is refused 403
// compliance_refused, as after the freeze applies; an unfreeze, once
// applied, lets withdrawals through again.
func TestWithdrawalRefusedWhileAFreezeWaits(t *testing.T) {
	for _, level := range []uint32{usdx.LevelPendingFreezeRefuses - 1, usdx.LevelPendingFreezeRefuses} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			a, ka := w.account(btcBTC)
			w.mintN(a, ka, 100)
			const addr = "sprt1sanctioned"
			withdraw := func() *Result {
				return w.cmd(a, ka, CmdUSDxWithdraw, USDxWithdrawPayload{ID: w.id("wd"), Usdx: 10, SparkAddress: addr}, "")
			}
			seqOf := func(res *Result) uint64 {
				var v struct{ Seq wire.Int }
				if err := res.Decode(&v); err != nil {
					t.Fatal(err)
				}
				return uint64(v.Seq)
			}
			fz := w.op(CmdUSDxFreeze, USDxFreezePayload{OpID: "fz1", SparkAddress: addr, Action: "freeze", Reason: "sanctions"})
			wantOK(t, fz)
			res := withdraw()
			if level < usdx.LevelPendingFreezeRefuses {
				if res.Status != http.StatusCreated {
					t.Fatalf("below the level a pending freeze did not refuse: %d %s", res.Status, res.Body)
				}
				return
			}
			wantRefused(t, res, http.StatusForbidden, wire.CodeComplianceRefused)
			wantOK(t, w.op(CmdUSDxFreezeApplied, USDxFreezeAppliedPayload{Seq: seqOf(fz), IssuerRef: "iss-1", ImpactedMicro: -1}))
			wantRefused(t, withdraw(), http.StatusForbidden, wire.CodeComplianceRefused)
			uf := w.op(CmdUSDxFreeze, USDxFreezePayload{OpID: "uf1", SparkAddress: addr, Action: "unfreeze", Reason: "cleared"})
			wantOK(t, uf)
			wantRefused(t, withdraw(), http.StatusForbidden, wire.CodeComplianceRefused) // frozen until the unfreeze applies
			wantOK(t, w.op(CmdUSDxFreezeApplied, USDxFreezeAppliedPayload{Seq: seqOf(uf), IssuerRef: "iss-2", ImpactedMicro: -1}))
			if res := withdraw(); res.Status != http.StatusCreated {
				t.Fatalf("after the unfreeze applied: %d %s", res.Status, res.Body)
			}
			if h := w.holder(a); h.Usdx != 90 || h.Withdrawing != 10 {
				t.Fatalf("holder %+v", h)
			}
		})
	}
}
