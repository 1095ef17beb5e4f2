package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
)

// unstakeAcrossBoundary: two stakers, positive funding going to them;
// the first unstakes all its sUSDx so that its cooldown ends 500 ms before
// the next funding boundary B. fine puts an entry at the release time;
// otherwise one entry carries log time from B-2 s to B+1 s (a leader
// change, a slow tick), so the release and the boundary fall due in the
// same advance. It returns the USDx the first staker got back and the
// boundary's waterfall.
func unstakeAcrossBoundary(t *testing.T, level uint32, fine bool) (int64, usdx.Waterfall) {
	t.Helper()
	w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
	a, ka := w.account(20 * btcBTC)
	b, kb := w.account(20 * btcBTC)
	w.mintN(a, ka, 100_000)
	w.mintN(b, kb, 100_000)
	w.balancedBy(500_000) // longs heavier: the hedge receives funding
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0), UnstakeCooldownMs: i64(60_000)})
	wantOK(t, w.cmd(a, ka, CmdUSDxStake, USDxAmountPayload{Amount: 50_000}, ""))
	wantOK(t, w.cmd(b, kb, CmdUSDxStake, USDxAmountPayload{Amount: 50_000}, ""))

	boundary := (w.ts/3_600_000 + 1) * 3_600_000
	release := boundary - 500
	for w.ts < release-60_000-2_000 { // prints keep the oracle fresh
		w.ts = min(w.ts+50_000, release-60_000-2_000)
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	}
	w.ts = release - 60_000 - 1 // the unstake's entry is stamped release-60 s
	wantOK(t, w.cmd(a, ka, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(a).Susdx}, ""))
	for w.ts < boundary-2_000 {
		w.ts = min(w.ts+30_000, boundary-2_000) - 1
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	}
	usdxBefore := w.holder(a).Usdx
	if fine {
		w.ts = release - 1
		wantOK(t, w.at(&Command{Type: CmdTick}))
		if w.st().u.Cooling != nil {
			t.Fatal("the tick at the release time released nothing")
		}
	}
	n := len(w.st().u.History)
	w.ts = boundary + 1_000 - 1
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	h := w.st().u.History
	if len(h) != n+1 || w.st().u.Cooling != nil {
		t.Fatalf("%d waterfalls (want %d), cooling %+v", len(h), n+1, w.st().u.Cooling)
	}
	return w.holder(a).Usdx - usdxBefore, h[n]
}

// TestUnstakeDueBeforeABoundaryIsReleasedBeforeItsWaterfall: an unstake
// whose cooldown ends before a funding boundary is released at the share
// price before it (SPEC: released after unstakeCooldownMs at the share
// price at release), however log time reaches the two. Below
// LevelReleaseBeforeBoundary the timers ran by domain, the funding
// boundary (and its waterfall) before the unstake releases, so when one
// entry passed both the unstake took a share of a boundary that came after
// its release: here 50,000 sUSDx released 50,000 USDx when an entry landed
// between the two and 50,004 when one entry passed both (half the 8 USDx
// of yield the boundary minted; a markdown would have taken from it
// likewise).
func TestUnstakeDueBeforeABoundaryIsReleasedBeforeItsWaterfall(t *testing.T) {
	for _, level := range []uint32{usdx.LevelReleaseBeforeBoundary - 1, usdx.LevelReleaseBeforeBoundary} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			fine, wfFine := unstakeAcrossBoundary(t, level, true)
			jump, wfJump := unstakeAcrossBoundary(t, level, false)
			t.Logf("released %d USDx with an entry at the release, %d with one entry across both; yield minted %d / %d",
				fine, jump, wfFine.YieldMinted, wfJump.YieldMinted)
			if wfFine.YieldMinted < 1 {
				t.Fatalf("the boundary minted no yield: %+v", wfFine)
			}
			if level < usdx.LevelReleaseBeforeBoundary {
				if jump <= fine {
					t.Fatalf("below the level the jump shared the boundary's yield: %d vs %d", jump, fine)
				}
				return
			}
			if jump != fine || wfJump != wfFine {
				t.Fatalf("release %d USDx after one entry across both, %d with an entry between; waterfalls %+v / %+v",
					jump, fine, wfJump, wfFine)
			}
		})
	}
}
