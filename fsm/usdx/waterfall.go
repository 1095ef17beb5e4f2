package usdx

import (
	"fmt"
	"math"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// The funding waterfall (docs/decisions.md, USDx). The trading book has
// already settled the hedge's funding at the boundary, through its margin
// (trade.OnFunding); this runs after it and records one Waterfall per
// boundary of the hedge market, also when nothing flowed.
//
// Positive funding F (the hedge received it): F leaves the hedge's margin;
// the reserve takes up to its target (target - reserve, at least 0); the
// rest goes to the stakers: into the yield escrow, from which whole USDx
// are minted into the staking pool (each one opens its hedge contract
// with margin at leverage 1 and the taker fee, so the identity holds; the
// share price rises); what buys no whole USDx, or what the hard cap or
// the open-interest limits hold back, waits in the escrow. With no sUSDx
// in existence the stakers' part is overflow and goes to the reserve.
//
// Negative funding P (the hedge paid it from its margin): the margin is
// made whole again, the loss taken in this order:
//
//  1. the reserve down to its floor;
//  2. the yield escrow (stakers' sats not yet minted);
//  3. the staking pool (sUSDx marked down, the junior tranche): the fewest
//     whole USDx whose hedge contracts, closed, free at least what is
//     left; the surplus of the last contract goes back to the yield escrow
//     (toStakersMsat; to the reserve below LevelMarkdownSurplusToStakers);
//  4. the reserve below its floor, to zero;
//  5. what is still missing is recorded as uncovered shortfall; USDx
//     holders, senior, are never marked down.
//
// shortfallMsat is what the reserve above its floor could not cover (the
// loss that reached steps 2 to 5).

// ReserveTargetMsat and ReserveFloorMsat are the reserve's bounds at
// markQ8: supply's value x rate / 1e9, rounded down (0 and false without a
// mark). From LevelReserveBoundsAtPeak the supply is the largest since the
// hedge market's last boundary (PeakSupply), so a redemption before a
// boundary does not lower them for it.
func (s *State) ReserveBounds(markQ8 int64) (target, floor int64, ok bool) {
	if markQ8 <= 0 {
		return 0, 0, false
	}
	v := ValueMsat(max(s.Supply, s.PeakSupply), markQ8)
	return mulDivFloor(v, s.Params.ReserveTargetQ9, Q9), mulDivFloor(v, s.Params.ReserveFloorQ9, Q9), true
}

// OnFunding runs the waterfall for a boundary of the hedge market.
func (s *State) OnFunding(e *Env, ev market.FundingEvent) {
	if ev.MarketID != HedgeMarket {
		return
	}
	if e.T.Level >= LevelReleaseBeforeBoundary {
		// Cooldowns that ended before the boundary end before its
		// waterfall, whichever entry's time passed both.
		s.releaseCooled(e, ev.BoundaryTsMs-1)
	}
	w := Waterfall{BoundaryTsMs: ev.BoundaryTsMs, MarkQ8: ev.MarkQ8, SharePriceQ9Before: s.poolSharePriceQ9(e)}
	w.FlowMsat = s.hedgeFlow(e, ev)
	switch {
	case w.FlowMsat > 0:
		s.positive(e, ev.MarkQ8, &w)
	case w.FlowMsat < 0:
		s.negative(e, ev.MarkQ8, &w)
	}
	w.SharePriceQ9After = s.poolSharePriceQ9(e)
	s.PoolOpenedTsMs = 0 // set from LevelStakePaysAccrual only
	if e.T.Level >= LevelReserveBoundsAtPeak {
		// The next interval's bounds start from the supply now.
		s.PeakSupply = s.Supply
	}
	s.History = append(s.History, w)
	if len(s.History) > WaterfallsKept {
		s.History = s.History[len(s.History)-WaterfallsKept:]
	}
	s.mustIdentity(e)
}

// hedgeFlow is what the hedge's margin received (> 0) or paid (< 0) at
// this boundary: its funding-flow record of the boundary, if any.
func (s *State) hedgeFlow(e *Env, ev market.FundingEvent) int64 {
	a, ok := e.Trade.Accounts[HedgeAccount]
	if !ok || e.hedge().Contracts == 0 {
		return 0
	}
	for i := len(a.FundingFlows) - 1; i >= 0; i-- {
		f := a.FundingFlows[i]
		if f.BoundaryTsMs == ev.BoundaryTsMs && f.MarketID == ev.MarketID {
			return f.PaidMsat
		}
		if f.BoundaryTsMs < ev.BoundaryTsMs {
			break
		}
	}
	return 0
}

func (s *State) positive(e *Env, markQ8 int64, w *Waterfall) {
	hf := ledger.Free(HedgeAccount)
	f := w.FlowMsat
	if e.T.Level >= LevelRepayShortfall && s.UncoveredShortfallMsat > 0 {
		// The hedge's margin lacks the uncovered shortfall: the flow
		// refills it first, by staying where it arrived.
		w.RepaidMsat = min(f, s.UncoveredShortfallMsat)
		s.UncoveredShortfallMsat -= w.RepaidMsat
		f -= w.RepaidMsat
		if f == 0 {
			return
		}
	}
	e.Trade.MoveMargin(e.T, HedgeAccount, HedgeMarket, -f)
	target, _, _ := s.ReserveBounds(markQ8)
	w.ToReserveMsat = min(f, max(target-s.ReserveMsat, 0))
	s.move(e, hf, Reserve, w.ToReserveMsat)
	s.ReserveMsat += w.ToReserveMsat
	rest := f - w.ToReserveMsat
	if s.SusdxSupply == 0 {
		w.OverflowMsat = rest
		s.move(e, hf, Reserve, rest)
		s.ReserveMsat += rest
		return
	}
	if opened := s.PoolOpenedTsMs; opened != 0 && e.T.Level >= LevelStakePaysAccrual {
		// The pool opened during the interval (a stake into an empty
		// pool): the stakers take the part of the interval after it,
		// rounded down; the part before is overflow, as it would have
		// been with no sUSDx. Without this a stake made seconds before
		// the boundary into an empty pool took the whole interval's
		// yield (accruedYieldQ9 prices nothing without shares).
		if start := w.BoundaryTsMs - market.FundingIntervalMs; opened > start {
			held := min(max(w.BoundaryTsMs-opened, 0), market.FundingIntervalMs)
			toStakers := mulDivFloor(rest, held, market.FundingIntervalMs)
			w.OverflowMsat = rest - toStakers
			s.move(e, hf, Reserve, w.OverflowMsat)
			s.ReserveMsat += w.OverflowMsat
			rest = toStakers
		}
	}
	w.ToStakersMsat = rest
	s.move(e, hf, YieldEscrow, rest)
	s.YieldEscrowMsat += rest
	w.YieldMinted = s.mintYield(e)
}

// LevelRepayShortfall is the feature level (fsm.FeatureLevel) from which a
// positive flow first repays the uncovered shortfall (it stays in the
// hedge's margin), before the reserve and the stakers. Below it nothing
// repaid the hole, and a new minter's full margin shared it on redemption
// (a review of 2026-11-27: 5,000,000 msat of a 15,000,000 msat hole on a
// mint and redemption of 50,000 USDx).
const LevelRepayShortfall uint32 = 4

// LevelMarkdownSurplusToStakers is the feature level (fsm.FeatureLevel)
// from which what a markdown's last whole USDx frees beyond the loss goes
// back to the stakers' yield escrow (recorded as the entry's
// toStakersMsat), which the share price counts (LevelEscrowInPrice).
// Below it the surplus went to the reserve: a loss of 996 msat burnt a
// whole staked USDx (about 1,000,000 msat at 100,000 USD) and the stakers
// lost a thousand times the loss (the share price went from 1.0 to 0.909
// in a pool of 11 USDx).
const LevelMarkdownSurplusToStakers uint32 = 8

// LevelHoleLeavesWithContracts is the feature level (fsm.FeatureLevel)
// from which hedge contracts that close take their share of a hole in
// the hedge's margin with them. The trading book releases a closed
// contract's pro-rata part of the margin, so a redemption during an
// uncovered shortfall is paid short by its share of it (decisions.md),
// and a markdown's contracts release less by their share of the loss
// being covered. Below it neither was counted: the uncovered shortfall
// stayed whole after the redemptions that bore it (a hole of 15,000,000
// msat outlived the redemption of the whole supply, and with it the halt
// of mints and stakes, which no funding could repay any more: no hedge
// was left to receive it), and a markdown refilled the whole loss into the
// margin on top of its contracts' share, so the stakers lost that share
// twice (50 msat more for a loss of 1,000 msat, 20 USDx all staked) and
// the remaining hedge was over-funded by it.
const LevelHoleLeavesWithContracts uint32 = 8

// LevelMarkdownInChunks is the feature level (fsm.FeatureLevel) from
// which a markdown closes as many hedge orders as the loss needs, each of
// at most the hedge market's maxOrderContracts, until the loss is covered
// or the staking pool is empty. Below it the markdown was one order: a
// loss beyond maxOrderContracts USD (an operator who lowered the largest
// order below a hedge that had grown past it, or raised the funding cap)
// went on to the reserve below its floor and then to the uncovered
// shortfall while the stakers, junior to both, still held USDx (found by
// a review on 2026-11-29: with the largest order at 2 contracts a loss of
// 5 USD burnt 2 staked USDx and took 3,001,401 msat from the reserve below
// its floor, 49,998 USDx still staked; TestMarkdownIsNotCappedAtOneOrder).
const LevelMarkdownInChunks uint32 = 9

// MarkdownOrdersMax bounds the hedge orders one boundary's markdown
// places (LevelMarkdownInChunks), so the entry's work stays bounded
// whatever the operator sets: with the hedge within its position limit
// (PositionLimitOrders orders) and a funding cap of at most 10% an hour,
// a boundary's loss needs one or two; past the bound the rest goes on
// down the order of loss (the reserve below its floor, then uncovered).
const MarkdownOrdersMax = 100

// mintYield mints as many whole USDx into the staking pool as the escrow
// pays for (margin at leverage 1 plus the taker fee of each contract),
// within the hard cap and the open-interest limits. It needs the hedge
// market's print; a mint halt does not stop it (SPEC section 3).
func (s *State) mintYield(e *Env) int64 {
	m, pr, ok := e.hedgeMarket()
	if !ok || s.YieldEscrowMsat <= 0 || m.Params.Status == market.StatusReduceOnly {
		return 0
	}
	if e.T.Level >= LevelHedgeHalts && (e.hedgeHalted() || !e.oracleFresh()) {
		return 0
	}
	cost := func(k int64) (int64, bool) {
		qt, err := trade.QuoteTrade(m, pr, trade.Short, k)
		if err != nil {
			return 0, false
		}
		pl, ref := trade.PlanFillLeveraged(m, e.hedge(), trade.Short, k, 1, qt, math.MaxInt64/4, e.now())
		if ref != nil {
			return 0, false
		}
		return pl.OpenMarginMsat + pl.FeeMsat, true
	}
	limit := min(s.Params.HardCap-s.Supply, m.Params.MaxOrderContracts,
		trade.OICapContracts(&m.Params)-m.ShortOIContracts, trade.PositionLimitContracts(&m.Params)-e.hedge().Contracts,
		usdOfMsatFloor(s.YieldEscrowMsat, pr.MidQ8))
	if limit < 1 {
		return 0
	}
	// The largest k in [0, limit] whose cost the escrow pays (cost grows
	// with k): binary search.
	lo, hi := int64(0), limit
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if c, ok := cost(mid); ok && c <= s.YieldEscrowMsat {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 || lo < m.Params.MinOrderContracts {
		return 0
	}
	c, _ := cost(lo)
	s.move(e, YieldEscrow, ledger.Free(HedgeAccount), c)
	s.YieldEscrowMsat -= c
	s.hedgeOrder(e, "sell", lo, false)
	if got := e.T.Ledger.Balance(ledger.Free(HedgeAccount)); got != 0 {
		panic(fmt.Sprintf("usdx: yield mint left %d msat in the hedge's free balance", got))
	}
	s.Supply += lo
	s.Staked += lo
	s.notePeak(e)
	return lo
}

// LevelReserveBoundsAtPeak is the feature level (fsm.FeatureLevel) from
// which the reserve's target and floor are measured on the largest supply
// since the hedge market's last boundary (State.PeakSupply), not on the
// supply at the boundary. Both move with supply by reserveTargetQ9 (5%)
// and reserveFloorQ9 (1%) of its value while a mint and a redemption cost
// about 0.34% together, so the bounds were cheap to move just before a
// boundary. Found by a review on 2026-11-28: with the reserve at its
// target, a mint of 300 USDx 10 s before a positive boundary opened a gap
// larger than the hour's payment, so the stake after it paid no accrued
// yield (LevelStakePaysAccrual); the 300 redeemed closed the gap again,
// the boundary paid its whole hour to the stakers, and the stake,
// unstaked at once, left an hour later 2,095,206 msat up where it
// otherwise ends 878,809 msat down (TestAMintCannotMoveTheReservesGapForAStake). A
// staker could likewise redeem before a boundary to lower the target (the
// stakers take more of a payment) or the floor (the reserve takes more of
// a loss), and mint again after it.
const LevelReserveBoundsAtPeak uint32 = 8

// notePeak records the supply in PeakSupply after it grew (a mint, a
// yield mint), from LevelReserveBoundsAtPeak.
func (s *State) notePeak(e *Env) {
	if e.T.Level >= LevelReserveBoundsAtPeak {
		s.PeakSupply = max(s.PeakSupply, s.Supply)
	}
}

func (s *State) negative(e *Env, markQ8 int64, w *Waterfall) {
	hf := ledger.Free(HedgeAccount)
	need := -w.FlowMsat
	refill := func(msat int64) {
		e.Trade.MoveMargin(e.T, HedgeAccount, HedgeMarket, msat)
	}
	_, floor, _ := s.ReserveBounds(markQ8)
	// 1. The reserve above its floor.
	r1 := min(need, max(s.ReserveMsat-floor, 0))
	s.move(e, Reserve, hf, r1)
	s.ReserveMsat -= r1
	refill(r1)
	need -= r1
	w.FromReserveMsat = r1
	w.ShortfallMsat = need
	// 2. The yield escrow.
	esc := min(need, s.YieldEscrowMsat)
	s.move(e, YieldEscrow, hf, esc)
	s.YieldEscrowMsat -= esc
	refill(esc)
	need -= esc
	w.FromEscrowMsat = esc
	// 3. The staking pool: one hedge order of at most maxOrderContracts
	// at a time, from LevelMarkdownInChunks as many as the loss needs (at
	// most MarkdownOrdersMax).
	for orders := 0; need > 0 && s.Staked > 0 && orders < MarkdownOrdersMax; orders++ {
		k, freed, carried, carriedHole := s.markdown(e, need)
		if k > 0 {
			// The closed contracts already bore carried of the loss
			// (their margin was short by it); the rest is refilled.
			cover := min(freed, need-carried)
			s.UncoveredShortfallMsat -= carriedHole
			if e.hedge().Contracts > 0 {
				refill(cover)
			} else {
				s.move(e, hf, Reserve, cover)
				s.ReserveMsat += cover
			}
			if surplus := freed - cover; e.T.Level >= LevelMarkdownSurplusToStakers {
				// What the last contract freed beyond the loss is the
				// stakers' own: back to their escrow, so a markdown
				// takes the loss and no more.
				s.move(e, hf, YieldEscrow, surplus)
				s.YieldEscrowMsat += surplus
				w.ToStakersMsat += surplus
			} else {
				s.move(e, hf, Reserve, surplus)
				s.ReserveMsat += surplus
			}
			need -= carried + cover
			w.Markdown += k
		}
		if k == 0 || e.T.Level < LevelMarkdownInChunks {
			break
		}
	}
	// 4. The reserve below its floor.
	if need > 0 && e.hedge().Contracts > 0 {
		r2 := min(need, s.ReserveMsat)
		s.move(e, Reserve, hf, r2)
		s.ReserveMsat -= r2
		refill(r2)
		need -= r2
		w.FromReserveMsat += r2
	}
	// 5. Uncovered.
	if need > 0 && e.hedge().Contracts > 0 {
		w.UncoveredMsat = need
		s.UncoveredShortfallMsat += need
	}
}

// markdown burns the fewest whole USDx of the staking pool whose hedge
// contracts, closed, free at least need msat (all of the pool if none
// suffices), and returns how many, what they freed (in the hedge's free
// balance), and, from LevelHoleLeavesWithContracts, the shares of need
// and of the uncovered shortfall they carried out (the margin they
// released was short by them; they count toward need).
func (s *State) markdown(e *Env, need int64) (k, got, carried, carriedHole int64) {
	m, pr, ok := e.hedgeMarket()
	if !ok {
		return 0, 0, 0, 0
	}
	pos := e.hedge()
	carry := func(k int64) int64 {
		if e.T.Level < LevelHoleLeavesWithContracts {
			return 0
		}
		return holeShare(pos.MarginMsat, need, k, pos.Contracts)
	}
	freed := func(k int64) (int64, bool) {
		qt, err := trade.QuoteTrade(m, pr, trade.Long, k)
		if err != nil {
			return 0, false
		}
		pl, ref := trade.PlanFillLeveraged(m, e.hedge(), trade.Long, k, 1, qt, 0, e.now())
		if ref != nil {
			return 0, false
		}
		return pl.MarginToFree, true
	}
	limit := min(s.Staked, pos.Contracts, m.Params.MaxOrderContracts)
	if limit < 1 {
		return 0, 0, 0, 0
	}
	lo, hi := int64(1), limit
	if f, ok := freed(limit); !ok || f+carry(limit) < need {
		lo = limit
	} else {
		for lo < hi {
			mid := lo + (hi-lo)/2
			if f, ok := freed(mid); ok && f+carry(mid) >= need {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
	}
	if lo < m.Params.MinOrderContracts {
		if limit < m.Params.MinOrderContracts {
			return 0, 0, 0, 0
		}
		lo = m.Params.MinOrderContracts
	}
	got, ok = freed(lo)
	if !ok {
		return 0, 0, 0, 0
	}
	s.hedgeOrder(e, "buy", lo, true)
	if bal := e.T.Ledger.Balance(ledger.Free(HedgeAccount)); bal != got {
		panic(fmt.Sprintf("usdx: markdown freed %d msat, planned %d", bal, got))
	}
	s.Staked -= lo
	s.Supply -= lo
	carried = carry(lo)
	if e.T.Level >= LevelHoleLeavesWithContracts {
		carriedHole = holeShare(satAdd(pos.MarginMsat, need), s.UncoveredShortfallMsat, lo, pos.Contracts)
	}
	return lo, got, carried, carriedHole
}
