package usdx

import (
	"fmt"
	"math"
	"math/big"
	"net/http"
	"slices"
	"strconv"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Env is what USDx needs for one entry: the trading book (the hedge is a
// position in it) and the trading environment (ledger, markets, time, seq
// space, events).
type Env struct {
	Trade *trade.State
	T     *trade.Env
}

func (e *Env) now() int64 { return e.T.NowMs }

// Refusal helpers. SPEC section 7 gives 409 to capacity, stale oracle,
// halt and dust refusals of quotes, and to usdx_requote; the other usdx
// refusals follow it (decisions.md).
func conflict(code, reason, format string, args ...any) *wire.Refusal {
	r := wire.Refuse(http.StatusConflict, code, format, args...)
	r.Extra = map[string]any{"reason": reason}
	return r
}

func bad(code, format string, args ...any) *wire.Refusal {
	return wire.Refuse(http.StatusBadRequest, code, format, args...)
}

// hedgeMarket returns the hedge's market and its last print.
func (e *Env) hedgeMarket() (*market.MarketState, market.Print, bool) {
	m, ok := e.T.Market.MarketsByID[HedgeMarket]
	if !ok {
		return nil, market.Print{}, false
	}
	pr, ok := e.T.Market.LastPrint(HedgeMarket)
	return m, pr, ok
}

func (e *Env) oracleFresh() bool {
	_, _, ok := e.hedgeMarket()
	if !ok || e.T.Market.IsStale(HedgeMarket, e.now()) {
		return false
	}
	return e.T.Level < LevelHeldPrintIsStale || !e.T.Market.PrintHeld(HedgeMarket)
}

// LevelHeldPrintIsStale is the feature level (fsm.FeatureLevel) from which
// the hedge market's price counts as stale while its feed holds a print
// that jumped past market.PrintJumpFactor, as order entry treats it
// (fsm.LevelHeldPrintStopsOrders): a mint or a redemption is refused or
// queued (oracle_stale), the hedge does not trade and the waterfall mints
// no yield until the next print confirms or drops the held one. Below it
// a mint or a redemption meanwhile was priced at the print from before a
// real jump, a dollar value wrong by half or more, for one print
// interval.
const LevelHeldPrintIsStale uint32 = 8

// LevelHedgeHalts is the feature level (fsm.FeatureLevel) from which the
// hedge trades for redemptions and yield mints only when traders could:
// a redemption is queued (queuedReason market_halted) while the hedge
// market is halted, as it is while the oracle is stale, and the waterfall
// mints no yield then or on a stale print (the escrow keeps it). Below it
// a review of 2026-11-27 redeemed 10,000 USDx at the price of a halted
// market, and a yield mint sold hedge contracts in a halted market and on
// a stale print, while every trader's order was refused.
const LevelHedgeHalts uint32 = 4

// hedgeHalted reports whether the hedge market is halted, from
// LevelHedgeHalts (below it a halt did not stop the hedge).
func (e *Env) hedgeHalted() bool {
	m, _, ok := e.hedgeMarket()
	return ok && e.T.Level >= LevelHedgeHalts && m.Params.Status == market.StatusHalted
}

func (e *Env) hedge() trade.Position { return e.Trade.Position(HedgeAccount, HedgeMarket) }

// LevelHedgeNeedsRoom is the feature level (fsm.FeatureLevel) from which
// a mint that would open the hedge's position (the hedge is flat) is
// refused while the hedge market takes no new position (its liquidation
// index is full, trade.State.PositionRoom). Below it the quote and the
// mint were priced without asking, the mint moved the sats and the
// hedge's order was then refused: a broken invariant that halted every
// replica on a client's mint (found by a review on 2026-11-27).
const LevelHedgeNeedsRoom uint32 = 8

// priced is a mint or redemption of usdx priced against the hedge market
// now. For a mint SatsMsat is what the trader pays (the hedge's margin at
// leverage 1 and its taker fee, plus the base and dynamic fees); for a
// redemption what the trader receives (what closing the contracts frees,
// less the base fee).
type priced struct {
	qt                                 trade.Quote
	plan                               trade.Plan
	baseFee, dynFee, sats, hedgeOutlay int64
}

// price plans a mint (side "mint") or redemption of q USDx. Rounding: the
// hedge's figures are trade's (notional, margin and fee up; PnL down);
// base and dynamic fees are notional x rate / 1e9 rounded up.
func (s *State) price(e *Env, side string, q int64) (priced, *wire.Refusal) {
	m, pr, ok := e.hedgeMarket()
	if !ok {
		return priced{}, conflict(wire.CodeUSDxOracleStale, "oracle_stale", "the hedge market has no oracle print")
	}
	if q < m.Params.MinOrderContracts || q > m.Params.MaxOrderContracts {
		return priced{}, conflict(wire.CodeUSDxDust, "dust", "the hedge trades %d to %d contracts at a time", m.Params.MinOrderContracts, m.Params.MaxOrderContracts)
	}
	pos := e.hedge()
	var out priced
	var err error
	if side == SideMint {
		if e.T.Level >= LevelHedgeNeedsRoom && !e.Trade.PositionRoom(HedgeMarket, pos, trade.Short, q) {
			return priced{}, conflict(wire.CodeUSDxCapacity, "hedge_refused",
				"the hedge cannot open its position: market %s holds the most positions it can", HedgeMarket)
		}
		if out.qt, err = trade.QuoteTrade(m, pr, trade.Short, q); err != nil {
			return priced{}, bad(wire.CodeValidation, "mint cannot be priced: %v", err)
		}
		pl, ref := trade.PlanFillLeveraged(m, pos, trade.Short, q, 1, out.qt, math.MaxInt64/4, e.now())
		if ref != nil {
			return priced{}, conflict(wire.CodeUSDxCapacity, "hedge_refused", "the hedge cannot open %d contracts: %s", q, ref.Msg)
		}
		out.plan = pl
		out.hedgeOutlay = pl.OpenMarginMsat + pl.FeeMsat
		out.baseFee = mulDivCeil(pl.TradeNotionalMsat, s.Params.BaseFeeQ9, Q9)
		hc := max(s.Params.HardCap, 1)
		if e.T.Level >= LevelExactDynFee {
			out.dynFee = dynFeeCeil(pl.TradeNotionalMsat, s.Params.DynFeeCurve, s.Supply+q, hc)
		} else {
			u := mulDivFloor(s.Supply+q, Q9, hc)
			out.dynFee = mulDivCeil(pl.TradeNotionalMsat, DynFeeRateQ9(s.Params.DynFeeCurve, u), Q9)
		}
		out.sats = out.hedgeOutlay + out.baseFee + out.dynFee
		return out, nil
	}
	if q > pos.Contracts {
		return priced{}, conflict(wire.CodeUSDxCapacity, "hedge_short", "the hedge holds %d contracts, fewer than %d", pos.Contracts, q)
	}
	if out.qt, err = trade.QuoteTrade(m, pr, trade.Long, q); err != nil {
		return priced{}, bad(wire.CodeValidation, "redemption cannot be priced: %v", err)
	}
	pl, ref := trade.PlanFillLeveraged(m, pos, trade.Long, q, 1, out.qt, 0, e.now())
	if ref != nil {
		return priced{}, conflict(wire.CodeUSDxDust, "dust", "closing %d contracts frees too little to pay its fee", q)
	}
	out.plan = pl
	proceeds := pl.MarginToFree
	out.hedgeOutlay = proceeds
	out.baseFee = min(mulDivCeil(pl.TradeNotionalMsat, s.Params.BaseFeeQ9, Q9), proceeds)
	out.sats = proceeds - out.baseFee
	if out.sats <= 0 {
		return priced{}, conflict(wire.CodeUSDxDust, "dust", "a redemption of %d USDx would pay nothing", q)
	}
	return out, nil
}

// LevelExactDynFee is the feature level (fsm.FeatureLevel) from which the
// dynamic fee is the curve's exact rate x notional, rounded up once
// (dynFeeCeil). Below it the utilisation and then the interpolated rate
// were each rounded down to a whole q9 before the fee was rounded up, so
// the fee fell short by up to notional / 1e9 msat, in the minter's
// favour (found by a review on 2026-11-27).
const LevelExactDynFee uint32 = 8

// Sides of a quote or saga.
const (
	SideMint   = "mint"
	SideRedeem = "redeem"
)

// Capacity limits, in SPEC order.
var LimitNames = []string{"organic_oi", "hard_cap", "oi_cap", "skew", "velocity"}

// Capacity is how many more USDx may be minted now, per limit and overall.
type Capacity struct {
	Known    bool
	Per      map[string]int64
	Headroom int64
	Limit    string
}

// Capacity computes each limit's headroom (clamped at 0) and the binding
// one (the smallest; ties go to the earlier in LimitNames):
//
//	organic_oi: organicFloor + floor(organic OI x organicMultipleQ9 / 1e9) - hedge,
//	            organic OI being both sides' open interest less the hedge's
//	hard_cap:   hardCap - supply
//	oi_cap:     min(short OI cap - short OI, position limit - hedge)
//	skew:       the largest x with S+x-L <= max(skewFloor, maxSkewQ9 x (S+x+L) / 1e9):
//	            max(skewFloor - (S-L), floor((k(S+L) - 1e9(S-L)) / (1e9-k)))
//	velocity:   max(mintVelocityFloor, floor(supply x mintVelocityQ9PerH / 1e9)) - minted in the last hour
func (s *State) Capacity(e *Env) Capacity {
	m, ok := e.T.Market.MarketsByID[HedgeMarket]
	if !ok {
		return Capacity{}
	}
	p := &s.Params
	hedge := e.hedge().Contracts
	L, S := m.LongOIContracts, m.ShortOIContracts
	organic := L + S - hedge
	per := map[string]int64{}
	per["organic_oi"] = p.OrganicFloor + mulDivFloor(max(organic, 0), p.OrganicMultipleQ9, Q9) - hedge
	per["hard_cap"] = p.HardCap - s.Supply
	per["oi_cap"] = min(trade.OICapContracts(&m.Params)-S, trade.PositionLimitContracts(&m.Params)-hedge)
	skew := p.SkewFloor - (S - L)
	if p.MaxSkewQ9 >= Q9 {
		skew = math.MaxInt64
	} else {
		// k(S+L) - 1e9(S-L); OI is bounded by the market's caps (int64
		// products of at most 1e9 x 2 x OI cap), computed exactly.
		num := new(big.Int).Mul(big.NewInt(p.MaxSkewQ9), big.NewInt(L+S))
		num.Sub(num, new(big.Int).Mul(big.NewInt(Q9), big.NewInt(S-L)))
		if num.Sign() > 0 {
			num.Quo(num, big.NewInt(Q9-p.MaxSkewQ9))
			if !num.IsInt64() {
				num.SetInt64(math.MaxInt64)
			}
			skew = max(skew, num.Int64())
		}
	}
	per["skew"] = skew
	per["velocity"] = max(p.MintVelocityFloor, mulDivFloor(s.Supply, p.MintVelocityQ9PerH, Q9)) - s.mintedLastHour(e.T.Level, e.now())
	c := Capacity{Known: true, Per: per, Headroom: math.MaxInt64}
	for _, name := range LimitNames {
		per[name] = max(per[name], 0)
		if per[name] < c.Headroom {
			c.Headroom, c.Limit = per[name], name
		}
	}
	return c
}

// windowSums adds up the buckets of the rolling hour at nowMs: from
// LevelVelocityWholeHour every minute that ended less than an hour ago
// (so at least the last 60 minutes, at most 61: the rounding is the
// venue's), below it every minute that began less than an hour ago (the
// last 59 to 60 minutes).
func (s *State) windowSums(level uint32, nowMs int64) (minted, redeemed int64) {
	start := nowMs - VelocityWindowMs
	if level >= LevelVelocityWholeHour {
		start -= velocityBucketMs
	}
	for _, b := range s.Buckets {
		if b.MinuteMs > start {
			minted += b.Minted
			redeemed += b.Redeemed
		}
	}
	return minted, redeemed
}

func (s *State) mintedLastHour(level uint32, nowMs int64) int64 {
	m, _ := s.windowSums(level, nowMs)
	return m
}

// LevelVelocityWholeHour is the feature level (fsm.FeatureLevel) from
// which the velocity limit's rolling hour counts a minute bucket until the
// minute's end is an hour old. Below it a bucket left the count when its
// minute's start was an hour old, so a mint in the last second of a minute
// left it after 59 minutes and a second mint of the whole limit was taken
// 59 minutes after the first: twice mintVelocityQ9PerH within an hour
// (found by a review on 2026-11-29, TestVelocityCountsAWholeHour).
// record keeps 61 buckets, so the 61st was there to count already.
const LevelVelocityWholeHour uint32 = 9

// record adds a mint or redemption to its minute's bucket and drops
// buckets that left the hour (at most 61 are kept).
func (s *State) record(nowMs, minted, redeemed int64) {
	minute := nowMs - nowMs%velocityBucketMs
	kept := s.Buckets[:0]
	for _, b := range s.Buckets {
		if b.MinuteMs > nowMs-VelocityWindowMs-velocityBucketMs {
			kept = append(kept, b)
		}
	}
	s.Buckets = kept
	if n := len(s.Buckets); n > 0 && s.Buckets[n-1].MinuteMs == minute {
		s.Buckets[n-1].Minted += minted
		s.Buckets[n-1].Redeemed += redeemed
		return
	}
	s.Buckets = append(s.Buckets, Bucket{MinuteMs: minute, Minted: minted, Redeemed: redeemed})
}

// mintRefusal says why a user mint (or stake) is refused before pricing:
// a halt, the feature switch, or the market not live.
func (s *State) mintHaltRefusal(e *Env) *wire.Refusal {
	if s.Halt != nil {
		return conflict(wire.CodeUSDxMintsHalted, s.Halt.Reason, "USDx mints are halted: %s", s.Halt.Reason)
	}
	if m, ok := e.T.Market.MarketsByID[HedgeMarket]; ok && m.Params.Status != market.StatusLive {
		return conflict(wire.CodeUSDxMintsHalted, "market_"+string(m.Params.Status), "the hedge market is %s", m.Params.Status)
	}
	if e.T.Level >= LevelShortfallHaltsMints && s.UncoveredShortfallMsat > 0 {
		return conflict(wire.CodeUSDxMintsHalted, "uncovered_shortfall",
			"the hedge's margin is %d msat short of the supply's backing until funding repays it; a new mint would share the hole", s.UncoveredShortfallMsat)
	}
	return nil
}

// LevelShortfallHaltsMints is the feature level (fsm.FeatureLevel) from
// which an uncovered shortfall halts mints and stakes, as an operator's
// halt does, until positive funding has repaid it (LevelRepayShortfall):
// a redemption shares the hole pro rata, so a minter paying full margin
// into it would lose part of that margin at once. Redemptions go on. Below
// it mints went on during the hole (docs/decisions.md, the funding
// waterfall).
const LevelShortfallHaltsMints uint32 = 5

// checkMint is every refusal of a mint of q USDx before pricing.
func (s *State) checkMint(e *Env, q int64) *wire.Refusal {
	if !s.Params.Features.Mint {
		return wire.Refuse(http.StatusForbidden, wire.CodeFeatureUnavailable, "USDx mints are switched off")
	}
	if q < 1 {
		return conflict(wire.CodeUSDxDust, "dust", "the smallest mint is 1 USDx")
	}
	if ref := s.mintHaltRefusal(e); ref != nil {
		return ref
	}
	if !e.oracleFresh() {
		return conflict(wire.CodeUSDxOracleStale, "oracle_stale", "the BTC oracle is stale; mints wait for a fresh price")
	}
	if m := e.T.Market.MarketsByID[HedgeMarket]; q > m.Params.MaxOrderContracts {
		return bad(wire.CodeValidation, "at most %d USDx per mint", m.Params.MaxOrderContracts)
	}
	c := s.Capacity(e)
	if q > c.Headroom {
		r := conflict(wire.CodeUSDxCapacity, "capacity", "minting %d USDx exceeds the headroom of %d (limit %s)", q, c.Headroom, c.Limit)
		r.Extra["headroom"] = strconv.FormatInt(c.Headroom, 10)
		r.Extra["limit"] = c.Limit
		return r
	}
	return nil
}

// NewQuote prices and stores a quote for accountID under id (drawn by the
// proposing node).
func (s *State) NewQuote(e *Env, accountID, id, side string, q int64) (QuoteView, *wire.Refusal) {
	if id == "" || len(id) > 64 {
		return QuoteView{}, bad(wire.CodeValidation, "quote id must be 1..64 characters")
	}
	if _, taken := s.Quotes[id]; taken {
		return QuoteView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "quote id %q is taken", id)
	}
	if _, taken := s.Sagas[id]; taken {
		return QuoteView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "quote id %q is taken", id)
	}
	switch side {
	case SideMint:
		if ref := s.checkMint(e, q); ref != nil {
			return QuoteView{}, ref
		}
	case SideRedeem:
		if !s.Params.Features.Redeem {
			return QuoteView{}, wire.Refuse(http.StatusForbidden, wire.CodeFeatureUnavailable, "USDx redemptions are switched off")
		}
		if q < 1 {
			return QuoteView{}, conflict(wire.CodeUSDxDust, "dust", "the smallest redemption is 1 USDx")
		}
		if !e.oracleFresh() {
			return QuoteView{}, conflict(wire.CodeUSDxOracleStale, "oracle_stale", "the BTC oracle is stale; a redemption now is queued until a fresh price")
		}
	default:
		return QuoteView{}, bad(wire.CodeValidation, "side %q is not mint or redeem", side)
	}
	pz, ref := s.price(e, side, q)
	if ref != nil {
		return QuoteView{}, ref
	}
	qu := s.storeQuote(e, accountID, id, side, q, pz)
	return NewQuoteView(qu), nil
}

