package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
)

// TestUSDxBackingHoldsUnderOperatorChanges: seeded random mints,
// redemptions (queued on a stale oracle or a halted market), stakes,
// unstakes, USDx withdrawals, their payment and deposits back, organic
// trading that swings funding both ways, and the operator changes the
// simulation of TestUSDxSimulationKeepsTheIdentityAndConservation leaves
// alone: the hedge market's status (live, halted, reduce-only), its
// smallest and largest order and its funding cap, the unstake cooldown, a
// reserve without fees. The machine checks the ledger's conservation and
// the backing identity after every entry; on top, after every entry:
//
//   - the hedge is worth its supply: the hedge's equity at the last print
//     (margin + PnL) plus the uncovered shortfall is at least the supply's
//     dollar value (ValueMsat), never below by a millisatoshi;
//   - the order of loss: a boundary that took the reserve below its floor
//     or left a shortfall uncovered left no staked USDx a markdown could
//     close (fewer than the market's smallest order).
func TestUSDxBackingHoldsUnderOperatorChanges(t *testing.T) {
	seeds := []uint64{8, 10, 11}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { backingProp(t, seed, 1200) })
	}
}

func backingProp(t *testing.T, seed uint64, entries int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	w := newUSDxWorld(t)
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(2_000_000), ReserveFloorQ9: i64(500_000), UnstakeCooldownMs: i64(30 * 60_000)})
	type acct struct{ a, k string }
	var accts []acct
	for i := 0; i < 10; i++ {
		a, k := w.account(5 * btcBTC)
		if i >= 7 {
			a, k = w.account(60 * btcBTC)
		}
		accts = append(accts, acct{a, k})
	}
	traders := accts[7:]
	mid := usdQ8(100_000)
	outcomes := map[string]int{}
	var wids []string
	var over int64
	seen := 0
	for i := 0; i < entries; i++ {
		ac := accts[rng.IntN(7)]
		n := rng.Int64N(20_000) + 1
		if rng.IntN(3) == 0 {
			n = rng.Int64N(4) + 1
		}
		var res *Result
		kind := ""
		switch op := rng.IntN(110); {
		case op < 22:
			kind = "print"
			step := mid / 500
			if rng.IntN(20) == 0 {
				step = mid / 3
			}
			mid += rng.Int64N(2*step+1) - step
			mid = min(max(mid, usdQ8(20_000)), usdQ8(300_000))
			mid -= mid % 50_000_000
			if rng.IntN(15) == 0 {
				w.walkTo(w.ts + 90_000) // the oracle goes stale
			}
			res = w.print("BTCUSD", mid)
		case op < 28:
			kind = "time"
			w.walkPrinting(w.ts+rng.Int64N(40*60_000), mid)
			res = w.print("BTCUSD", mid)
		case op < 42:
			kind = "mint"
			r, q := w.quote(ac.a, ac.k, usdx.SideMint, n)
			res = r
			if r.OK() {
				if rng.IntN(5) == 0 {
					w.ts += rng.Int64N(40_000)
				}
				res, _ = w.mint(ac.a, ac.k, q.QuoteID)
			}
		case op < 54:
			kind = "redeem"
			res = w.cmd(ac.a, ac.k, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("r"), Amount: min(n, w.holder(ac.a).Usdx+1)}, "")
		case op < 64:
			kind = "stake"
			res = w.cmd(ac.a, ac.k, CmdUSDxStake, USDxAmountPayload{Amount: min(n, w.holder(ac.a).Usdx)}, "")
		case op < 71:
			kind = "unstake"
			s := w.holder(ac.a).Susdx
			if rng.IntN(3) == 0 {
				n = s
			}
			res = w.cmd(ac.a, ac.k, CmdUSDxUnstake, USDxAmountPayload{Amount: min(n, s)}, "")
		case op < 75:
			kind = "withdraw"
			res = w.simWithdraw(ac.a, ac.k, n, &wids)
		case op < 78:
			kind = "paid"
			if res = w.simPaid(&wids); res == nil {
				continue
			}
		case op < 81:
			kind = "deposit"
			if res = w.simDeposit(ac.a, n); res == nil {
				continue
			}
		case op < 92:
			kind = "trade"
			tr := traders[rng.IntN(len(traders))]
			side := "buy"
			if (i/300)%2 == 1 {
				side = "sell"
			}
			res = w.order(tr.a, tr.k, levered(mktOrder(w.id("o"), "BTC-PERP", side, rng.Int64N(900_000)+1), 10))
		case op < 94:
			kind = "halt"
			res = w.op(CmdUSDxHalt, USDxHaltPayload{Halt: rng.IntN(4) == 0, Reason: "sim"})
		case op < 97:
			kind = "market"
			st := []market.Status{market.StatusLive, market.StatusLive, market.StatusHalted, market.StatusReduceOnly}[rng.IntN(4)]
			p := MarketSetPayload{MarketID: "BTC-PERP", Status: &st}
			if rng.IntN(3) == 0 {
				mn := int64(1 + rng.IntN(3))
				p.MinOrderContracts = &mn
			}
			if rng.IntN(2) == 0 {
				mx := []int64{3, 50, 2_000, 1_000_000}[rng.IntN(4)]
				p.MaxOrderContracts = &mx
			}
			if rng.IntN(3) == 0 {
				c := []int64{50_000, 5_000_000, 100_000_000}[rng.IntN(3)]
				p.MaxFundingRateHourlyQ9 = &c
			}
			res = w.op(CmdMarketSet, p)
		case op < 100:
			kind = "cooldown"
			res = w.op(CmdUSDxParams, USDxParamsPayload{UnstakeCooldownMs: i64(rng.Int64N(2 * 3_600_000))})
		default:
			kind = "params"
			floor := rng.Int64N(1_000_000)
			if rng.IntN(2) == 0 {
				floor = 1_000_000_000 // a loss reaches the stakers
			}
			p := USDxParamsPayload{ReserveFloorQ9: i64(floor), ReserveTargetQ9: i64(max(floor, 1_000_000+rng.Int64N(5_000_000)))}
			if rng.IntN(3) == 0 {
				p.BaseFeeQ9 = i64(0)
			}
			res = w.op(CmdUSDxParams, p)
		}
		outcomes[kind+" "+res.Code+fmt.Sprint(res.Status)]++
		w.m.Read(func(st *State, _ uint64) {
			u := st.USDx
			m := st.Market.MarketsByID[usdx.HedgeMarket]
			if n := len(u.History); n > seen {
				wf := u.History[n-1] // the boundary this entry ended after
				belowFloor := wf.FromReserveMsat > -wf.FlowMsat-wf.ShortfallMsat
				if wf.FlowMsat < 0 && (belowFloor || wf.UncoveredMsat > 0) && u.Staked >= m.Params.MinOrderContracts {
					t.Fatalf("entry %d (%s): the reserve below its floor or the uncovered shortfall took a loss while %d USDx were staked: %+v", i, kind, u.Staked, wf)
				}
				seen = n
			}
			pos := st.Trade.Position(usdx.HedgeAccount, usdx.HedgeMarket)
			pr, ok := st.Market.LastPrint(usdx.HedgeMarket)
			if pos.Contracts == 0 || !ok {
				return
			}
			pnl, err := trade.PnLMsat(&m.Params, pos.Side, pos.Contracts, pos.EntryQ8, pr.MidQ8)
			if err != nil {
				t.Fatal(err)
			}
			dev := pos.MarginMsat + pnl + u.UncoveredShortfallMsat - usdx.ValueMsat(pos.Contracts, pr.MidQ8)
			if dev < 0 {
				t.Fatalf("entry %d (%s): the hedge (%d contracts, margin %d, PnL %d, uncovered %d) is worth %d msat less than the supply's value",
					i, kind, pos.Contracts, pos.MarginMsat, pnl, u.UncoveredShortfallMsat, -dev)
			}
			over = max(over, dev)
		})
	}
	st := w.st().u
	pos, neg, marked, minted := waterfallCounts(st.History)
	t.Logf("supply %d staked %d; boundaries %d (+%d -%d, %d yield mints, %d markdowns); hedge at most %d msat over its value; %v",
		st.Supply, st.Staked, len(st.History), pos, neg, minted, marked, over, outcomes)
	if neg == 0 || marked == 0 || outcomes["mint 201"] == 0 || outcomes["redeem 201"] == 0 || outcomes["stake 201"] == 0 {
		t.Fatalf("weak run: %v", outcomes)
	}
}
