package fsm

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// escrowWorld is a pool of stakers whose yield waits in the escrow: the
// hard cap is the supply, so none of it can be minted, and positive
// funding has run until the escrow is worth at least escrowAtLeast USDx.
// a has staked stakeA USDx; b and c hold 60,000 USDx each and have not
// staked.
func escrowWorld(t *testing.T, level uint32, stakeA, escrowAtLeast int64) (w *usdxWorld, a, ka, b, kb, c, kc string) {
	t.Helper()
	w = &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0), UnstakeCooldownMs: i64(1_000)})
	a, ka = w.account(20 * btcBTC)
	b, kb = w.account(20 * btcBTC)
	c, kc = w.account(20 * btcBTC)
	w.mintN(a, ka, 100_000)
	w.mintN(b, kb, 60_000)
	w.mintN(c, kc, 60_000)
	w.balancedBy(500_000) // longs heavier: the hedge receives funding
	w.stakeFor(a, ka, stakeA)
	w.params(USDxParamsPayload{HardCap: i64(w.st().u.Supply)})
	for w.escrowUsd() < escrowAtLeast {
		w.nextBoundary()
	}
	if st := w.st().u; st.Staked != stakeA {
		t.Fatalf("staked %d: the setup minted yield", st.Staked)
	}
	return w, a, ka, b, kb, c, kc
}

// escrowUsd is the escrow's worth at the last print, rounded down.
func (w *usdxWorld) escrowUsd() int64 {
	return w.st().u.YieldEscrowMsat * (w.lastMid("BTCUSD") / 100_000_000) / 100_000_000_000
}

// valueOf is what acct's sUSDx is worth in staked USDx.
func (w *usdxWorld) valueOf(acct string) int64 {
	st := w.st().u
	if st.SusdxSupply == 0 {
		return 0
	}
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
			w, a, _, b, kb, _, _ := escrowWorld(t, level, 50_000, 200)
			esc := w.escrowUsd()
			price := w.public().Staking.SharePriceQ9
			sr := w.stakeFor(b, kb, 50_000)
			if price != sr.SharePriceQ9 {
				t.Fatalf("the public state served %d, the stake %d", price, sr.SharePriceQ9)
			}
			// The escrow is minted into the pool at the next boundary.
			w.params(USDxParamsPayload{HardCap: i64(10_000_000)})
			wf := w.nextBoundary()
			if w.st().u.YieldEscrowMsat > 10_100_000 || wf.YieldMinted < esc {
				t.Fatalf("the escrow was not minted: %+v, %d msat left", wf, w.st().u.YieldEscrowMsat)
			}
			gainA, gainB := w.valueOf(a)-50_000, w.valueOf(b)-50_000
			t.Logf("escrow %d USDx when b joined; after the mint a gained %d, b %d (price %d)", esc, gainA, gainB, sr.SharePriceQ9)
			fair := wf.YieldMinted - esc // the last hour's yield, b's half of it at most
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

// TestReleasesTakeTheirPartInKind: a and b share a pool whose escrow is
// worth about its staked USDx, and leave one after the other. From the
// level each release takes its fraction of the staked USDx and, to its
// free balance, of the escrow in sats: no price is picked, the order of
// leaving changes nothing, the last one takes the escrow with it, and a
// later staker of the emptied pool finds nothing to take. Below it both
// forfeited the escrow, and the next staker took it.
func TestReleasesTakeTheirPartInKind(t *testing.T) {
	for _, level := range []uint32{usdx.LevelEscrowInPrice - 1, usdx.LevelEscrowInPrice} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, a, ka, b, kb, c, kc := escrowWorld(t, level, 100, 200)
			w.stakeFor(b, kb, 100)
			st := w.st().u
			sa := w.holder(a).Susdx
			type got struct{ usdx, msat int64 }
			leave := func(acct, key string) got {
				u0, m0 := w.holder(acct).Usdx, w.balance(ledger.Free(acct))
				wantOK(t, w.cmd(acct, key, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(acct).Susdx}, ""))
				w.walkTo(w.ts + 2_000)
				return got{w.holder(acct).Usdx - u0, w.balance(ledger.Free(acct)) - m0}
			}
			ga, gb := leave(a, ka), leave(b, kb)
			t.Logf("staked %d, escrow %d msat, a holds %d of %d shares: a took %+v, b %+v; %d msat left",
				st.Staked, st.YieldEscrowMsat, sa, st.SusdxSupply, ga, gb, w.st().u.YieldEscrowMsat)
			if ga.usdx != sa*st.Staked/st.SusdxSupply || gb.usdx != st.Staked-ga.usdx {
				t.Fatalf("USDx released %d and %d of %d staked", ga.usdx, gb.usdx, st.Staked)
			}
			// c stakes into the emptied pool; what is left in the escrow
			// is minted at the next boundary, with that hour's yield.
			left := w.escrowUsd()
			w.stakeFor(c, kc, 1)
			w.params(USDxParamsPayload{HardCap: i64(10_000_000)})
			wf := w.nextBoundary()
			t.Logf("c's 1 USDx is worth %d after the next boundary, which minted %d", w.valueOf(c), wf.YieldMinted)
			if level < usdx.LevelEscrowInPrice {
				if ga.msat != 0 || gb.msat != 0 || w.valueOf(c) < 100 {
					t.Fatalf("below the level the escrow stayed for the next staker: a %+v, b %+v, c worth %d", ga, gb, w.valueOf(c))
				}
				return
			}
			if ga.msat != sa*st.YieldEscrowMsat/st.SusdxSupply || gb.msat != st.YieldEscrowMsat-ga.msat {
				t.Fatalf("escrow %d msat released as %d and %d", st.YieldEscrowMsat, ga.msat, gb.msat)
			}
			// Only that hour's yield (about 8 USDx here) is c's.
			if left != 0 || w.valueOf(c) > 50 {
				t.Fatalf("c staked 1 USDx into an emptied pool (escrow left: %d USDx) and holds %d", left, w.valueOf(c))
			}
			var v usdx.UnstakesView
			w.m.Read(func(st *State, _ uint64) { v = st.USDx.Unstakes(a) })
			if len(v.Unstakes) != 1 || v.Unstakes[0].ReleasedMsat == nil || int64(*v.Unstakes[0].ReleasedMsat) != ga.msat {
				t.Fatalf("a's unstake view %+v", v.Unstakes)
			}
		})
	}
}

