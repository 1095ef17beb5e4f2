package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// stakeFor stakes n USDx for acct and returns what the stake answered.
func (w *usdxWorld) stakeFor(acct, key string, n int64) usdx.StakeResult {
	w.t.Helper()
	res := w.cmd(acct, key, CmdUSDxStake, USDxAmountPayload{Amount: n}, "")
	wantOK(w.t, res)
	var sr usdx.StakeResult
	if err := res.Decode(&sr); err != nil {
		w.t.Fatal(err)
	}
	return sr
}

// TestStakeTakesOnlyWhatItsSharesAreWorth: the review's inflation attack
// of 2026-11-27. The pool's only holder raises the price of its one share
// by staking 2P-1 (one share, P-1 left behind) and unstaking, cycle after
// cycle; a later stake just under two shares' price then bought one share.
// Below LevelStakeAtCost the rest of the stake went to the attacker (24%
// of it in the review); from it the stake takes the share's worth, rounded
// up, and the rest stays with the staker.
func TestStakeTakesOnlyWhatItsSharesAreWorth(t *testing.T) {
	for _, level := range []uint32{usdx.LevelStakeAtCost - 1, usdx.LevelStakeAtCost} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0)})
			a, ka := w.account(20 * btcBTC)
			v, kv := w.account(20 * btcBTC)
			w.mintN(a, ka, 100_000)
			w.mintN(v, kv, 10_000)
			w.balancedBy(500_000) // the hedge receives funding: yield for the pool
			w.stakeFor(a, ka, 1)
			w.nextBoundary()
			for range 5 {
				st := w.st().u
				p := st.Staked / st.SusdxSupply
				w.stakeFor(a, ka, 2*p-1)
				wantOK(t, w.cmd(a, ka, CmdUSDxUnstake, USDxAmountPayload{Amount: 1}, ""))
				w.walkTo(w.ts + 3_600_000 + 2_000)
			}
			st := w.st().u
			worth := float64(st.Staked) / float64(st.SusdxSupply)
			q := 2*usdx.SharePriceQ9(st.Staked, st.SusdxSupply)/1_000_000_000 - 1
			before := w.holder(v).Usdx
			sr := w.stakeFor(v, kv, q)
			took := before - w.holder(v).Usdx
			if sr.Susdx != "1" || sr.Usdx != fmt.Sprint(took) {
				t.Fatalf("asked %d: answered %+v, took %d", q, sr, took)
			}
			t.Logf("a share worth %.2f USDx; the victim asked to stake %d and gave %d", worth, q, took)
			if level < usdx.LevelStakeAtCost {
				if took != q {
					t.Fatalf("below the level the whole %d was expected to go, %d went", q, took)
				}
				return
			}
			if float64(took) < worth || float64(took) >= worth+1 {
				t.Fatalf("the stake took %d USDx for one share worth %.4f", took, worth)
			}
		})
	}
}

// TestHedgeWaitsForAHaltedMarket: the review's redemption of 10,000 USDx
// in a halted hedge market, where every trader's order is refused. Below
// LevelHedgeHalts it was paid at once at the halted price; from it the
// redemption is queued (market_halted) and paid at the first print after
// the market is live again.
func TestHedgeWaitsForAHaltedMarket(t *testing.T) {
	for _, level := range []uint32{usdx.LevelHedgeHalts - 1, usdx.LevelHedgeHalts} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			a, ka := w.account(btcBTC)
			w.mintN(a, ka, 10_000)
			halted, live := market.StatusHalted, market.StatusLive
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
			wantOK(t, w.print("BTCUSD", usdQ8(99_000)))
			tr, kt := w.account(btcBTC)
			wantRefused(t, w.order(tr, kt, mktOrder("o1", "BTC-PERP", "buy", 10)), http.StatusBadRequest, wire.CodeMarketHalted)
			free0 := w.balance(ledger.Free(a))
			res := w.cmd(a, ka, CmdUSDxRedeem, USDxAmountPayload{ID: "r1", Amount: 10_000}, "")
			wantOK(t, res)
			var sg usdx.SagaView
			if err := res.Decode(&sg); err != nil {
				t.Fatal(err)
			}
			if level < usdx.LevelHedgeHalts {
				if sg.State != usdx.SagaPaid || w.balance(ledger.Free(a)) == free0 {
					t.Fatalf("below the level the redemption was paid at once: %+v", sg)
				}
				return
			}
			if sg.State != usdx.SagaQueued || sg.QueuedReason == nil || *sg.QueuedReason != "market_halted" || w.balance(ledger.Free(a)) != free0 {
				t.Fatalf("in a halted market: %+v, free %d -> %d", sg, free0, w.balance(ledger.Free(a)))
			}
			wantOK(t, w.print("BTCUSD", usdQ8(99_100)))
			if w.balance(ledger.Free(a)) != free0 {
				t.Fatal("a print while halted paid the queued redemption")
			}
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
			wantOK(t, w.print("BTCUSD", usdQ8(99_200)))
			if w.balance(ledger.Free(a)) <= free0 {
				t.Fatal("the first print after the halt did not pay the queued redemption")
			}
		})
	}
}