func (s *State) storeQuote(e *Env, accountID, id, side string, q int64, pz priced) *Quote {
	qu := &Quote{ID: id, AccountID: accountID, Side: side, Usdx: q, PriceQ8: pz.qt.ExecQ8, SpreadQ9: pz.qt.SpreadQ9,
		FeeMsat: pz.baseFee, DynFeeMsat: pz.dynFee, ImpactMsat: pz.plan.ImpactMsat, SatsMsat: pz.sats,
		ExpiresAtMs: e.now() + s.Params.QuoteTTLMs, OracleTsMs: pz.qt.OracleTsMs, CreatedTsMs: e.now()}
	// feeMsat is the base fee plus the hedge's taker fee.
	qu.FeeMsat += pz.plan.FeeMsat
	s.Quotes[id] = qu
	s.QuoteOrder = append(s.QuoteOrder, id)
	h := s.holder(accountID)
	h.Quotes = append(h.Quotes, id)
	for len(h.Quotes) > QuotesPerAccountMax {
		if e.T.Level >= LevelQuotesKeepOpenMints {
			i := s.quoteToDrop(h.Quotes, e.now())
			delete(s.Quotes, h.Quotes[i])
			h.Quotes = slices.Delete(h.Quotes, i, i+1)
			continue
		}
		delete(s.Quotes, h.Quotes[0])
		h.Quotes = h.Quotes[1:]
	}
	if e.T.Level >= LevelQuoteOrderBounded && len(s.QuoteOrder) > 2*len(s.Quotes)+QuotesPerAccountMax {
		// Ids of quotes dropped early (the account's bound, a mint, a
		// requote) leave the expiry order too, so it stays within twice
		// the open quotes (amortised: one pass per that many quotes).
		kept := s.QuoteOrder[:0]
		for _, id := range s.QuoteOrder {
			if _, ok := s.Quotes[id]; ok {
				kept = append(kept, id)
			}
		}
		clear(s.QuoteOrder[len(kept):])
		s.QuoteOrder = kept
	}
	return qu
}