// TestStakeWaitsForAPriceToValueTheEscrow: from the level a stake into a
// pool with an escrow is refused on a stale print or one the print guard
// holds, as a mint is: the escrow's part would be sold at a price the
// staker can pick.
func TestStakeWaitsForAPriceToValueTheEscrow(t *testing.T) {
	for _, level := range []uint32{usdx.LevelEscrowInPrice - 1, usdx.LevelEscrowInPrice} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, _, _, b, kb, _, _ := escrowWorld(t, level, 100, 200)
			w.walkTo(w.ts + 10*60_000) // no print for ten minutes
			res := w.cmd(b, kb, CmdUSDxStake, USDxAmountPayload{Amount: 10_000}, "")
			if level < usdx.LevelEscrowInPrice {
				wantOK(t, res)
				return
			}
			wantRefused(t, res, http.StatusConflict, wire.CodeUSDxOracleStale)
			wantOK(t, w.print("BTCUSD", usdQ8(150_000)))
			wantOK(t, w.print("BTCUSD", usdQ8(400_000))) // a jump past the guard: held
			wantRefused(t, w.cmd(b, kb, CmdUSDxStake, USDxAmountPayload{Amount: 10_000}, ""), http.StatusConflict, wire.CodeUSDxOracleStale)
			wantOK(t, w.print("BTCUSD", usdQ8(150_000))) // the held print is dropped
			w.stakeFor(b, kb, 10_000)
		})
	}
}

// TestUncoveredShortfallHaltsMints: the review's hole (negative boundaries
// with an empty reserve). From the level a mint quote and a stake are
// refused usdx_mints_halted (reason uncovered_shortfall) until positive
// funding has repaid the hole, while redemptions go on; below it a mint
// paid full margin into the hole.
func TestUncoveredShortfallHaltsMints(t *testing.T) {
	for _, level := range []uint32{usdx.LevelShortfallHaltsMints - 1, usdx.LevelShortfallHaltsMints} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, b, kb, s, sk := shortsHeavier(t, level)
			w.mintN(b, kb, 1_000)
			for range 3 {
				w.nextBoundary()
			}
			if w.st().u.UncoveredShortfallMsat <= 0 {
				t.Fatal("no uncovered shortfall")
			}
			res, _ := w.quote(b, kb, usdx.SideMint, 1_000)
			stake := w.cmd(b, kb, CmdUSDxStake, USDxAmountPayload{Amount: 10}, "")
			if level < usdx.LevelShortfallHaltsMints {
				wantOK(t, res)
				wantOK(t, stake)
				return
			}
			wantRefused(t, res, http.StatusConflict, wire.CodeUSDxMintsHalted)
			wantRefused(t, stake, http.StatusConflict, wire.CodeUSDxMintsHalted)
			if res.Code != wire.CodeUSDxMintsHalted || !strings.Contains(string(res.Body), "uncovered_shortfall") {
				t.Fatalf("refusal %s", res.Body)
			}
			if pv := w.public(); !pv.MintsHalted || pv.MintsHaltedReason == nil || *pv.MintsHaltedReason != "uncovered_shortfall" {
				t.Fatalf("the public state shows mintsHalted %v (%v)", pv.MintsHalted, pv.MintsHaltedReason)
			}
			wantOK(t, w.cmd(b, kb, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("r"), Amount: 100}, ""))
			// Funding turns; once the hole is repaid, mints are back.
			wantOK(t, w.order(s, sk, mktOrder("cover1", "BTC-PERP", "buy", 500_000)))
			w.balancedBy(500_000)
			for i := 0; w.st().u.UncoveredShortfallMsat > 0; i++ {
				if i > 200 {
					t.Fatal("the hole was never repaid")
				}
				w.nextBoundary()
			}
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			res, _ = w.quote(b, kb, usdx.SideMint, 1_000)
			wantOK(t, res)
			if w.public().MintsHalted {
				t.Fatal("the public state still shows mints halted after the hole was repaid")
			}
		})
	}
}
