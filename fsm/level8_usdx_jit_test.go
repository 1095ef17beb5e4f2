package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
)

// jitWorld: L has staked 50,000 USDx for a whole hour, organic longs are
// heavier (the hedge receives funding, all of it to the stakers), and the
// clock stands lead ms before the next boundary, with a fresh print.
func jitWorld(t *testing.T, level uint32, lead int64) (w *usdxWorld, x, kx string, boundary int64) {
	t.Helper()
	w = &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0)})
	l, kl := w.account(20 * btcBTC)
	x, kx = w.account(20 * btcBTC)
	w.mintN(l, kl, 100_000)
	w.mintN(x, kx, 50_000)
	w.balancedBy(500_000)
	w.stakeFor(l, kl, 50_000)
	w.nextBoundary()
	boundary = (w.ts/3_600_000 + 1) * 3_600_000
	for w.ts < boundary-lead {
		w.ts = min(w.ts+50_000, boundary-lead)
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	}
	return w, x, kx, boundary
}

// stakeThroughOneBoundary stakes 50,000 USDx for x, unstakes every share
// at once, and walks until the release (an hour later, before the
// boundary after next): what x got back beyond what it staked, in USDx
// and in escrow msat, and the waterfall it sat through.
func stakeThroughOneBoundary(t *testing.T, w *usdxWorld, x, kx string) (gainUsdx, gainMsat int64, wf usdx.Waterfall) {
	t.Helper()
	u0, m0 := w.holder(x).Usdx, w.balance(ledger.Free(x))
	w.stakeFor(x, kx, 50_000)
	wantOK(t, w.cmd(x, kx, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(x).Susdx}, ""))
	release := w.ts + 3_600_000
	wf = w.nextBoundary()
	for w.ts < release+500 {
		w.ts = min(w.ts+50_000, release+500)
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	}
	if h := w.holder(x); h.Susdx != 0 || len(w.st().u.Cooling) != 0 || w.ts >= (wf.BoundaryTsMs+3_600_000) {
		t.Fatalf("not released before the next boundary: %+v", h)
	}
	return w.holder(x).Usdx - u0, w.balance(ledger.Free(x)) - m0, wf
}

// TestJustInTimeStakePaysTheAccruedYield: a stake made 3 s before a
// positive boundary and unstaked at once is released an hour later,
// before the next boundary: the only boundary it sat through is one whose
// rate it saw. Below LevelStakePaysAccrual it took a full share of that
// hour's yield (3 USDx and 495,238 msat for 50,000 USDx, half of the
// boundary's 7,500,350 msat); from it the stake pays for the yield accrued
// since the last boundary and gets nothing for the hour it did not hold.
func TestJustInTimeStakePaysTheAccruedYield(t *testing.T) {
	for _, level := range []uint32{usdx.LevelStakePaysAccrual - 1, usdx.LevelStakePaysAccrual} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, x, kx, _ := jitWorld(t, level, 3_000)
			gainUsdx, gainMsat, wf := stakeThroughOneBoundary(t, w, x, kx)
			if wf.FlowMsat <= 0 || wf.ToStakersMsat != wf.FlowMsat {
				t.Fatalf("want a positive boundary paid to the stakers: %+v", wf)
			}
			gain := gainUsdx*1_000_000 + gainMsat // 1 USDx is 1,000,000 msat at 100,000 USD
			t.Logf("boundary paid the stakers %d msat; the stake 3 s before it got back %+d USDx %+d msat (%+d msat)",
				wf.ToStakersMsat, gainUsdx, gainMsat, gain)
			if level < usdx.LevelStakePaysAccrual {
				if gain < wf.ToStakersMsat/3 {
					t.Fatalf("below the level the stake took its share of the hour: %d msat", gain)
				}
				return
			}
			if gain > 0 {
				t.Fatalf("a stake 3 s before the boundary gained %d msat", gain)
			}
			if gain < -2_000_000 {
				t.Fatalf("the stake lost %d msat: more than rounding and the yield mint's fee", gain)
			}
		})
	}
}