// LevelQuotesKeepOpenMints is the feature level (fsm.FeatureLevel) from
// which an account past QuotesPerAccountMax quotes loses its oldest
// expired quote first, then its oldest redeem quote, and an open mint
// quote only when all it holds are open mint quotes. Below it the oldest
// went whatever it was, so a client quoting redemptions (a redeem quote
// only shows a price: a redemption takes none) lost an open mint quote
// well inside its validity (a black-box audit, 2026-11-29: one mint
// quote, then 20 redeem quotes, then the mint answered 404).
const LevelQuotesKeepOpenMints uint32 = 11

// quoteToDrop is the index in ids (an account's quotes, oldest first, the
// one just stored last) of the quote that goes when the account holds too
// many: the oldest expired one, else the oldest earlier redeem quote, else
// the oldest. The quote just stored is never the one: its 201 names it.
func (s *State) quoteToDrop(ids []string, now int64) int {
	redeem := -1
	for i, id := range ids[:len(ids)-1] {
		qu, ok := s.Quotes[id]
		if !ok || now >= qu.ExpiresAtMs {
			return i
		}
		if redeem < 0 && qu.Side != SideMint {
			redeem = i
		}
	}
	return max(redeem, 0)
}

// LevelQuoteOrderBounded is the feature level (fsm.FeatureLevel) from
// which the quotes' expiry order (State.QuoteOrder) drops the ids of
// quotes already gone. Below it the expiry timer dropped them only from
// the head of the order, so behind one open quote (any account's) every
// later id stayed until that quote's expiry and grace had passed
// (QuoteGraceMs after quoteTtlMs, 10.5 minutes), whether or not its own
// quote still existed: the bound of QuotesPerAccountMax open quotes did
// not bound it, and one account quoting at its read budget (3,000 a
// minute) kept 31,500 ids in the state (found by a review on 2026-11-27).
const LevelQuoteOrderBounded uint32 = 8

