package trade

import (
	"fmt"
	"math/big"
	"slices"
	"sort"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
)

// Liquidation, the insurance fund and auto-deleveraging.
//
// When a print (or a funding payment) leaves a position at or below
// maintenance, the engine cancels the account's live orders and triggers in
// that market and closes the position at the oracle mid with spread (like
// a market order, with no taker fee): partially when closing part of it
// restores equity to LiquidationTargetMultiple x the maintenance of what
// remains, else fully. It charges a penalty, the closed notional times
// mmRateQ9/LiquidationPenaltyDivisor (rounded up), to the insurance fund,
// never more than the margin left after the loss. A loss beyond the
// margin (the deficit) is paid to the house book by the insurance fund as
// far as its balance goes; what it cannot cover auto-deleverages the most
// profitable opposite positions (adl).

const (
	// LiquidationPenaltyDivisor: the penalty rate is mmRate / 2.
	LiquidationPenaltyDivisor = 2
	// LiquidationTargetMultiple: a partial liquidation leaves equity at
	// least twice the maintenance margin of the remaining position.
	LiquidationTargetMultiple = 2
	// ReasonLiquidation is the reason of orders and triggers the engine
	// cancels before liquidating a position.
	ReasonLiquidation = "liquidation"
	// ADLOrderPrefix names the fills auto-deleveraging makes: the prefix
	// and the seq of the liquidation that caused them.
	ADLOrderPrefix = "adl-"
)

// LevelADLIDsReserved is the feature level (fsm.FeatureLevel) from which
// an order id starting with ADLOrderPrefix is refused. Below it a client
// could name its own order "adl-7", and the fill auto-deleveraging later
// booked as "adl-7" on its account read as a fill of that order (a trading
// review of 2026-11-27); an automated trader matching fills to orders by
// id would count it twice.
const LevelADLIDsReserved uint32 = 8

// Liquidation is a liquidation record with every field of SPEC's
// Liquidation.
type Liquidation struct {
	AccountID            string `cbor:"1,keyasint"`
	PositionID           uint64 `cbor:"2,keyasint"`
	MarketID             string `cbor:"3,keyasint"`
	Side                 Side   `cbor:"4,keyasint"`
	Closed               int64  `cbor:"5,keyasint"`
	Partial              bool   `cbor:"6,keyasint,omitempty"`
	ExecQ8               int64  `cbor:"7,keyasint"`
	OracleMidQ8          int64  `cbor:"8,keyasint"`
	OracleConfQ9         int64  `cbor:"9,keyasint"`
	OracleTsMs           int64  `cbor:"10,keyasint"`
	SpreadQ9             int64  `cbor:"11,keyasint"`
	RealizedPnlMsat      int64  `cbor:"12,keyasint,omitempty"`
	PenaltyMsat          int64  `cbor:"13,keyasint,omitempty"`
	RemainderMsat        int64  `cbor:"14,keyasint,omitempty"` // full liquidations: margin returned to free
	DeficitMsat          int64  `cbor:"15,keyasint,omitempty"`
	InsuranceCoveredMsat int64  `cbor:"16,keyasint,omitempty"`
	ADLTriggered         bool   `cbor:"17,keyasint,omitempty"`
	RemainingContracts   int64  `cbor:"18,keyasint,omitempty"`
	RemainingMarginMsat  int64  `cbor:"19,keyasint,omitempty"`
	Seq                  uint64 `cbor:"20,keyasint"`
	TsMs                 int64  `cbor:"21,keyasint"`
}

// sweep liquidates every position of the market that is due at its last
// print: not while the market is halted or its print is stale (the next
// fresh print sweeps again, and Reached finds whatever became due
// meanwhile). It is one act on the book (BookActBudget).
func (s *State) sweep(env *Env, marketID string) {
	budget := newActBudget(env)
	if budget.limit > 0 && s.behind(marketID) {
		// What is due waits its turn at the continuation (ContinueBooks):
		// an order's or a funding boundary's sweep would otherwise start
		// a budget of its own for every order of an entry.
		return
	}
	s.sweepWithin(env, marketID, &budget)
}

