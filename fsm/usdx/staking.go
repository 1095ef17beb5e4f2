package usdx

import (
	"math"
	"math/big"
	"net/http"
	"sort"
	"strconv"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// StakeResult is the answer of POST /v1/usdx/stake.
type StakeResult struct {
	Usdx         string   `json:"usdx" doc:"USDx moved into the staking pool"`
	Susdx        string   `json:"susdx" doc:"sUSDx received: floor(usdx x 1e9 / sharePriceQ9)"`
	SharePriceQ9 wire.Int `json:"sharePriceQ9" unit:"q9" doc:"the share price served: USDx per sUSDx, rounded down"`
}

// Stake moves q USDx of accountID into the pool for sUSDx at the served
// share price: shares = floor(q x 1e9 / sharePriceQ9) (SPEC), so a staker
// never gets more than the pool's value. Refused during a mint halt.
//
// id is the client's idempotency key made the account's own (""
// without one): from LevelKeyedStakesOnce the stake's activity record
// carries it, and a stake under an id the account's activity holds is
// refused rather than made again.
func (s *State) Stake(e *Env, accountID, id string, q int64) (StakeResult, *wire.Refusal) {
	if e.T.Level < LevelKeyedStakesOnce {
		id = ""
	} else if a, ok := s.keyedActivity(accountID, "stake", id); ok {
		// Not compared by amount: a stake may take less than asked
		// (LevelStakeAtCost), and a changed body under a key the store
		// still held was refused before it came here.
		return StakeResult{}, appliedAgain("stake", a, true)
	}
	if !s.Params.Features.Stake {
		return StakeResult{}, wire.Refuse(http.StatusForbidden, wire.CodeFeatureUnavailable, "staking is switched off")
	}
	if ref := s.mintHaltRefusal(e); ref != nil {
		return StakeResult{}, ref
	}
	if q < 1 {
		return StakeResult{}, conflict(wire.CodeUSDxDust, "dust", "the smallest stake is 1 USDx")
	}
	if h := s.Holder(accountID); h.Usdx < q {
		return StakeResult{}, bad(wire.CodeInsufficientBalance, "holding %d USDx, cannot stake %d", h.Usdx, q)
	}
	if e.T.Level >= LevelEscrowInPrice && s.YieldEscrowMsat > 0 && (!e.oracleFresh() || e.T.Market.PrintHeld(HedgeMarket)) {
		// The escrow is priced at the print: a stale or unconfirmed one
		// would sell its part at a price the stake can pick.
		return StakeResult{}, conflict(wire.CodeUSDxOracleStale, "oracle_stale", "the BTC oracle is stale; stakes wait for a fresh price to value the yield escrow")
	}
	pool := s.poolUsdx(e)
	price := SharePriceQ9(pool, s.SusdxSupply)
	if price <= 0 {
		return StakeResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "the staking pool was marked down to nothing; it takes no stakes until its last shares leave")
	}
	// The pool is worth its accrued yield too (LevelStakePaysAccrual),
	// and the escrow's value below a whole USDx (LevelEscrowExactInPrice).
	accrued := satAdd(s.accruedYieldQ9(e), s.escrowFracQ9(e))
	if accrued > 0 {
		price = priceWithAccrual(pool, accrued, s.SusdxSupply)
	}
	if e.T.Level >= LevelStakeSharePriceFloor && price < MinStakeSharePriceQ9 {
		// SPEC's shares divide by the served price, rounded down: near
		// zero its rounding is a large part of it, and the shares it
		// over-issues take the holders' remaining pool.
		return StakeResult{}, conflict(wire.CodeConflict, "share_price_floor",
			"the staking pool was marked down to a share price of %d q9, below %d: it takes no stakes until yield raises the price or its last shares leave",
			price, MinStakeSharePriceQ9)
	}
	shares := mulDivFloor(q, Q9, price)
	if shares < 1 {
		return StakeResult{}, conflict(wire.CodeUSDxDust, "dust", "%d USDx buys no sUSDx at share price %d", q, price)
	}
	if e.T.Level >= LevelStakeAtCost && s.SusdxSupply > 0 {
		// Only what the shares are worth, rounded up, joins the pool;
		// the remainder of q stays with the staker.
		if accrued > 0 {
			q = min(q, costWithAccrual(shares, pool, accrued, s.SusdxSupply))
		} else {
			q = min(q, mulDivCeil(shares, pool, s.SusdxSupply))
		}
	}
	if e.T.Level >= LevelStakePaysAccrual && s.SusdxSupply == 0 {
		// The pool opens now: the interval's yield before now is not
		// the stakers' (positive).
		s.PoolOpenedTsMs = e.now()
	}
	h := s.holder(accountID)
	h.Usdx -= q
	h.Susdx += shares
	s.Staked += q
	s.SusdxSupply += shares
	s.activity(e, accountID, Activity{Event: "stake", Ref: id, Usdx: q, Susdx: shares})
	return StakeResult{Usdx: strconv.FormatInt(q, 10), Susdx: strconv.FormatInt(shares, 10), SharePriceQ9: wire.Int(price)}, nil
}