func (s *State) dropQuote(qu *Quote) {
	delete(s.Quotes, qu.ID)
	if h, ok := s.Holders[qu.AccountID]; ok {
		for i, id := range h.Quotes {
			if id == qu.ID {
				h.Quotes = append(h.Quotes[:i:i], h.Quotes[i+1:]...)
				break
			}
		}
	}
}

// MintOutcome is a mint's answer: a saga (201), or a requote (409 with a
// fresh quote, stored; the old quote is gone).
type MintOutcome struct {
	Saga    *SagaView
	Requote *RequoteBody
}

// RequoteBody is the 409 usdx_requote answer.
type RequoteBody struct {
	Error  string    `json:"error"`
	Code   string    `json:"code"`
	Reason string    `json:"reason"`
	Quote  QuoteView `json:"quote"`
}

// Mint carries out quote quoteID for accountID: within requoteToleranceQ9
// of the quoted execution price, one entry debits the sats, opens the hedge
// and credits USDx; beyond it the quote is replaced by a fresh one (id
// freshID) and the answer is usdx_requote. A mint already made under this
// id answers its saga (a late retry).
func (s *State) Mint(e *Env, accountID, quoteID, freshID string) (MintOutcome, *wire.Refusal) {
	if sg, ok := s.Sagas[quoteID]; ok && sg.AccountID == accountID {
		v := NewSagaView(sg)
		return MintOutcome{Saga: &v}, nil
	}
	qu, ok := s.Quotes[quoteID]
	if !ok || qu.AccountID != accountID {
		return MintOutcome{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "quote %q not found", quoteID)
	}
	if qu.Side != SideMint {
		return MintOutcome{}, bad(wire.CodeValidation, "quote %q is a %s quote; redeem with POST /v1/usdx/redemptions", quoteID, qu.Side)
	}
	if e.now() >= qu.ExpiresAtMs {
		return MintOutcome{}, conflict(wire.CodeUSDxQuoteExpired, "expired", "quote %q expired at %d", quoteID, qu.ExpiresAtMs)
	}
	if ref := s.checkMint(e, qu.Usdx); ref != nil {
		return MintOutcome{}, ref
	}
	pz, ref := s.price(e, SideMint, qu.Usdx)
	if ref != nil {
		return MintOutcome{}, ref
	}
	// |exec now - quoted| x 1e9 > tolerance x quoted: requote.
	if beyondTolerance(pz.qt.ExecQ8, qu.PriceQ8, s.Params.RequoteToleranceQ9) {
		if freshID == "" || s.Quotes[freshID] != nil || s.Sagas[freshID] != nil {
			return MintOutcome{}, bad(wire.CodeValidation, "a requote needs a fresh quote id")
		}
		s.dropQuote(qu)
		fresh := s.storeQuote(e, accountID, freshID, SideMint, qu.Usdx, pz)
		return MintOutcome{Requote: &RequoteBody{Error: fmt.Sprintf("the price moved beyond the tolerance of quote %q; here is a fresh quote", quoteID),
			Code: wire.CodeUSDxRequote, Reason: "price_moved", Quote: NewQuoteView(fresh)}}, nil
	}
	free := ledger.Free(accountID)
	if bal := e.T.Ledger.Balance(free); bal < pz.sats {
		return MintOutcome{}, bad(wire.CodeInsufficientBalance, "free balance %d msat cannot pay %d msat", bal, pz.sats)
	}
	// Every check has passed: mutate from here on.
	s.dropQuote(qu)
	s.move(e, free, ledger.Free(HedgeAccount), pz.hedgeOutlay)
	s.move(e, free, Reserve, pz.baseFee+pz.dynFee)
	s.ReserveMsat += pz.baseFee + pz.dynFee
	s.hedgeOrder(e, "sell", qu.Usdx, false)
	s.Supply += qu.Usdx
	s.notePeak(e)
	h := s.holder(accountID)
	h.Usdx += qu.Usdx
	s.record(e.now(), qu.Usdx, 0)
	sg := &Saga{ID: quoteID, AccountID: accountID, Side: SideMint, State: SagaMinted, Usdx: qu.Usdx, Contracts: qu.Usdx,
		SatsMsat: pz.sats, FeeMsat: pz.baseFee + pz.dynFee + pz.plan.FeeMsat, CreatedTsMs: e.now(), UpdatedTsMs: e.now()}
	s.addSaga(e, sg)
	s.activity(e, accountID, Activity{Event: "mint", Ref: sg.ID, Usdx: sg.Usdx, SatsMsat: sg.SatsMsat, State: sg.State})
	s.mustIdentity(e)
	v := NewSagaView(sg)
	return MintOutcome{Saga: &v}, nil
}