// sweepWithin is sweep within an act's budget. It reports whether it
// liquidated everything due; from LevelBookBudget what it leaves stays in
// the liquidation index, the book is left behind (State.BooksBehind), and
// the next entries liquidate what is still due at their print.
func (s *State) sweepWithin(env *Env, marketID string, budget *actBudget) bool {
	b, ok := s.Books[marketID]
	if !ok || b.Liq == nil || b.Liq.Len() == 0 {
		return true
	}
	m := env.Market.MarketsByID[marketID]
	pr, printed := env.Market.LastPrint(marketID)
	if !printed || m.Params.Status == market.StatusHalted || env.Market.IsStale(marketID, env.NowMs) || printHeld(env, marketID) {
		return true
	}
	due, more := b.Liq.ReachedN(pr.MidQ8, budget.room())
	if len(due) == 0 {
		// Every fill sweeps its market, and almost always nothing is due:
		// no ranking to make.
		return true
	}
	// One ranking for auto-deleveraging per sweep (adlRanking): a gap's
	// shortfalls re-rank only what each liquidation touched.
	env.adl = &adlRanking{}
	defer func() { env.adl = nil }()
	for _, id := range due {
		if !budget.start() {
			more = true
			break
		}
		// An earlier liquidation's auto-deleveraging may have closed or
		// shrunk this position since Reached listed it.
		if e, ok := b.Liq.Entries[id]; ok && reached(e.Dir, e.LevelQ8, pr.MidQ8) {
			work0 := env.work
			s.liquidate(env, m, pr, id)
			budget.charge(env, work0)
		}
	}
	if more {
		s.setBehind(marketID, true)
	}
	return !more
}

// OnParams runs after an operator changed a market's parameters or
// status: every position's liquidation level is derived again (the
// maintenance rate may have changed), in account id order, and whatever is
// now due is liquidated (a market back from halted, a raised mmRate).
func (s *State) OnParams(env *Env, marketID string) {
	for _, id := range s.marketHolders(marketID) {
		s.indexPosition(env, id, marketID)
	}
	s.sweep(env, marketID)
	if env.Level < LevelHaltResume {
		return
	}
	// A market back from a halt acts now on the levels its price passed
	// while halted (OnPrint), when its print is fresh; else the next
	// print does.
	m, book := env.Market.MarketsByID[marketID], s.Books[marketID]
	pr, printed := env.Market.LastPrint(marketID)
	if m == nil || book == nil || !printed || m.Params.Status == market.StatusHalted ||
		env.Market.IsStale(marketID, env.NowMs) || printHeld(env, marketID) || (book.LastMidQ8 == pr.MidQ8 && !s.behind(marketID)) {
		return
	}
	budget := newActBudget(env)
	s.walk(env, m, book, pr, &budget)
}

// LevelHeldPrintStopsRisk is the feature level (fsm.FeatureLevel) from
// which the risk engine waits, as it does for a stale print, while the
// market's feed holds a print that jumped past market.PrintJumpFactor:
// no liquidation sweep (after funding, or a parameter change) and no
// walk of the book (a market resuming from a halt) acts on the last
// accepted price then; the print that confirms or drops the jump does.
// Found by a review of 2026-11-28: order entry already waited
// (fsm.LevelHeldPrintStopsOrders), but a funding boundary passing while
// a fall to a third was held liquidated a 100x long at the price from
// before the fall (7,000 of its 10,000 contracts, with no loss beyond
// its margin), and the house took the jump the held print announced.
const LevelHeldPrintStopsRisk uint32 = 8

// printHeld reports whether, from LevelHeldPrintStopsRisk, the market's
// feed holds a print past the jump guard.
func printHeld(env *Env, marketID string) bool {
	return env.Level >= LevelHeldPrintStopsRisk && env.Market.PrintHeld(marketID)
}