// LevelKeyedStakesOnce is the feature level (fsm.FeatureLevel) from which
// a stake or unstake sent with an idempotency key is made once per key
// for as long as the account's activity (ActivityKept records) or kept
// unstakes name it, not only while the idempotency store holds its
// answer. Stakes and unstakes had no id of their own, and the bounded
// store can forget an answer before its 24 hours (past its record bound,
// under a flood spread over many accounts, the largest tenant's oldest
// records go entirely): the retry then staked or unstaked the holder's
// funds a second time. Found by a review on 2026-11-28.
const LevelKeyedStakesOnce uint32 = 8

// keyedActivity finds accountID's latest activity of kind event under
// id (never for an empty id).
func (s *State) keyedActivity(accountID, event, id string) (Activity, bool) {
	h := s.Holders[accountID]
	if id == "" || h == nil {
		return Activity{}, false
	}
	for i := len(h.Activity) - 1; i >= 0; i-- {
		if a := h.Activity[i]; a.Ref == id && a.Event == event {
			return a, true
		}
	}
	return Activity{}, false
}

// appliedAgain refuses a keyed stake or unstake already made under its
// key: 409 conflict when the request is the same (the store forgot its
// answer; applying it again would move the funds twice), 409
// idempotency_key_reused when it differs.
func appliedAgain(what string, a Activity, same bool) *wire.Refusal {
	if !same {
		return wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused, "idempotency-key was already used for another %s", what)
	}
	return wire.Refuse(http.StatusConflict, wire.CodeConflict,
		"this idempotency-key's %s was applied (activity seq %d); its stored answer is gone, and it is not applied again: read GET /v1/usdx/activity", what, a.Seq)
}

// LevelStakeAtCost is the feature level (fsm.FeatureLevel) from which a
// stake takes only what its shares are worth, ceil(shares x staked /
// supply) USDx (at most the amount asked), and leaves the rest with the
// staker. Below it the whole amount joined the pool, so the remainder
// below one share's price went to the holders already in it: a review of
// 2026-11-27 raised the price of the only share to 76 USDx in five
// stake/unstake cycles, and a later stake of 151 USDx bought one share
// and lost 37 USDx to that holder (the "inflation" attack on share
// vaults).
const LevelStakeAtCost uint32 = 4

// LevelStakeSharePriceFloor is the feature level (fsm.FeatureLevel) from
// which a stake is refused (409 conflict, reason share_price_floor) while
// the share price it would be served is below MinStakeSharePriceQ9. SPEC's
// shares are floor(usdx x 1e9 / served price) and the served price is
// rounded down to a whole q9, so the shares are worth up to usdx / price
// USDx more than the stake pays (LevelStakeAtCost caps the payment at the
// amount asked): nothing at a price near 1e9, but near zero the gift is a
// large part of the stake, taken from the holders who bore the markdowns,
// up to all they have left. Found by a review on 2026-11-28: with 1,000
// USDx staked against 666,666,666,667 sUSDx (price 1.5 q9, served 1), a
// stake of 1,000 USDx bought 1e12 sUSDx and was released with 1,199 USDx
// (TestStakeRefusedBelowTheSharePriceFloor). And shares issued at such a
// price make the next markdown's price coarser still.
const LevelStakeSharePriceFloor uint32 = 8