// Redeem redeems q USDx of accountID under saga id: at once at the oracle
// price when it is fresh, else queued (the USDx is set aside as pending)
// until the next fresh print. Never refused for a halt.
func (s *State) Redeem(e *Env, accountID, id string, q int64) (SagaView, *wire.Refusal) {
	if sg, ok := s.Sagas[id]; ok {
		if sg.AccountID != accountID || sg.Side != SideRedeem || sg.Usdx != q {
			return SagaView{}, wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused, "id %q was used for another USDx operation", id)
		}
		return NewSagaView(sg), nil
	}
	if id == "" || len(id) > 255 || s.Quotes[id] != nil {
		return SagaView{}, bad(wire.CodeValidation, "redemption id must be 1..255 characters and unused")
	}
	if !s.Params.Features.Redeem {
		return SagaView{}, wire.Refuse(http.StatusForbidden, wire.CodeFeatureUnavailable, "USDx redemptions are switched off")
	}
	if q < 1 {
		return SagaView{}, conflict(wire.CodeUSDxDust, "dust", "the smallest redemption is 1 USDx")
	}
	h := s.Holder(accountID)
	if h.Usdx < q {
		return SagaView{}, bad(wire.CodeInsufficientBalance, "holding %d USDx, cannot redeem %d", h.Usdx, q)
	}
	if m, ok := e.T.Market.MarketsByID[HedgeMarket]; ok && q > m.Params.MaxOrderContracts {
		return SagaView{}, bad(wire.CodeValidation, "at most %d USDx per redemption", m.Params.MaxOrderContracts)
	}
	sg := &Saga{ID: id, AccountID: accountID, Side: SideRedeem, Usdx: q, Contracts: q, CreatedTsMs: e.now(), UpdatedTsMs: e.now()}
	if halted := e.hedgeHalted(); halted || !e.oracleFresh() {
		if s.queuedOf(accountID) >= QueuedPerAccountMax {
			return SagaView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "at most %d queued redemptions per account", QueuedPerAccountMax)
		}
		hh := s.holder(accountID)
		hh.Usdx -= q
		hh.Pending += q
		reason := "oracle_stale"
		if halted {
			reason = "market_halted"
		}
		sg.State, sg.QueuedReason, sg.QueuedSinceMs = SagaQueued, reason, e.now()
		s.Queue = append(s.Queue, id)
		s.queuedBy[accountID]++ // built by queuedOf above
		s.addSaga(e, sg)
		s.activity(e, accountID, Activity{Event: "redeem", Ref: id, Usdx: q, State: sg.State})
		return NewSagaView(sg), nil
	}
	pz, ref := s.price(e, SideRedeem, q)
	if ref != nil {
		return SagaView{}, ref
	}
	hh := s.holder(accountID)
	hh.Usdx -= q
	s.addSaga(e, sg)
	s.payRedemption(e, sg, pz)
	return NewSagaView(sg), nil
}

