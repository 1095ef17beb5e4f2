package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// nearZeroPoolWorld: a victim's 1,000 USDx staked, its shares then scaled
// so that they number supply, standing in for a history of markdowns and
// of stakes made at low prices (each stake at a price p issues 1e9 / p
// sUSDx per USDx; the next markdown leaves them against fewer USDx). The
// state surgery keeps sUSDx supply == held + cooling. No escrow and no
// accrual (the hedge's lone short pays funding), so the served price is
// floor(1,000e9 / supply).
func nearZeroPoolWorld(t *testing.T, level uint32, supply int64) (*usdxWorld, string) {
	t.Helper()
	w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0), UnstakeCooldownMs: i64(60_000)})
	v, kv := w.account(btcBTC)
	w.mintN(v, kv, 1_000)
	w.stakeFor(v, kv, 1_000)
	w.m.Read(func(st *State, _ uint64) {
		u := st.USDx
		if u.Staked != 1_000 || u.SusdxSupply != 1_000 || u.YieldEscrowMsat != 0 {
			t.Fatalf("staked %d, sUSDx %d, escrow %d", u.Staked, u.SusdxSupply, u.YieldEscrowMsat)
		}
		u.Holders[v].Susdx, u.SusdxSupply = supply, supply
	})
	return w, v
}

// TestStakeRefusedBelowTheSharePriceFloor: 1,000 USDx staked against
// 666,666,666,667 sUSDx is a share price of 1.5 q9, served rounded down
// as 1. Below LevelStakeSharePriceFloor a stake of 1,000 USDx bought SPEC's
// floor(1,000 x 1e9 / 1) = 1e12 sUSDx, worth 1,500 USDx (it paid 1,000,
// the amount asked, LevelStakeAtCost's cap), and was released with 1,199
// USDx: the victim's pool fell from 1,000 to 801. From the level the
// stake is refused 409 conflict (reason share_price_floor) and the pool
// keeps its 1,000.
func TestStakeRefusedBelowTheSharePriceFloor(t *testing.T) {
	for _, level := range []uint32{usdx.LevelStakeSharePriceFloor - 1, usdx.LevelStakeSharePriceFloor} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, _ := nearZeroPoolWorld(t, level, 666_666_666_667)
			if p := w.public().Staking.SharePriceQ9; p != 1 {
				t.Fatalf("served share price %d, want 1", p)
			}
			a, ka := w.account(btcBTC)
			w.mintN(a, ka, 1_000)
			res := w.cmd(a, ka, CmdUSDxStake, USDxAmountPayload{Amount: 1_000}, "")
			if level >= usdx.LevelStakeSharePriceFloor {
				wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
				if r := body(t, res)["reason"]; r != "share_price_floor" {
					t.Fatalf("reason %v: %s", r, res.Body)
				}
				if h, st := w.holder(a), w.st().u; h.Usdx != 1_000 || h.Susdx != 0 || st.Staked != 1_000 {
					t.Fatalf("a refused stake moved USDx: %+v, staked %d", h, st.Staked)
				}
				return
			}
			wantOK(t, res)
			wantOK(t, w.cmd(a, ka, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(a).Susdx}, ""))
			for i := 0; i < 3; i++ {
				w.ts += 30_000
				wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			}
			got, st := w.holder(a).Usdx, w.st().u
			t.Logf("released %d USDx for a stake of 1,000; the victim's pool holds %d", got, st.Staked)
			if got <= 1_000 || st.Staked >= 1_000 {
				t.Fatalf("below the level the over-issued shares took the pool: released %d, pool %d", got, st.Staked)
			}
		})
	}
}

// TestStakeAtTheSharePriceFloor: the boundary. At a served price of
// exactly MinStakeSharePriceQ9 a stake is taken and a round trip gains
// nothing; just below it a stake is refused.
func TestStakeAtTheSharePriceFloor(t *testing.T) {
	// 1,000 USDx against 1,000 x 1e9 / p sUSDx is a price of exactly p.
	w, _ := nearZeroPoolWorld(t, usdx.LevelStakeSharePriceFloor, 1_000*1_000_000_000/usdx.MinStakeSharePriceQ9)
	if p := w.public().Staking.SharePriceQ9; p != wire.Int(usdx.MinStakeSharePriceQ9) {
		t.Fatalf("served share price %d", p)
	}
	a, ka := w.account(btcBTC)
	w.mintN(a, ka, 1_000)
	sr := w.stakeFor(a, ka, 999)
	if sr.Usdx != "999" || sr.Susdx != "99900" {
		t.Fatalf("stake %+v", sr)
	}
	wantOK(t, w.cmd(a, ka, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(a).Susdx}, ""))
	for i := 0; i < 3; i++ {
		w.ts += 30_000
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	}
	if got := w.holder(a).Usdx; got > 1_000 {
		t.Fatalf("a round trip at the floor gained: %d USDx", got)
	}

	// Just below: one sUSDx more (a price of 9,999,900 q9).
	w, _ = nearZeroPoolWorld(t, usdx.LevelStakeSharePriceFloor, 1_000*1_000_000_000/usdx.MinStakeSharePriceQ9+1)
	if p := w.public().Staking.SharePriceQ9; p >= wire.Int(usdx.MinStakeSharePriceQ9) {
		t.Fatalf("served share price %d", p)
	}
	a, ka = w.account(btcBTC)
	w.mintN(a, ka, 1_000)
	wantRefused(t, w.cmd(a, ka, CmdUSDxStake, USDxAmountPayload{Amount: 1_000}, ""), http.StatusConflict, wire.CodeConflict)
}