// MinStakeSharePriceQ9 is the lowest served share price a stake is taken
// at (LevelStakeSharePriceFloor): 0.01 USDx per sUSDx, a pool marked down
// to 1% of a share's issue price. At or above it the price's rounding
// gives a stake less than usdx x 1e-7 USDx (under one USDx at the default
// hard cap of 10,000,000), and a stake issues at most 100 sUSDx per
// USDx, so the sUSDx supply stays far inside int64.
const MinStakeSharePriceQ9 int64 = 10_000_000

// LevelEscrowInPrice is the feature level (fsm.FeatureLevel) from which
// the yield escrow belongs to the shares: the stakers' sats that the hard
// cap or the open-interest limits keep from being minted. A stake pays for
// its part of them at the mark, and a release takes its part in kind (its
// fraction of the staked USDx, and of the escrow in sats to its free
// balance), so the order in which stakers leave changes nothing and the
// last one takes the escrow with it. Below it the price was the staked
// USDx alone: a staker who joined while the escrow was full took a full
// share of it when it was minted (68 of 136 USDx after one hour in the
// pool, against a staker of 25 hours, in a review of 2026-11-27), and one
// who left before forfeited his.
const LevelEscrowInPrice uint32 = 5

// poolUsdx is what the staking pool is worth in USDx when a stake is
// priced: the staked USDx and, from LevelEscrowInPrice, the yield escrow
// at the hedge market's last print, rounded down (none while it has
// none). Rounding down gives the staker less than one USDx of the whole
// pool; rounding up would count a single msat of escrow as a USDx and
// revive a pool written down to nothing. The escrow is valued at the mark,
// not at what minting it costs (the hedge's taker fee on top): a few basis
// points of it, which the stake pays the stakers already in.
func (s *State) poolUsdx(e *Env) int64 {
	if e.T.Level < LevelEscrowInPrice || s.YieldEscrowMsat <= 0 {
		return s.Staked
	}
	_, pr, ok := e.hedgeMarket()
	if !ok || pr.MidQ8 <= 0 {
		return s.Staked
	}
	return satAdd(s.Staked, usdOfMsatFloor(s.YieldEscrowMsat, pr.MidQ8))
}

// ServedSharePriceQ9 is the share price a stake is served now (SPEC's
// staking.sharePriceQ9): from LevelStakePaysAccrual it counts the yield
// accrued since the last boundary (accruedYieldQ9), from
// LevelEscrowExactInPrice the escrow's value below a whole USDx.
func (s *State) ServedSharePriceQ9(e *Env) int64 {
	pool := s.poolUsdx(e)
	if accrued := satAdd(s.accruedYieldQ9(e), s.escrowFracQ9(e)); accrued > 0 {
		return priceWithAccrual(pool, accrued, s.SusdxSupply)
	}
	return SharePriceQ9(pool, s.SusdxSupply)
}

// poolSharePriceQ9 is the share price of what the pool holds (from
// LevelEscrowExactInPrice the escrow at its exact value), without the
// accrued yield: the waterfall records it before and after a
// boundary, when the accrual starts again from nothing.
func (s *State) poolSharePriceQ9(e *Env) int64 {
	pool := s.poolUsdx(e)
	if frac := s.escrowFracQ9(e); frac > 0 {
		return priceWithAccrual(pool, frac, s.SusdxSupply)
	}
	return SharePriceQ9(pool, s.SusdxSupply)
}

// LevelEscrowExactInPrice is the feature level (fsm.FeatureLevel) from
// which a stake pays for the yield escrow's value exactly, in USDx x 1e9
// (escrowFracQ9), not rounded down to whole USDx (poolUsdx). Below it the
// part of the escrow worth less than one USDx was priced at nothing, so a
// stake took its share of it free and left with it in kind at release:
// right after a markdown (whose surplus, from
// LevelMarkdownSurplusToStakers, waits in the escrow) a stake of 10,000
// USDx into a pool of 10 staked USDx, 11 sUSDx and 998,299 msat of escrow
// released 10,000 USDx and 997,301 msat, and the 11 sUSDx kept 998 msat of
// their escrow (found by a review on 2026-11-28,
// TestStakePaysForTheEscrowBelowOneUSDx).
const LevelEscrowExactInPrice uint32 = 8