// payRedemption closes the saga's contracts and pays its holder.
func (s *State) payRedemption(e *Env, sg *Saga, pz priced) {
	hf := ledger.Free(HedgeAccount)
	pos := e.hedge()
	s.hedgeOrder(e, "buy", sg.Usdx, true)
	if got := e.T.Ledger.Balance(hf); got != pz.hedgeOutlay {
		panic(fmt.Sprintf("usdx: redemption freed %d msat, planned %d", got, pz.hedgeOutlay))
	}
	if e.T.Level >= LevelHoleLeavesWithContracts {
		// The closed contracts released their share of a short margin:
		// that part of the hole left with them (the redeemer bore it).
		s.UncoveredShortfallMsat -= holeShare(pos.MarginMsat, s.UncoveredShortfallMsat, sg.Usdx, pos.Contracts)
	}
	s.move(e, hf, ledger.Free(sg.AccountID), pz.sats)
	s.move(e, hf, Reserve, pz.baseFee)
	s.ReserveMsat += pz.baseFee
	s.Supply -= sg.Usdx
	s.record(e.now(), 0, sg.Usdx)
	sg.State, sg.SatsMsat, sg.FeeMsat, sg.UpdatedTsMs = SagaPaid, pz.sats, pz.baseFee+pz.plan.FeeMsat, e.now()
	s.activity(e, sg.AccountID, Activity{Event: "redeem", Ref: sg.ID, Usdx: sg.Usdx, SatsMsat: sg.SatsMsat, State: sg.State})
	s.mustIdentity(e)
}

// queuedOf counts accountID's redemptions in Queue, from a count per
// account kept beside it (derived, never encoded: rebuilt from Queue after
// a restore or a drain). Counting by a walk of Queue cost O(queued
// redemptions of every account) per redemption while the oracle was
// stale, quadratic in the queue over the outage.
func (s *State) queuedOf(accountID string) int {
	if s.queuedBy == nil {
		s.queuedBy = map[string]int{}
		for _, id := range s.Queue {
			s.queuedBy[s.Sagas[id].AccountID]++
		}
	}
	return s.queuedBy[accountID]
}