// liquidate liquidates accountID's position in m at print pr.
func (s *State) liquidate(env *Env, m *market.MarketState, pr market.Print, accountID string) {
	p, mkt := &m.Params, m.Params.MarketID
	pos := s.Position(accountID, mkt)
	if pos.Contracts == 0 || !UnderMaintenance(p, pos, pr.MidQ8) {
		panic(fmt.Sprintf("trade: liquidation index has %s/%s at a level its position %+v does not reach at %d", accountID, mkt, pos, pr.MidQ8))
	}
	env.work++
	s.cancelInMarket(env, accountID, mkt, ReasonLiquidation)

	closing := -pos.Side
	lq := &Liquidation{AccountID: accountID, PositionID: pos.ID, MarketID: mkt, Side: pos.Side,
		OracleMidQ8: pr.MidQ8, OracleConfQ9: pr.ConfQ9, OracleTsMs: pr.TsMs, TsMs: env.NowMs}
	quote := func(q int64) Quote {
		qt, err := QuoteTrade(m, pr, closing, q)
		if err != nil {
			// No tradable price with spread (a sell rounding to zero):
			// close at the mid itself rather than leave the position.
			return Quote{MidQ8: pr.MidQ8, ConfQ9: pr.ConfQ9, OracleTsMs: pr.TsMs, ExecQ8: pr.MidQ8}
		}
		return qt
	}
	l := env.Ledger
	margin := ledger.Margin(accountID, mkt)
	after := Position{}
	shortfall := int64(0)
	if q, pnl, penalty, ok := s.partialLiquidation(p, pos, pr.MidQ8, quote, env.Level); ok {
		qt := quote(q)
		transfer(l, ledger.House, margin, max(pnl, 0))
		transfer(l, margin, ledger.House, max(-pnl, 0))
		transfer(l, margin, ledger.Insurance, penalty)
		after = pos
		after.Contracts -= q
		after.MarginMsat += pnl - penalty
		lq.Closed, lq.Partial, lq.ExecQ8, lq.SpreadQ9 = q, true, qt.ExecQ8, qt.SpreadQ9
		lq.RealizedPnlMsat, lq.PenaltyMsat = pnl, penalty
		lq.RemainingContracts, lq.RemainingMarginMsat = after.Contracts, after.MarginMsat
	} else {
		q := pos.Contracts
		qt := quote(q)
		pnl := mustMath(PnLMsat(p, pos.Side, q, pos.EntryQ8, qt.ExecQ8))
		left := pos.MarginMsat
		if pnl >= 0 {
			transfer(l, ledger.House, margin, pnl)
			left += pnl
		} else {
			fromMargin := min(-pnl, left)
			transfer(l, margin, ledger.House, fromMargin)
			left -= fromMargin
			lq.DeficitMsat = -pnl - fromMargin
		}
		lq.PenaltyMsat = min(liquidationPenalty(p, q, qt.ExecQ8, env.Level), left)
		transfer(l, margin, ledger.Insurance, lq.PenaltyMsat)
		lq.RemainderMsat = left - lq.PenaltyMsat
		transfer(l, margin, ledger.Free(accountID), lq.RemainderMsat)
		lq.InsuranceCoveredMsat = min(lq.DeficitMsat, l.Balance(ledger.Insurance))
		transfer(l, ledger.Insurance, ledger.House, lq.InsuranceCoveredMsat)
		shortfall = lq.DeficitMsat - lq.InsuranceCoveredMsat
		lq.Closed, lq.ExecQ8, lq.SpreadQ9, lq.RealizedPnlMsat = q, qt.ExecQ8, qt.SpreadQ9, pnl
		lq.ADLTriggered = shortfall > 0
	}
	a := s.account(accountID)
	if after.Contracts == 0 {
		delete(a.Positions, mkt)
	} else {
		a.Positions[mkt] = &after
	}
	s.noteHolder(accountID, mkt, after.Contracts != 0)
	env.adl.touch(accountID)
	mustOI(env.Market.AddOpenInterest(mkt, market.Side(pos.Side), -lq.Closed))
	_ = env.Market.RecordFill(mkt, lq.Closed, env.NowMs) // volume; see fill
	s.indexPosition(env, accountID, mkt)
	lq.Seq = env.NextSeq()
	a.Liquidations = append(a.Liquidations, lq)
	if len(a.Liquidations) > LiquidationsKept {
		a.Liquidations = a.Liquidations[len(a.Liquidations)-LiquidationsKept:]
	}
	env.Emit("liquidation", accountID, lq.Seq, NewLiquidationView(lq))
	env.Emit("position", accountID, env.NextSeq(), NewPositionChange(mkt, after))
	if shortfall > 0 {
		s.autoDeleverage(env, m, pr, -pos.Side, lq.Closed, shortfall, lq.Seq)
	}
}