// escrowFracQ9 is the yield escrow's value at the hedge market's last
// print beyond the whole USDx poolUsdx counts, in USDx x 1e9, rounded
// down (so poolUsdx x 1e9 + escrowFracQ9 is the pool's exact value): 0
// below LevelEscrowExactInPrice, without shares (nothing to price), an
// escrow or a print.
func (s *State) escrowFracQ9(e *Env) int64 {
	if e.T.Level < LevelEscrowExactInPrice || s.SusdxSupply <= 0 || s.YieldEscrowMsat <= 0 {
		return 0
	}
	_, pr, ok := e.hedgeMarket()
	if !ok || pr.MidQ8 <= 0 {
		return 0
	}
	r := new(big.Int).Mul(big.NewInt(s.YieldEscrowMsat), big.NewInt(pr.MidQ8))
	r.Mul(r, big.NewInt(Q9))
	r.Quo(r, bigInverse)
	return r.Mod(r, big.NewInt(Q9)).Int64()
}

// LevelStakePaysAccrual is the feature level (fsm.FeatureLevel) from
// which a stake pays for the yield the pool has accrued since the last
// funding boundary of the hedge market: the stakers' expected part of the
// hedge's next payment at the current rate (accruedYieldQ9), for the
// fraction of the interval already passed. Found by a review on
// 2026-11-28: the boundary pays its whole hour of funding to the shares
// present at it, so a stake made 3 s before a positive boundary and
// unstaked at once (released an hour later, before the next boundary)
// took a full share of that hour's yield with no exposure but to a
// boundary whose rate it had seen: 3 USDx and 495,238 msat for 50,000
// USDx, half of what the staker who had held through the hour got
// (TestJustInTimeStakePaysTheAccruedYield). Repeated at every positive
// boundary and skipped before negative ones, it took the yield of the
// junior tranche without its markdowns.
const LevelStakePaysAccrual uint32 = 8

// accruedYieldQ9 is the yield the staking pool has accrued since the hedge
// market's last boundary, in USDx x 1e9, rounded down: the stakers' part
// of the hedge's payment at the next boundary if the rate stayed as it is
// (the hedge's value at the last print x the current rate, less what the
// uncovered shortfall and the reserve's gap to its target would take
// first, as the waterfall does), times the part of the interval passed
// (since the pool opened, if it opened during it: PoolOpenedTsMs).
// 0 below LevelStakePaysAccrual, without shares, a print or a hedge, and
// when the rate would not pay the hedge (a payment due from it is not
// credited: the staker who joins before it takes its part of a markdown).
func (s *State) accruedYieldQ9(e *Env) int64 {
	if e.T.Level < LevelStakePaysAccrual || s.SusdxSupply <= 0 {
		return 0
	}
	m, pr, ok := e.hedgeMarket()
	n := e.hedge().Contracts
	if !ok || pr.MidQ8 <= 0 || n <= 0 || m.NextFundingTsMs <= 0 {
		return 0
	}
	rate := m.FundingRateHourlyQ9() // > 0: longs pay, the hedge's short receives
	if rate <= 0 {
		return 0
	}
	flow := mulDivFloor(ValueMsat(n, pr.MidQ8), rate, Q9)
	flow -= min(flow, s.UncoveredShortfallMsat)
	if target, _, ok := s.ReserveBounds(pr.MidQ8); ok {
		flow -= min(flow, max(target-s.ReserveMsat, 0))
	}
	// The stakers' part runs from the interval's start, or from when the
	// pool opened if later (positive).
	start := max(m.NextFundingTsMs-market.FundingIntervalMs, s.PoolOpenedTsMs)
	elapsed := min(max(e.now()-start, 0), market.FundingIntervalMs)
	if flow <= 0 || elapsed <= 0 {
		return 0
	}
	// flow x elapsed/interval msat at the print, in USDx x 1e9:
	// flow x elapsed x mark x 1e9 / (interval x 1e19).
	r := new(big.Int).Mul(big.NewInt(flow), big.NewInt(elapsed))
	r.Mul(r, big.NewInt(pr.MidQ8))
	r.Mul(r, big.NewInt(Q9))
	r.Quo(r, new(big.Int).Mul(big.NewInt(market.FundingIntervalMs), bigInverse))
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}

