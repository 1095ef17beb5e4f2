package fsm

import (
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
)

// nextBoundary walks past the next funding boundary (prints keep the
// oracle fresh) and returns its waterfall entry.
func (w *usdxWorld) nextBoundary() usdx.Waterfall {
	w.t.Helper()
	n := len(w.st().u.History)
	target := (w.ts/3_600_000 + 1) * 3_600_000
	for w.ts < target+1000 {
		// Every 50 s, and 2 s before the boundary: the boundary sees a
		// fresh print, as it does under an oracle printing every second
		// (the hedge mints no yield on a stale print).
		if w.ts < target-2000 {
			w.ts = min(w.ts+50_000, target-2000)
		} else {
			w.ts = max(w.ts+1000, target+1000)
		}
		wantOK(w.t, w.print("BTCUSD", usdQ8(100_000)))
	}
	h := w.st().u.History
	if len(h) != n+1 {
		w.t.Fatalf("%d waterfall entries, want %d", len(h), n+1)
	}
	return h[n]
}

// Positive funding (organic longs heavier: longs pay, the hedge's short
// receives) fills the reserve up to its target, then goes to the stakers
// as USDx minted into the pool: the share price rises and the hedge grows
// with the supply.
func TestUSDxPositiveFundingFillsTheReserveThenPaysStakers(t *testing.T) {
	w := newUSDxWorld(t)
	a, k := w.account(20 * btcBTC)
	w.mintN(a, k, 100_000)
	w.balancedBy(500_000) // longs heavier: the rate is positive, capped
	wantOK(t, w.cmd(a, k, CmdUSDxStake, USDxAmountPayload{Amount: 50_000}, ""))
	holder := w.holder(a).Usdx

	// Target far above the reserve: all of it goes to the reserve.
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(500_000_000)})
	r0 := w.st().u.ReserveMsat
	wf := w.nextBoundary()
	if wf.FlowMsat <= 0 || wf.ToReserveMsat != wf.FlowMsat || wf.ToStakersMsat != 0 || wf.YieldMinted != 0 {
		t.Fatalf("%+v", wf)
	}
	if w.st().u.ReserveMsat != r0+wf.FlowMsat {
		t.Fatal("reserve")
	}
	// Target just above the reserve: it takes the gap, stakers the rest.
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0)})
	st := w.st()
	wf = w.nextBoundary()
	if wf.ToReserveMsat != 0 || wf.ToStakersMsat != wf.FlowMsat || wf.YieldMinted < 1 {
		t.Fatalf("%+v", wf)
	}
	after := w.st()
	if after.u.Supply != st.u.Supply+wf.YieldMinted || after.hedge != after.u.Supply || after.u.Staked != st.u.Staked+wf.YieldMinted {
		t.Fatalf("supply %d -> %d, hedge %d, staked %d -> %d", st.u.Supply, after.u.Supply, after.hedge, st.u.Staked, after.u.Staked)
	}
	if wf.SharePriceQ9After <= wf.SharePriceQ9Before {
		t.Fatalf("share price %d -> %d", wf.SharePriceQ9Before, wf.SharePriceQ9After)
	}
	// What bought no whole USDx waits in the escrow: less than one USDx's
	// hedge cost (about 1.0e7 msat at 100,000).
	if e := after.u.YieldEscrowMsat; e < 0 || e > 10_100_000 {
		t.Fatalf("escrow %d", e)
	}
	if w.holder(a).Usdx != holder {
		t.Fatal("USDx holders are not paid funding directly")
	}
	// With no sUSDx, the stakers' part is overflow to the reserve.
	w.params(USDxParamsPayload{UnstakeCooldownMs: i64(0)})
	wantOK(t, w.cmd(a, k, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(a).Susdx}, ""))
	w.ts += 1000
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	r1 := w.st().u.ReserveMsat
	wf = w.nextBoundary()
	if w.st().u.SusdxSupply != 0 || wf.OverflowMsat != wf.FlowMsat || w.st().u.ReserveMsat != r1+wf.FlowMsat {
		t.Fatalf("%+v", wf)
	}
}

// Negative funding (organic shorts heavier: the hedge pays) takes the loss
// in the documented order: the reserve down to its floor, then the yield
// escrow, then the staking pool (sUSDx marked down), then the reserve
// below its floor, then uncovered. USDx holders never lose a unit.
func TestUSDxNegativeFundingOrderOfLoss(t *testing.T) {
	w := newUSDxWorld(t)
	a, k := w.account(20 * btcBTC)
	w.mintN(a, k, 100_000)
	s, sk := w.account(btcBTC)
	wantOK(t, w.order(s, sk, mktOrder("short1", "BTC-PERP", "sell", 500_000)))
	wantOK(t, w.cmd(a, k, CmdUSDxStake, USDxAmountPayload{Amount: 50_000}, ""))
	holder := w.holder(a).Usdx

	// 1. Floor 0: the reserve pays it all.
	w.params(USDxParamsPayload{ReserveFloorQ9: i64(0)})
	r0 := w.st().u.ReserveMsat
	wf := w.nextBoundary()
	if wf.FlowMsat >= 0 || wf.FromReserveMsat != -wf.FlowMsat || wf.ShortfallMsat != 0 || wf.Markdown != 0 {
		t.Fatalf("step 1: %+v", wf)
	}
	if w.st().u.ReserveMsat != r0+wf.FlowMsat || wf.SharePriceQ9After != wf.SharePriceQ9Before {
		t.Fatal("step 1 reserve")
	}
	// 3. Floor at the whole value: the reserve gives nothing; the pool is
	// marked down (no escrow yet).
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(1_000_000_000), ReserveFloorQ9: i64(1_000_000_000)})
	st := w.st()
	wf = w.nextBoundary()
	if wf.FromReserveMsat != 0 || wf.ShortfallMsat != -wf.FlowMsat || wf.Markdown < 1 || wf.SharePriceQ9After >= wf.SharePriceQ9Before {
		t.Fatalf("step 3: %+v", wf)
	}
	after := w.st()
	if after.u.Staked != st.u.Staked-wf.Markdown || after.u.Supply != st.u.Supply-wf.Markdown || after.hedge != after.u.Supply {
		t.Fatal("markdown burns pool USDx and their hedge contracts")
	}
	if after.u.ReserveMsat < st.u.ReserveMsat {
		t.Fatal("the reserve below its floor pays only after the stakers")
	}
	if w.holder(a).Usdx != holder {
		t.Fatal("a markdown never touches USDx holders")
	}
	// 4. No stakers left: the reserve below its floor pays.
	wantOK(t, w.op(CmdUSDxParams, USDxParamsPayload{UnstakeCooldownMs: i64(0)}))
	wantOK(t, w.cmd(a, k, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(a).Susdx}, ""))
	w.ts += 1000
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	if w.st().u.SusdxSupply != 0 {
		t.Fatal("unstake not released")
	}
	holder = w.holder(a).Usdx
	r1 := w.st().u.ReserveMsat
	wf = w.nextBoundary()
	if wf.Markdown != 0 || wf.FromReserveMsat != -wf.FlowMsat || w.st().u.ReserveMsat != r1+wf.FlowMsat {
		t.Fatalf("step 4: %+v", wf)
	}
	if w.holder(a).Usdx != holder || w.st().u.Supply != holder {
		t.Fatal("USDx holders are senior")
	}
}