// partialLiquidation sizes a partial close of pos at mid: the fewest
// contracts q whose close leaves equity (margin + PnL - penalty) at least
// LiquidationTargetMultiple x the maintenance of the n-q that remain,
// solved on exact rationals at the mid and confirmed on the figures the
// close would really book (execution price with spread, rounded PnL and
// penalty): the remaining position must hold positive margin and not be
// under maintenance. ok is false when no such q leaves at least
// minOrderContracts open (the liquidation is then full).
//
// From LevelBookedPartial (level) the close is first sized on the booked
// figures: the fewest q (by bisection from the rational estimate up to
// the most that leaves minOrderContracts) after which the remainder's
// booked margin plus its unrealised PnL at the mid is at least the target;
// only when even that largest partial close misses the target does the
// older rule (not under maintenance) apply.
func (s *State) partialLiquidation(p *market.Params, pos Position, midQ8 int64, quote func(int64) Quote, level uint32) (q, pnl, penalty int64, ok bool) {
	n := pos.Contracts
	vNum, vDen := valueExact(p, n, midQ8)
	vn := new(big.Rat).SetFrac(vNum.big(), vDen.big())
	upnl := new(big.Rat).SetFrac(mulw(w(int64(pos.Side)), pnlNumerator(p, n, pos.EntryQ8, midQ8)).big(), pnlDenominator(p, pos.EntryQ8, midQ8).big())
	equity := new(big.Rat).Add(new(big.Rat).SetInt64(pos.MarginMsat), upnl)
	if equity.Sign() <= 0 {
		return 0, 0, 0, false
	}
	mm := big.NewRat(p.MMRateQ9, q9)
	target := new(big.Rat).Mul(mm, big.NewRat(LiquidationTargetMultiple, 1))
	perContract := new(big.Rat).Sub(target, new(big.Rat).Quo(mm, big.NewRat(LiquidationPenaltyDivisor, 1)))
	if perContract.Sign() <= 0 {
		return 0, 0, 0, false
	}
	// q >= n * (target*V(n) - equity) / (perContract * V(n))
	need := new(big.Rat).Sub(new(big.Rat).Mul(target, vn), equity)
	ratio := new(big.Rat).Quo(need, new(big.Rat).Mul(perContract, vn))
	ratio.Mul(ratio, new(big.Rat).SetInt64(n))
	first := ceilRat(ratio)
	if level >= LevelBookedPartial {
		if q, pnl, penalty, ok := bookedPartial(p, pos, midQ8, quote, max(first, 1), target, level); ok {
			return q, pnl, penalty, true
		}
	}
	for q = max(first, 1); q <= first+2; q++ {
		if q >= n || n-q < p.MinOrderContracts {
			return 0, 0, 0, false
		}
		qt := quote(q)
		pnl, err := PnLMsat(p, pos.Side, q, pos.EntryQ8, qt.ExecQ8)
		if err != nil {
			return 0, 0, 0, false
		}
		penalty = liquidationPenalty(p, q, qt.ExecQ8, level)
		rest := Position{Side: pos.Side, Contracts: n - q, EntryQ8: pos.EntryQ8, MarginMsat: pos.MarginMsat + pnl - penalty}
		if rest.MarginMsat > 0 && !UnderMaintenance(p, rest, midQ8) {
			return q, pnl, penalty, true
		}
	}
	return 0, 0, 0, false
}

// LevelBookedPartial is the feature level (fsm.FeatureLevel) from which a
// partial liquidation is sized on the figures it books (bookedPartial).
// Below it the close was sized at the mid and the spread could leave the
// remainder under the target: 1.92x maintenance in a review's 100x example
// of 2026-11-26.
const LevelBookedPartial uint32 = 4