// priceWithAccrual is floor((pool x 1e9 + accruedQ9) / supply): the share
// price of the pool with its accrued yield (supply > 0).
func priceWithAccrual(pool, accruedQ9, supply int64) int64 {
	r := new(big.Int).Mul(big.NewInt(pool), big.NewInt(Q9))
	r.Add(r, big.NewInt(accruedQ9))
	r.Quo(r, big.NewInt(supply))
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}

// costWithAccrual is what shares are worth in USDx with the accrued
// yield, rounded up: ceil(shares x (pool x 1e9 + accruedQ9) / (supply x 1e9)).
func costWithAccrual(shares, pool, accruedQ9, supply int64) int64 {
	r := new(big.Int).Mul(big.NewInt(pool), big.NewInt(Q9))
	r.Add(r, big.NewInt(accruedQ9))
	r.Mul(r, big.NewInt(shares))
	d := new(big.Int).Mul(big.NewInt(supply), big.NewInt(Q9))
	r.Add(r, d).Sub(r, big.NewInt(1)).Quo(r, d)
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}

// Unstake starts the cooldown of shares sUSDx of accountID. Always
// allowed, also in every halt; the shares stay in the pool (they take its
// yield and its markdowns) until released at the share price then.
//
// id is the client's idempotency key made the account's own (""
// without one): from LevelKeyedStakesOnce it is the unstake's id, and an
// unstake under an id the account already used answers that unstake (or
// is refused once it left the kept list) rather than being made again.
func (s *State) Unstake(e *Env, accountID, id string, shares int64) (UnstakeView, *wire.Refusal) {
	if e.T.Level < LevelKeyedStakesOnce {
		id = ""
	} else if id != "" {
		if h := s.Holders[accountID]; h != nil {
			for _, u := range h.Unstakes {
				if u.ID == id {
					if u.Susdx != shares {
						return UnstakeView{}, wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused, "unstake id %q was used for another unstake", id)
					}
					return NewUnstakeView(u), nil
				}
			}
		}
		if a, ok := s.keyedActivity(accountID, "unstake", id); ok {
			return UnstakeView{}, appliedAgain("unstake", a, a.Susdx == shares)
		}
	}
	if shares < 1 {
		return UnstakeView{}, bad(wire.CodeValidation, "susdx must be at least 1")
	}
	h := s.Holder(accountID)
	if h.Susdx < shares {
		return UnstakeView{}, bad(wire.CodeInsufficientBalance, "holding %d sUSDx, cannot unstake %d", h.Susdx, shares)
	}
	cooling := 0
	for _, u := range h.Unstakes {
		if !u.Released {
			cooling++
		}
	}
	if cooling >= CoolingPerAccountMax {
		return UnstakeView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "at most %d unstakes cooling per account", CoolingPerAccountMax)
	}
	s.NextUnstake++
	if id == "" {
		id = "uns_" + strconv.FormatUint(s.NextUnstake, 10)
	}
	u := &Unstake{ID: id, Susdx: shares,
		ReleaseAtMs: e.now() + s.Params.UnstakeCooldownMs, RequestedMs: e.now()}
	hh := s.holder(accountID)
	hh.Susdx -= shares
	hh.Unstakes = append(hh.Unstakes, u)
	ref := CoolRef{ReleaseAtMs: u.ReleaseAtMs, AccountID: accountID, UnstakeID: u.ID}
	i := sort.Search(len(s.Cooling), func(i int) bool { return !coolLess(s.Cooling[i], ref) })
	s.Cooling = append(s.Cooling, CoolRef{})
	copy(s.Cooling[i+1:], s.Cooling[i:])
	s.Cooling[i] = ref
	s.activity(e, accountID, Activity{Event: "unstake", Ref: u.ID, Susdx: shares, State: "cooling"})
	return NewUnstakeView(u), nil
}

