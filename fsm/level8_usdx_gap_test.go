package fsm

import (
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
)

// TestAMintCannotMoveTheReservesGapForAStake: the yield a stake pays for
// (LevelStakePaysAccrual) is the hedge's expected payment less the
// reserve's gap to its target, and a mint opens that gap (the target grows
// by 5% of the mint, the reserve by its 0.1% fee) while a redemption
// closed it again. With the reserve at its target, x mints 300 USDx 10 s
// before a positive boundary (the gap now exceeds the hour's payment, so
// the served price counts no accrual), stakes 50,000 USDx, redeems the 300
// and unstakes at once: the boundary paid its whole hour to the stakers
// and x, released an hour later, took half of it: 2,095,206 msat up,
// round trip fees included, where the same stake without the mint ends
// 878,809 msat down. From LevelReserveBoundsAtPeak the target is measured
// on the largest supply since the last boundary, so the redemption leaves
// the gap open, the reserve takes the payment, and the trick only costs.
func TestAMintCannotMoveTheReservesGapForAStake(t *testing.T) {
	for _, mint := range []int64{0, 300, 1_000} {
		w := &usdxWorld{tradeWorld: newTradeWorldAt(t, usdx.LevelReserveBoundsAtPeak)}
		// A 5% base fee on the first mints puts the reserve at its 5%
		// target, as an hour of positive funding would keep it.
		w.params(USDxParamsPayload{BaseFeeQ9: i64(50_000_000)})
		l, kl := w.account(20 * btcBTC)
		x, kx := w.account(40 * btcBTC)
		w.mintN(l, kl, 100_000)
		w.mintN(x, kx, 50_000)
		w.params(USDxParamsPayload{BaseFeeQ9: i64(1_000_000)})
		w.balancedBy(500_000) // longs heavier: the hedge receives funding
		w.stakeFor(l, kl, 50_000)
		w.nextBoundary()
		boundary := (w.ts/3_600_000 + 1) * 3_600_000
		for w.ts < boundary-10_000 {
			w.ts = min(w.ts+50_000, boundary-10_000)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		}
		st := w.st().u
		if target, _, _ := st.ReserveBounds(usdQ8(100_000)); st.ReserveMsat < target {
			t.Fatalf("want the reserve at its target %d: %d", target, st.ReserveMsat)
		}
		u0, m0 := w.holder(x).Usdx, w.balance(ledger.Free(x))
		if mint > 0 {
			w.mintN(x, kx, mint)
		}
		w.stakeFor(x, kx, 50_000)
		if mint > 0 {
			wantOK(t, w.cmd(x, kx, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("r"), Amount: mint}, ""))
		}
		wantOK(t, w.cmd(x, kx, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(x).Susdx}, ""))
		release := w.ts + 3_600_000
		wf := w.nextBoundary()
		for w.ts < release+500 {
			w.ts = min(w.ts+50_000, release+500)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		}
		if h := w.holder(x); h.Susdx != 0 || len(w.st().u.Cooling) != 0 {
			t.Fatalf("not released before the next boundary: %+v", h)
		}
		if wf.FlowMsat <= 0 || mint == 0 && wf.ToStakersMsat != wf.FlowMsat {
			t.Fatalf("want a positive boundary (paid whole to the stakers without the mint): %+v", wf)
		}
		gain := (w.holder(x).Usdx-u0)*1_000_000 + w.balance(ledger.Free(x)) - m0
		t.Logf("mint %d before the stake: the boundary paid the stakers %d msat of %d, x's round trip %+d msat", mint, wf.ToStakersMsat, wf.FlowMsat, gain)
		if gain > 0 {
			t.Fatalf("a stake 10 s before the boundary, behind a mint of %d USDx, gained %d msat", mint, gain)
		}
	}
}