// bookedPartial finds the fewest contracts q in [lo, n - minOrderContracts]
// whose close, on the figures it books (execution price with spread,
// rounded PnL and penalty), leaves margin > 0 and margin + unrealised PnL
// at the mid >= target x the remainder's value at the mid. The check
// holds more easily as q grows, until the close's impact outgrows what it
// frees; bisection takes the fewest q under that shape, and any q it
// returns meets the target. ok is false when the largest partial close
// does not.
func bookedPartial(p *market.Params, pos Position, midQ8 int64, quote func(int64) Quote, lo int64, target *big.Rat, level uint32) (q, pnl, penalty int64, ok bool) {
	n := pos.Contracts
	hi := n - p.MinOrderContracts
	type figures struct{ pnl, penalty int64 }
	meets := func(q int64) (figures, bool) {
		qt := quote(q)
		pnl, err := PnLMsat(p, pos.Side, q, pos.EntryQ8, qt.ExecQ8)
		if err != nil {
			return figures{}, false
		}
		penalty := liquidationPenalty(p, q, qt.ExecQ8, level)
		margin := pos.MarginMsat + pnl - penalty
		if margin <= 0 {
			return figures{}, false
		}
		rest := n - q
		vNum, vDen := valueExact(p, rest, midQ8)
		v := new(big.Rat).SetFrac(vNum.big(), vDen.big())
		upnl := new(big.Rat).SetFrac(mulw(w(int64(pos.Side)), pnlNumerator(p, rest, pos.EntryQ8, midQ8)).big(), pnlDenominator(p, pos.EntryQ8, midQ8).big())
		equity := new(big.Rat).Add(new(big.Rat).SetInt64(margin), upnl)
		return figures{pnl, penalty}, equity.Cmp(new(big.Rat).Mul(target, v)) >= 0
	}
	if lo > hi {
		return 0, 0, 0, false
	}
	best, ok := meets(hi)
	if !ok {
		return 0, 0, 0, false
	}
	q = hi
	for lo < q {
		mid := lo + (q-lo)/2
		if f, ok := meets(mid); ok {
			q, best = mid, f
		} else {
			lo = mid + 1
		}
	}
	return q, best.pnl, best.penalty, true
}

// pnlNumerator and pnlDenominator give a long's exact unrealised PnL of n
// contracts from entry to mid as a fraction (see PnLMsat).
func pnlNumerator(p *market.Params, n, entryQ8, midQ8 int64) wide {
	diff := subw(w(midQ8), w(entryQ8))
	if p.ContractType == market.Inverse {
		return mulw(w(n), wu(inverseScale), diff)
	}
	return mulw(w(n), diff, w(*p.QuantoMultiplierMsat))
}

func pnlDenominator(p *market.Params, entryQ8, midQ8 int64) wide {
	if p.ContractType == market.Inverse {
		return mulw(w(entryQ8), w(midQ8))
	}
	return w(q8)
}

