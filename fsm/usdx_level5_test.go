package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
)

// escrowWorld is a pool with staker a (50,000 USDx staked) whose yield
// waits in the escrow: the hard cap is the supply, so none of it can be
// minted. A day of positive funding has filled the escrow. b holds 60,000
// USDx and has not staked.
func escrowWorld(t *testing.T, level uint32) (w *usdxWorld, a, ka, b, kb string) {
	t.Helper()
	w = &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0), UnstakeCooldownMs: i64(3_600_000)})
	a, ka = w.account(20 * btcBTC)
	b, kb = w.account(20 * btcBTC)
	w.mintN(a, ka, 100_000)
	w.mintN(b, kb, 60_000)
	w.balancedBy(500_000) // longs heavier: the hedge receives funding
	w.stakeFor(a, ka, 50_000)
	w.params(USDxParamsPayload{HardCap: i64(w.st().u.Supply)})
	for range 30 {
		w.nextBoundary()
	}
	if st := w.st().u; w.escrowUsd() < 100 || st.Staked != 50_000 {
		t.Fatalf("escrow %d msat (%d USDx), staked %d: the setup did not hold the yield back", st.YieldEscrowMsat, w.escrowUsd(), st.Staked)
	}
	return w, a, ka, b, kb
}

// escrowUsd is the escrow's worth at the last print, rounded down.
func (w *usdxWorld) escrowUsd() int64 {
	return w.st().u.YieldEscrowMsat * (w.lastMid("BTCUSD") / 100_000_000) / 100_000_000_000
}

// valueOf is what acct's sUSDx is worth in staked USDx.
func (w *usdxWorld) valueOf(acct string) int64 {
	st := w.st().u
	return w.holder(acct).Susdx * st.Staked / st.SusdxSupply
}

// TestStakeJoiningAFullEscrowPaysForIt: the review's case. Staker b joins
// while a's yield waits in the escrow; then the cap is raised and the
// escrow is minted into the pool. Below LevelEscrowInPrice b bought
// shares at the staked USDx alone and took half of a's yield; from it b
// pays for its part of the escrow, so the mint leaves b with what it
// staked and a with its yield.
func TestStakeJoiningAFullEscrowPaysForIt(t *testing.T) {
	for _, level := range []uint32{usdx.LevelEscrowInPrice - 1, usdx.LevelEscrowInPrice} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, a, _, b, kb := escrowWorld(t, level)
			esc := w.escrowUsd()
			price := w.public().Staking.SharePriceQ9
			sr := w.stakeFor(b, kb, 50_000)
			if fmt.Sprint(int64(price)) != fmt.Sprint(int64(sr.SharePriceQ9)) {
				t.Fatalf("the public state served %d, the stake %d", price, sr.SharePriceQ9)
			}
			// The escrow is minted into the pool at the next boundary (the
			// funding keeps flowing; without a mint cap both share it).
			w.params(USDxParamsPayload{HardCap: i64(10_000_000)})
			wf := w.nextBoundary()
			if w.st().u.YieldEscrowMsat > 10_100_000 || wf.YieldMinted < esc {
				t.Fatalf("the escrow was not minted: %+v, %d msat left", wf, w.st().u.YieldEscrowMsat)
			}
			gainA, gainB := w.valueOf(a)-50_000, w.valueOf(b)-50_000
			t.Logf("escrow %d USDx when b joined; after the mint a gained %d, b %d (price %d)", esc, gainA, gainB, sr.SharePriceQ9)
			// b's fair part is half of the last boundary's yield at most.
			fair := wf.YieldMinted - esc
			if level < usdx.LevelEscrowInPrice {
				if gainB < esc/2 {
					t.Fatalf("below the level b was expected to take half the escrow (%d), it gained %d", esc/2, gainB)
				}
				return
			}
			if gainB > fair/2+2 || gainA < esc-2 {
				t.Fatalf("b gained %d (fair: at most %d), a %d (its escrow: %d)", gainB, fair/2, gainA, esc)
			}
		})
	}
}

// TestReleaseTakesItsPartOfTheEscrow: a staker leaving while its yield
// waits in the escrow takes its part, paid in staked USDx; the escrow
// stays with the stakers who stay. Below the level it forfeited it.
func TestReleaseTakesItsPartOfTheEscrow(t *testing.T) {
	for _, level := range []uint32{usdx.LevelEscrowInPrice - 1, usdx.LevelEscrowInPrice} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, a, ka, c, kc := escrowWorld(t, level)
			w.stakeFor(c, kc, 50_000)
			// a leaves with half its shares; nothing flows meanwhile.
			w.params(USDxParamsPayload{UnstakeCooldownMs: i64(1_000)})
			shares := w.holder(a).Susdx / 2
			st := w.st().u
			esc := w.escrowUsd()
			fair := shares * (st.Staked + esc) / st.SusdxSupply
			before := w.holder(a).Usdx
			wantOK(t, w.cmd(a, ka, CmdUSDxUnstake, USDxAmountPayload{Amount: shares}, ""))
			w.walkTo(w.ts + 2_000)
			got := w.holder(a).Usdx - before
			t.Logf("a released %d sUSDx for %d USDx (its part with the escrow: %d)", shares, got, fair)
			if level < usdx.LevelEscrowInPrice {
				if got != shares*st.Staked/st.SusdxSupply {
					t.Fatalf("below the level the release was the staked part alone, got %d", got)
				}
				return
			}
			if got < fair-1 || got > fair {
				t.Fatalf("released %d, want %d", got, fair)
			}
			if w.st().u.YieldEscrowMsat != st.YieldEscrowMsat {
				t.Fatal("the escrow moved on a release")
			}
		})
	}
}