// QueueDrainBudget bounds the queued redemptions one print pays from
// LevelQueueDrainBudget. The queue holds up to QueuedPerAccountMax per
// account, so an outage could line up hundreds of thousands; each costs
// about 20 us of apply (a hedge fill and the payout), so the budget is
// about 0.1 s. The rest stay queued, in order, for the next prints.
const QueueDrainBudget = 5_000

// LevelQueueDrainBudget is the feature level (fsm.FeatureLevel) from which
// one print pays at most QueueDrainBudget queued redemptions.
const LevelQueueDrainBudget uint32 = 13

// OnPrint pays the queued redemptions, oldest first, once the hedge
// market's oracle is fresh again: from LevelQueueDrainBudget at most
// QueueDrainBudget of them, the others at the next prints (a redemption
// asked meanwhile, while the price is fresh, is paid at once).
//
// It also checks the backing identity after the print's trading work
// (liquidations and auto-deleveraging run on prints), in production too:
// one position lookup.
func (s *State) OnPrint(e *Env, marketID string) {
	if marketID != HedgeMarket {
		return
	}
	defer s.mustIdentity(e)
	if len(s.Queue) == 0 || !e.oracleFresh() || e.hedgeHalted() {
		return
	}
	queue := s.Queue
	s.Queue, s.queuedBy = nil, nil
	if e.T.Level >= LevelQueueDrainBudget && len(queue) > QueueDrainBudget {
		s.Queue = slices.Clone(queue[QueueDrainBudget:])
		queue = queue[:QueueDrainBudget]
	}
	for _, id := range queue {
		sg := s.Sagas[id]
		h := s.holder(sg.AccountID)
		pz, ref := s.price(e, SideRedeem, sg.Usdx)
		h.Pending -= sg.Usdx
		if ref != nil {
			// Cannot pay anything (dust at this price): the USDx goes back.
			h.Usdx += sg.Usdx
			sg.State, sg.QueuedReason, sg.UpdatedTsMs = SagaPaid, "", e.now()
			s.activity(e, sg.AccountID, Activity{Event: "redeem_returned", Ref: sg.ID, Usdx: sg.Usdx, State: sg.State})
			continue
		}
		sg.QueuedReason = ""
		s.payRedemption(e, sg, pz)
	}
}

// hedgeOrder trades the hedge through the trading book: a market order of
// the venue's own account, at leverage 1 (reduce-only when it closes). The
// caller has put the money it needs in the hedge account's free balance
// and planned the fill, so a refusal is a bug.
func (s *State) hedgeOrder(e *Env, side string, q int64, reduce bool) {
	s.NextOp++
	r := trade.PlaceRequest{OrderID: "usdx-" + strconv.FormatUint(s.NextOp, 10), MarketID: HedgeMarket, Side: side,
		Type: trade.TypeMarket, Contracts: q, ReduceOnly: reduce, Leverage: 1}
	if _, ref := e.Trade.Place(e.T, HedgeAccount, r, nil); ref != nil {
		panic(fmt.Sprintf("usdx: hedge %s %d refused: %v", side, q, ref))
	}
}

func (s *State) move(e *Env, from, to string, msat int64) {
	if msat == 0 {
		return
	}
	if err := e.T.Ledger.Transfer(from, to, msat); err != nil {
		panic(fmt.Sprintf("usdx: transfer %s -> %s %d: %v", from, to, msat, err))
	}
}

func (s *State) addSaga(e *Env, sg *Saga) {
	s.Sagas[sg.ID] = sg
	h := s.holder(sg.AccountID)
	h.Sagas = append(h.Sagas, sg.ID)
	if e.T.Level >= LevelRedemptionsHeld {
		s.trimSagasHeld(h, e.now())
		return
	}
	if len(h.Sagas) > SagasKept {
		for i, id := range h.Sagas {
			if old := s.Sagas[id]; old == nil || old.State != SagaQueued {
				delete(s.Sagas, id)
				h.Sagas = append(h.Sagas[:i:i], h.Sagas[i+1:]...)
				break
			}
		}
	}
}

// LevelRedemptionsHeld is the feature level (fsm.FeatureLevel) from which
// a redemption's saga is kept at least SagaRetainMs after its last
// change, however many follow it. A keyed redemption's id comes from the
// account and the client's idempotency key, and the saga is what answers
// a retry once the idempotency store has forgotten the key (after its 24
// hours, or earlier when a flood of other accounts' answers evicts it).
// Below the level the saga went as soon as SagasKept newer ones came, and
// a late retry of the same request redeemed the holder's USDx a second
// time. Mint sagas need no hold: a mint's id is its quote's, and a late
// retry finds the quote gone. Found by a review on 2026-11-28.
const LevelRedemptionsHeld uint32 = 8

// SagaRetainMs is how long a redemption's saga is kept after its last
// change from LevelRedemptionsHeld: two days, twice the idempotency
// store's retention (WithdrawalRetainMs says the same for withdrawals).
const SagaRetainMs = WithdrawalRetainMs

// SagasHeldMax bounds the sagas an account keeps from
// LevelRedemptionsHeld, held ones included: past it the oldest that are
// not queued go before their hold ends (as WithdrawalsHeldMax: a 1 USDx
// mint and redemption cost a few hundred msat of fees, so the hold alone
// let an account keep a saga per request for two days).
const SagasHeldMax = 10 * SagasKept