// ceilRat is r rounded up, as an int64 (a contract count: it fits).
func ceilRat(r *big.Rat) int64 {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// liquidationPenalty is the closed notional at execQ8 times
// mmRate/LiquidationPenaltyDivisor, rounded up. From LevelExactPenalty
// that is one rounding of the exact product; below it the rate was
// halved first in integer division, which for an odd mmRateQ9 dropped
// half a q9 unit of rate in the trader's favour.
func liquidationPenalty(p *market.Params, q, execQ8 int64, level uint32) int64 {
	notional := mustMath(NotionalMsat(p, q, execQ8))
	if level < LevelExactPenalty {
		return mustMath(rateOf(notional, p.MMRateQ9/LiquidationPenaltyDivisor))
	}
	return mustMath(ceilw(mulw(w(notional), w(p.MMRateQ9)), w(q9*LiquidationPenaltyDivisor)).toInt64())
}

// LevelExactPenalty is the feature level (fsm.FeatureLevel) from which
// the liquidation penalty is ceil(notional x mmRateQ9 / (2 x 1e9)), the
// venue's rounding of the stated rate. Found by a review of 2026-11-27:
// below it the rate was mmRateQ9/2 in integer division, so an odd rate
// (a valid 5,000,001) charged 2,500,000 q9: 0.5 msat less per 1e9 msat
// closed, 50 msat on a 1 BTC close, always against the insurance fund.
// With an even rate (every catalogue market) both give the same figure.
const LevelExactPenalty uint32 = 8

func mustMath(v int64, err error) int64 {
	if err != nil {
		panic(fmt.Sprintf("trade: arithmetic out of its bounds: %v", err))
	}
	return v
}

// cancelInMarket ends the account's live orders and triggers in one market
// (placement order), as the engine does before a liquidation.
func (s *State) cancelInMarket(env *Env, accountID, marketID, reason string) {
	a := s.Accounts[accountID]
	var nos []uint64
	for _, no := range a.Live {
		if s.Orders[no].MarketID == marketID {
			nos = append(nos, no)
		}
	}
	for _, no := range nos {
		if o := s.Orders[no]; o.Status == StatusAccepted {
			s.finish(env, o, StatusCanceled, reason)
		}
	}
}

// autoDeleverage covers a liquidation's shortfall from the profit of the
// positions on side in the market: ranked by unrealised PnL per msat of
// margin at the mid (highest first; ties by account id), each is closed at
// the mid, without spread or fee, for up to the liquidated contracts in
// all, and its realised profit is cut by what is still short, never by more
// than that profit. Whatever no profitable position can cover stays with
// the house book. Only a shortfall (an insurance fund too small for a gap)
// makes it rank (adlCandidates).
func (s *State) autoDeleverage(env *Env, m *market.MarketState, pr market.Print, side Side, contracts, shortfall int64, liqSeq uint64) {
	p, mkt := &m.Params, m.Params.MarketID
	for _, c := range s.adlCandidates(env, p, side, pr.MidQ8) {
		if shortfall == 0 || contracts == 0 {
			return
		}
		pos := s.Position(c.id, mkt)
		q := min(pos.Contracts, contracts)
		profit := mustMath(PnLMsat(p, side, q, pos.EntryQ8, pr.MidQ8))
		if profit <= 0 {
			continue // the floor of a small slice can be zero
		}
		cut := min(profit, shortfall)
		s.adlClose(env, m, pr, c.id, q, profit, cut, liqSeq)
		shortfall -= cut
		contracts -= q
	}
}

// adlRanked is an auto-deleveraging candidate: an account whose position
// is profitable at the mid, with the figures its rank compares.
type adlRanked struct {
	id          string
	pnl, margin int64 // margin at least 1
}

// before reports whether a ranks before b: more unrealised PnL per msat
// of margin (exactly: cross-multiplied), ties by account id.
func (a adlRanked) before(b adlRanked) bool {
	if c := cmpw(mulw(w(a.pnl), w(b.margin)), mulw(w(b.pnl), w(a.margin))); c != 0 {
		return c > 0
	}
	return a.id < b.id
}

// adlRanking is one sweep's auto-deleveraging ranking (one market, one
// print): each side's candidates, ranked once when a shortfall first
// needs them, and the accounts whose position in the market changed since
// (touched: the liquidated and the deleveraged). Within a sweep nothing
// else changes a position and none grows, so the next shortfall re-ranks
// only the touched accounts and finds the order a fresh scan of every
// account would. Before, each shortfall scanned every account and sorted
// the candidates with math/big: a gap with k shortfalls among n accounts
// cost k x n log n (28 s of apply for 200 among 20,000 in a review of
// 2026-11-27), now n log n + k x (touched + candidates). Never encoded:
// it lives in the Env for the length of one sweep.
type adlRanking struct {
	touched []string
	sides   [2]adlSide // [0] longs, [1] shorts
}

type adlSide struct {
	built   bool
	applied int // touched accounts already re-ranked
	ranked  []adlRanked
	in      map[string]bool
}

// touch notes that accountID's position in the sweep's market changed
// (a nil ranking, outside a sweep, keeps nothing).
func (r *adlRanking) touch(accountID string) {
	if r != nil {
		r.touched = append(r.touched, accountID)
	}
}

// adlCandidates returns the positions on side that are profitable at
// midQ8, in rank order; venue accounts are never candidates (venue.go).
// The slice is the sweep's own and must not be changed.
func (s *State) adlCandidates(env *Env, p *market.Params, side Side, midQ8 int64) []adlRanked {
	mkt := p.MarketID
	rank := func(id string) (adlRanked, bool) {
		a := s.Accounts[id]
		if a == nil || venueAccounts[id] {
			return adlRanked{}, false
		}
		pos, ok := a.Positions[mkt]
		if !ok || pos.Side != side {
			return adlRanked{}, false
		}
		pnl := mustMath(PnLMsat(p, side, pos.Contracts, pos.EntryQ8, midQ8))
		if pnl <= 0 {
			return adlRanked{}, false
		}
		return adlRanked{id, pnl, max(pos.MarginMsat, 1)}, true
	}
	r := env.adl
	if r == nil {
		r = &adlRanking{}
	}
	sd := &r.sides[0]
	if side == Short {
		sd = &r.sides[1]
	}
	if !sd.built {
		sd.in = map[string]bool{}
		// Only the market's holders can rank; the sort below orders
		// them totally (ties by id), whatever order they come in.
		for _, id := range s.marketHolders(mkt) {
			if c, ok := rank(id); ok {
				sd.ranked = append(sd.ranked, c)
				sd.in[id] = true
			}
		}
		sort.Slice(sd.ranked, func(i, j int) bool { return sd.ranked[i].before(sd.ranked[j]) })
		sd.built, sd.applied = true, len(r.touched)
		return sd.ranked
	}
	for _, id := range r.touched[sd.applied:] {
		if sd.in[id] {
			i := slices.IndexFunc(sd.ranked, func(c adlRanked) bool { return c.id == id })
			sd.ranked = slices.Delete(sd.ranked, i, i+1)
			delete(sd.in, id)
		}
		if c, ok := rank(id); ok {
			i, _ := slices.BinarySearchFunc(sd.ranked, c, func(x, t adlRanked) int {
				if x.before(t) {
					return -1
				}
				return 1
			})
			sd.ranked = slices.Insert(sd.ranked, i, c)
			sd.in[id] = true
		}
	}
	sd.applied = len(r.touched)
	return sd.ranked
}

// adlClose closes q contracts of accountID's position at the mid, paying
// profit - cut of realised PnL, and records the fill.
func (s *State) adlClose(env *Env, m *market.MarketState, pr market.Print, accountID string, q, profit, cut int64, liqSeq uint64) {
	p, mkt := &m.Params, m.Params.MarketID
	pos := s.Position(accountID, mkt)
	released := pos.MarginMsat
	if q < pos.Contracts {
		released = mustMath(floorw(mulw(w(pos.MarginMsat), w(q)), w(pos.Contracts)).toInt64())
	}
	margin := ledger.Margin(accountID, mkt)
	transfer(env.Ledger, ledger.House, margin, profit-cut)
	transfer(env.Ledger, margin, ledger.Free(accountID), released+profit-cut)
	after := Position{}
	if q < pos.Contracts {
		after = pos
		after.Contracts -= q
		after.MarginMsat -= released
	}
	a := s.account(accountID)
	if after.Contracts == 0 {
		delete(a.Positions, mkt)
	} else {
		a.Positions[mkt] = &after
	}
	s.noteHolder(accountID, mkt, after.Contracts != 0)
	env.adl.touch(accountID)
	mustOI(env.Market.AddOpenInterest(mkt, market.Side(pos.Side), -q))
	_ = env.Market.RecordFill(mkt, q, env.NowMs)
	s.indexPosition(env, accountID, mkt)
	f := &Fill{OrderID: fmt.Sprintf("%s%d", ADLOrderPrefix, liqSeq), AccountID: accountID, MarketID: mkt, Side: -pos.Side,
		Closed: q, ExecQ8: pr.MidQ8, OracleMidQ8: pr.MidQ8, OracleConfQ9: pr.ConfQ9, OracleTsMs: pr.TsMs,
		TradeNotionalMsat: mustMath(NotionalMsat(p, q, pr.MidQ8)), RealizedPnlMsat: profit - cut,
		ReleasedMarginMsat: released, After: after, Seq: env.NextSeq(), TsMs: env.NowMs}
	s.recordFill(env, a, f)
	env.Emit("position", accountID, env.NextSeq(), FillPositionEvent{f}) // f.After is after
	if after.Contracts == 0 {
		s.cancelLegs(env, a, mkt)
	}
}