func coolLess(a, b CoolRef) bool {
	if a.ReleaseAtMs != b.ReleaseAtMs {
		return a.ReleaseAtMs < b.ReleaseAtMs
	}
	if a.AccountID != b.AccountID {
		return a.AccountID < b.AccountID
	}
	return a.UnstakeID < b.UnstakeID
}

// OnTime releases the unstakes whose cooldown ended, at the share price at
// release: usdx = floor(shares x staked / sUSDx supply) (the remainder
// stays with the stakers who stay), and drops quotes QuoteGraceMs after
// they expired (until then a mint on one is told usdx_quote_expired).
func (s *State) OnTime(e *Env) {
	now := e.now()
	s.releaseCooled(e, now)
	for len(s.QuoteOrder) > 0 {
		qu, ok := s.Quotes[s.QuoteOrder[0]]
		if ok && qu.ExpiresAtMs+QuoteGraceMs > now {
			break
		}
		if ok {
			s.dropQuote(qu)
		}
		s.QuoteOrder = s.QuoteOrder[1:]
	}
	if len(s.QuoteOrder) == 0 {
		s.QuoteOrder = nil
	}
}

// releaseCooled releases, in (release time, account, unstake) order, the
// unstakes whose cooldown ended at or before throughMs.
func (s *State) releaseCooled(e *Env, throughMs int64) {
	for len(s.Cooling) > 0 && s.Cooling[0].ReleaseAtMs <= throughMs {
		ref := s.Cooling[0]
		s.Cooling = s.Cooling[1:]
		h := s.holder(ref.AccountID)
		for _, u := range h.Unstakes {
			if u.ID != ref.UnstakeID || u.Released {
				continue
			}
			usdx, sats := int64(0), int64(0)
			if s.SusdxSupply > 0 {
				usdx = mulDivFloor(u.Susdx, s.Staked, s.SusdxSupply)
				if e.T.Level >= LevelEscrowInPrice {
					// Its part of the escrow, in kind: no price to pick.
					sats = mulDivFloor(u.Susdx, s.YieldEscrowMsat, s.SusdxSupply)
					s.move(e, YieldEscrow, ledger.Free(ref.AccountID), sats)
					s.YieldEscrowMsat -= sats
				}
			}
			s.Staked -= usdx
			s.SusdxSupply -= u.Susdx
			h.Usdx += usdx
			u.Released, u.ReleasedUsdx, u.ReleasedMsat, u.InKind = true, usdx, sats, e.T.Level >= LevelEscrowInPrice
			s.activity(e, ref.AccountID, Activity{Event: "unstake_release", Ref: u.ID, Usdx: usdx, Susdx: u.Susdx, SatsMsat: sats, State: "released"})
		}
		s.trimUnstakes(h)
	}
	if len(s.Cooling) == 0 {
		s.Cooling = nil
	}
}

// trimUnstakes keeps the cooling unstakes and the newest UnstakesKept
// released ones.
func (s *State) trimUnstakes(h *Holder) {
	released := 0
	for _, u := range h.Unstakes {
		if u.Released {
			released++
		}
	}
	if released <= UnstakesKept {
		return
	}
	drop := released - UnstakesKept
	kept := h.Unstakes[:0]
	for _, u := range h.Unstakes {
		if u.Released && drop > 0 {
			drop--
			continue
		}
		kept = append(kept, u)
	}
	h.Unstakes = kept
}

// LevelReleaseBeforeBoundary is the feature level (fsm.FeatureLevel) from
// which a funding boundary of the hedge market first releases the unstakes
// whose cooldown ended before it, so they leave the pool at the share
// price before its waterfall. Below it the timers ran by domain (the
// boundary's waterfall first, then the releases), so when one entry's
// time passed both, an unstake due before the boundary took a share of its
// yield or markdown; with an entry between the two it did not (a review of
// 2026-11-27: 50,000 sUSDx released 50,000 USDx or 50,004 USDx by the
// tick schedule alone).
const LevelReleaseBeforeBoundary uint32 = 8