// trimSagasHeld drops h's oldest sagas past SagasKept that may go: never
// a queued one, and a redemption only SagaRetainMs after its last change
// unless the account holds more than SagasHeldMax.
// The list is in creation order, so one pass finds them oldest first.
func (s *State) trimSagasHeld(h *Holder, nowMs int64) {
	h.Sagas = trimHeld(h.Sagas, SagasKept, SagasHeldMax, func(id string, over bool) bool {
		sg := s.Sagas[id]
		if sg == nil || sg.State != SagaQueued && (over || sg.Side != SideRedeem || sg.UpdatedTsMs+SagaRetainMs <= nowMs) {
			delete(s.Sagas, id)
			return true
		}
		return false
	})
}

// trimHeld drops the oldest of ids (oldest first) while more than kept
// remain, each only if drop, told whether more than heldMax remain, says
// it may go (and forgets it). It returns the ids left, in order.
func trimHeld(ids []string, kept, heldMax int, drop func(id string, over bool) bool) []string {
	excess := len(ids) - kept
	if excess <= 0 {
		return ids
	}
	over := len(ids) - heldMax
	left := make([]string, 0, len(ids))
	for _, id := range ids {
		if excess > 0 && drop(id, over > 0) {
			excess--
			over--
			continue
		}
		left = append(left, id)
	}
	return left
}

// activity records an account's USDx event with a fresh seq and emits it.
func (s *State) activity(e *Env, accountID string, a Activity) {
	a.Seq, a.TsMs = e.T.NextSeq(), e.now()
	h := s.holder(accountID)
	h.Activity = append(h.Activity, a)
	if len(h.Activity) > ActivityKept {
		h.Activity = h.Activity[len(h.Activity)-ActivityKept:]
	}
	e.T.Emit("usdx", accountID, a.Seq, NewActivityView(a))
}

// mustIdentity halts the replica if the backing identity broke: USDx
// supply must equal the hedge's short contracts after every entry.
func (s *State) mustIdentity(e *Env) {
	if err := s.identity(e.Trade); err != nil {
		panic("usdx: " + err.Error())
	}
}

func (s *State) identity(tr *trade.State) error {
	pos := tr.Position(HedgeAccount, HedgeMarket)
	if pos.Contracts != s.Supply || (pos.Contracts > 0 && pos.Side != trade.Short) {
		return fmt.Errorf("backing identity broken: supply %d, hedge %d contracts (side %d)", s.Supply, pos.Contracts, pos.Side)
	}
	return nil
}

// IdentityHolds reports the backing identity for the public state.
func (s *State) IdentityHolds(tr *trade.State) bool { return s.identity(tr) == nil }

// CheckInvariants verifies the backing identity, USDx and sUSDx
// conservation, and that the ledger's USDx accounts match the state (the
// hedge's free balance is empty between entries).
func (s *State) CheckInvariants(l *ledger.Ledger, tr *trade.State) error {
	if err := s.identity(tr); err != nil {
		return err
	}
	var usdx, susdx int64
	for id, h := range s.Holders {
		if h.Usdx < 0 || h.Pending < 0 || h.Susdx < 0 || h.Withdrawing < 0 {
			return fmt.Errorf("usdx: holder %s negative: %+v", id, *h)
		}
		usdx += h.Usdx + h.Pending + h.Withdrawing
		susdx += h.Susdx
		for _, u := range h.Unstakes {
			if !u.Released {
				susdx += u.Susdx
			}
		}
	}
	if want := usdx + s.Staked + s.Outside; want != s.Supply {
		return fmt.Errorf("usdx: supply %d != held+pending+withdrawing %d + staked %d + outside %d", s.Supply, usdx, s.Staked, s.Outside)
	}
	if susdx != s.SusdxSupply {
		return fmt.Errorf("usdx: sUSDx supply %d != held+cooling %d", s.SusdxSupply, susdx)
	}
	if s.Staked < 0 || s.SusdxSupply < 0 || s.Outside < 0 {
		return fmt.Errorf("usdx: negative pool: staked %d susdx %d outside %d", s.Staked, s.SusdxSupply, s.Outside)
	}
	if got := l.Balance(Reserve); got != s.ReserveMsat {
		return fmt.Errorf("usdx: reserve ledger %d, state %d", got, s.ReserveMsat)
	}
	if got := l.Balance(YieldEscrow); got != s.YieldEscrowMsat {
		return fmt.Errorf("usdx: yield escrow ledger %d, state %d", got, s.YieldEscrowMsat)
	}
	if got := l.Balance(ledger.Free(HedgeAccount)); got != 0 {
		return fmt.Errorf("usdx: hedge free balance %d between entries", got)
	}
	return nil
}

// beyondTolerance reports |now - quoted| x 1e9 > toleranceQ9 x quoted,
// exactly (128-bit products).
func beyondTolerance(nowQ8, quotedQ8, toleranceQ9 int64) bool {
	diff := nowQ8 - quotedQ8
	if diff < 0 {
		diff = -diff
	}
	l := new(big.Int).Mul(big.NewInt(diff), big.NewInt(Q9))
	r := new(big.Int).Mul(big.NewInt(toleranceQ9), big.NewInt(quotedQ8))
	return l.Cmp(r) > 0
}