// TestStakeAtHalfHourEarnsHalfTheHour: from LevelStakePaysAccrual a stake
// made half-way through the interval pays for half of the accrued yield
// and keeps the other half: it still earns for the time it held.
func TestStakeAtHalfHourEarnsHalfTheHour(t *testing.T) {
	w, x, kx, _ := jitWorld(t, usdx.LevelStakePaysAccrual, 1_800_000)
	gainUsdx, gainMsat, wf := stakeThroughOneBoundary(t, w, x, kx)
	gain := gainUsdx*1_000_000 + gainMsat
	full := wf.ToStakersMsat / 2 // x holds about half the shares
	t.Logf("boundary paid the stakers %d msat; the stake at half-hour got %+d msat, a full hour's share is %d", wf.ToStakersMsat, gain, full)
	if gain < full/2-1_000_000 || gain > full/2+1_000_000 {
		t.Fatalf("a stake held half the hour earned %d msat, want about %d", gain, full/2)
	}
}

// TestJustInTimeStakeIntoAnEmptyPool: with no sUSDx in existence the
// accrued yield prices nothing (there are no shares to price), so below
// the fix a stake made 3 s before a positive boundary into an empty pool
// took the whole interval's stakers' part, which with no stakers is the
// reserve's overflow (7,500,350 msat for the hour, here), and left with
// it an hour later. From LevelStakePaysAccrual the stakers take the part
// of the interval after the pool opened, the reserve the rest; a stake
// into an empty pool at half-hour earns about half.
func TestJustInTimeStakeIntoAnEmptyPool(t *testing.T) {
	world := func(t *testing.T, level uint32, lead int64) (*usdxWorld, string, string) {
		w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
		w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0)})
		l, kl := w.account(20 * btcBTC)
		x, kx := w.account(20 * btcBTC)
		w.mintN(l, kl, 100_000)
		w.mintN(x, kx, 50_000)
		w.balancedBy(500_000)
		w.nextBoundary()
		boundary := (w.ts/3_600_000 + 1) * 3_600_000
		for w.ts < boundary-lead {
			w.ts = min(w.ts+50_000, boundary-lead)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		}
		if s := w.st().u.SusdxSupply; s != 0 {
			t.Fatalf("want an empty pool, supply %d", s)
		}
		return w, x, kx
	}
	for _, level := range []uint32{usdx.LevelStakePaysAccrual - 1, usdx.LevelStakePaysAccrual} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, x, kx := world(t, level, 3_000)
			reserve := w.st().u.ReserveMsat
			gainUsdx, gainMsat, wf := stakeThroughOneBoundary(t, w, x, kx)
			if wf.FlowMsat <= 0 {
				t.Fatalf("want a positive boundary: %+v", wf)
			}
			gain := gainUsdx*1_000_000 + gainMsat
			t.Logf("boundary flow %d msat, to stakers %d, overflow %d; the stake 3 s before it got back %+d msat",
				wf.FlowMsat, wf.ToStakersMsat, wf.OverflowMsat, gain)
			if level < usdx.LevelStakePaysAccrual {
				if gain < wf.FlowMsat/2 {
					t.Fatalf("below the level the stake took the hour: %d msat", gain)
				}
				return
			}
			if gain > wf.FlowMsat*3_000/3_600_000 {
				t.Fatalf("a stake 3 s before the boundary into an empty pool gained %d msat of a %d msat hour", gain, wf.FlowMsat)
			}
			if wf.ToStakersMsat+wf.OverflowMsat != wf.FlowMsat || wf.ToStakersMsat > wf.FlowMsat*3_000/3_600_000+1 ||
				w.st().u.ReserveMsat-reserve < wf.OverflowMsat {
				t.Fatalf("the boundary's split: %+v, reserve %d -> %d", wf, reserve, w.st().u.ReserveMsat)
			}
		})
	}
	t.Run("half-hour", func(t *testing.T) {
		w, x, kx := world(t, usdx.LevelStakePaysAccrual, 1_800_000)
		gainUsdx, gainMsat, wf := stakeThroughOneBoundary(t, w, x, kx)
		gain := gainUsdx*1_000_000 + gainMsat
		t.Logf("boundary flow %d msat, to stakers %d, overflow %d; the stake at half-hour got %+d msat", wf.FlowMsat, wf.ToStakersMsat, wf.OverflowMsat, gain)
		if gain < wf.FlowMsat/2-1_000_000 || gain > wf.FlowMsat/2+1_000_000 {
			t.Fatalf("a stake held half the hour in an empty pool earned %d msat, want about %d", gain, wf.FlowMsat/2)
		}
	})
}