// TestYieldMintWaitsForATradableHedge: at a funding boundary with the hedge
// market halted, or its print stale, the waterfall mints no yield (the
// escrow keeps it); below LevelHedgeHalts it sold hedge contracts then.
func TestYieldMintWaitsForATradableHedge(t *testing.T) {
	for _, level := range []uint32{usdx.LevelHedgeHalts - 1, usdx.LevelHedgeHalts} {
		for _, how := range []string{"halted", "stale"} {
			t.Run(fmt.Sprintf("level=%d/%s", level, how), func(t *testing.T) {
				w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
				w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0)})
				a, ka := w.account(20 * btcBTC)
				w.mintN(a, ka, 100_000)
				w.balancedBy(500_000)
				w.stakeFor(a, ka, 50_000)
				var wf usdx.Waterfall
				if how == "halted" {
					halted := market.StatusHalted
					w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
					wf = w.nextBoundary()
				} else {
					n := len(w.st().u.History)
					w.walkTo((w.ts/3_600_000+1)*3_600_000 + 1000) // no print: stale
					wf = w.st().u.History[n]
				}
				if level < usdx.LevelHedgeHalts {
					if wf.YieldMinted == 0 {
						t.Fatalf("below the level a yield mint was expected: %+v", wf)
					}
					return
				}
				if wf.YieldMinted != 0 || w.st().u.YieldEscrowMsat <= 0 {
					t.Fatalf("a %s hedge market minted yield: %+v, escrow %d", how, wf, w.st().u.YieldEscrowMsat)
				}
			})
		}
	}
}

// roundTripLoss mints n USDx for acct and redeems them at once: the msat
// the round trip cost.
func (w *usdxWorld) roundTripLoss(acct, key string, n int64) int64 {
	w.t.Helper()
	free0 := w.balance(ledger.Free(acct))
	w.mintN(acct, key, n)
	wantOK(w.t, w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("rt"), Amount: n}, ""))
	return free0 - w.balance(ledger.Free(acct))
}

// shortsHeavier is a venue with an empty reserve, 100,000 USDx minted
// and organic shorts heavier, so the hedge pays funding at every boundary
// and a hole opens after a few: b (no USDx yet) and the organic short s.
func shortsHeavier(t *testing.T, level uint32) (w *usdxWorld, b, kb, s, sk string) {
	t.Helper()
	w = &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
	w.params(USDxParamsPayload{BaseFeeQ9: i64(0)}) // an empty reserve
	a, ka := w.account(20 * btcBTC)
	b, kb = w.account(20 * btcBTC)
	w.mintN(a, ka, 100_000)
	s, sk = w.account(btcBTC)
	wantOK(t, w.order(s, sk, mktOrder("short1", "BTC-PERP", "sell", 500_000)))
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	return w, b, kb, s, sk
}

// TestPositiveFlowRepaysTheUncoveredShortfall: the review's hole of
// negative boundaries with an empty reserve. Below LevelRepayShortfall a
// later positive flow went to the reserve and the hole stayed; from it the
// flow refills the hedge's margin first, and a mint and redemption after
// that costs what it cost before the hole.
func TestPositiveFlowRepaysTheUncoveredShortfall(t *testing.T) {
	for _, level := range []uint32{usdx.LevelRepayShortfall - 1, usdx.LevelRepayShortfall} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w, b, kb, s, sk := shortsHeavier(t, level)
			before := w.roundTripLoss(b, kb, 50_000)
			for range 3 {
				w.nextBoundary()
			}
			hole := w.st().u.UncoveredShortfallMsat
			if hole <= 0 {
				t.Fatal("no uncovered shortfall")
			}
			wantOK(t, w.order(s, sk, mktOrder("cover1", "BTC-PERP", "buy", 500_000)))
			w.balancedBy(500_000)
			wf := w.nextBoundary()
			left := w.st().u.UncoveredShortfallMsat
			if level < usdx.LevelRepayShortfall {
				if left != hole || wf.RepaidMsat != 0 {
					t.Fatalf("below the level the hole was expected to stay: %d -> %d, %+v", hole, left, wf)
				}
				return
			}
			if wf.RepaidMsat != min(wf.FlowMsat, hole) || left != hole-wf.RepaidMsat ||
				wf.ToReserveMsat+wf.ToStakersMsat+wf.OverflowMsat != wf.FlowMsat-wf.RepaidMsat {
				t.Fatalf("hole %d -> %d: %+v", hole, left, wf)
			}
			for left > 0 {
				wf = w.nextBoundary()
				if wf.RepaidMsat <= 0 {
					t.Fatalf("a positive boundary repaid nothing: %+v", wf)
				}
				left = w.st().u.UncoveredShortfallMsat
			}
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			if after := w.roundTripLoss(b, kb, 50_000); after > before+1_000 {
				t.Fatalf("a round trip cost %d after the hole was repaid, %d before it", after, before)
			}
		})
	}
}
