package trade

import (
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
)

// Funding flows. At each hourly boundary (market.State.Advance records it
// with its rate, which follows the skew and is capped by the market's
// maxFundingRateHourlyQ9) every open position in the market pays or
// receives rate x its notional at the boundary mark, against the house
// book, through its margin: a long pays when the rate is positive, a short
// when it is negative. The payer's amount rounds up, the receiver's down.
// A payer whose margin cannot cover the payment pays all of it (paidMsat
// says what moved); from LevelFundingCharge the rest is charged to the
// position's entry (EntryCharged), so its PnL falls by at least that much
// and the house takes it back when the position closes. A payer under
// maintenance then is liquidated like any other.

// LevelFundingCharge is the feature level (fsm.FeatureLevel) from which
// funding a payer's margin cannot cover is charged to its entry. Found by
// a review on 2026-11-27: below it the rest was dropped, so a profitable
// 100x position whose margin funding had drained paid nothing at every
// later boundary (611,790,000 msat over 80 hours in its example), while the
// house kept paying the other side.
const LevelFundingCharge uint32 = 4

// EntryCharged is the entry at which a position of n contracts on side
// has a PnL lower by at least dMsat at every exit price: for inverse,
// 1/e' = 1/e - side*d/(n*1e19); for quanto, e' = e + side*d*1e8/(n*mult).
// Rounded against the position (up for a long, down for a short) and
// kept within [1, PriceQ8Max]; only a charge beyond the position's whole
// value at entry, which no funding reaches, could meet the bound and be
// collected in part.
func EntryCharged(p *market.Params, side Side, n, entryQ8, dMsat int64) int64 {
	if n <= 0 || dMsat <= 0 {
		return entryQ8
	}
	var e wide
	if p.ContractType == market.Inverse {
		nS := mulw(w(n), wu(inverseScale))
		num := mulw(w(entryQ8), nS)
		if side == Long {
			den := subw(nS, mulw(w(dMsat), w(entryQ8)))
			if den.sign() <= 0 {
				return market.PriceQ8Max
			}
			e = ceilw(num, den)
		} else {
			e = floorw(num, addw(nS, mulw(w(dMsat), w(entryQ8))))
		}
	} else {
		step := ceilw(mulw(w(dMsat), w(q8)), mulw(w(n), w(*p.QuantoMultiplierMsat)))
		if side == Long {
			e = addw(w(entryQ8), step)
		} else {
			e = subw(w(entryQ8), step)
		}
	}
	v, err := e.toInt64()
	switch {
	case err != nil || v > market.PriceQ8Max:
		if side == Long {
			return market.PriceQ8Max
		}
		return 1
	case v < 1:
		return 1
	}
	return v
}

// FundingFlow is one position's payment at one boundary (SPEC's Funding
// flow). FlowMsat is what was due, signed from the trader's side (negative:
// the position paid); PaidMsat what moved, signed the same way.
type FundingFlow struct {
	Seq          uint64 `cbor:"1,keyasint"`
	BoundaryTsMs int64  `cbor:"2,keyasint"`
	MarketID     string `cbor:"3,keyasint"`
	RateQ9       int64  `cbor:"4,keyasint"`
	FlowMsat     int64  `cbor:"5,keyasint"`
	PaidMsat     int64  `cbor:"6,keyasint"`
	PositionID   uint64 `cbor:"7,keyasint"`
}

// OnFunding settles a recorded boundary: every position in the market, in
// account id order, pays or receives, moves its funding clock to the
// boundary and takes its new liquidation level; then whatever is now due
// is liquidated (at the last print, if fresh). A boundary without a mark
// (no print yet) has no positions to settle. A boundary passed while the
// cluster was down is settled by the entry whose time passes it, at the
// last mark known then: log time moves at most MaxClockStepMs per entry,
// so no boundary is ever skipped, and each is recorded once.
func (s *State) OnFunding(env *Env, ev market.FundingEvent) {
	m, ok := env.Market.MarketsByID[ev.MarketID]
	if !ok || ev.MarkQ8 <= 0 {
		return
	}
	p := &m.Params
	// The market's holders in account id order (holders.go), not a walk
	// of every account.
	holders := s.marketHolders(ev.MarketID)
	if ev.RateQ9 != 0 && env.Reserve != nil {
		env.Reserve(len(holders)) // a flow event each, at most
	}
	// The liquidation index, taken at the first flow (as indexPosition
	// would: a boundary without flows creates no book).
	var liq *market.PriceIndex
	for _, id := range holders {
		a := s.Accounts[id]
		pos := a.Positions[ev.MarketID]
		pos.FundingClockTsMs = ev.BoundaryTsMs
		if ev.RateQ9 == 0 {
			continue
		}
		notional := mustMath(NotionalMsat(p, pos.Contracts, ev.MarkQ8))
		rate := ev.RateQ9 * int64(pos.Side) // > 0: this position pays
		margin := a.ledgerMargin(id, ev.MarketID)
		f := &FundingFlow{BoundaryTsMs: ev.BoundaryTsMs, MarketID: ev.MarketID, RateQ9: ev.RateQ9, PositionID: pos.ID}
		if rate > 0 {
			owed := mustMath(rateOf(notional, rate))
			paid := min(owed, pos.MarginMsat)
			transfer(env.Ledger, margin, ledger.House, paid)
			pos.MarginMsat -= paid
			f.FlowMsat, f.PaidMsat = -owed, -paid
			if paid < owed && env.Level >= LevelFundingCharge {
				pos.EntryQ8 = EntryCharged(p, pos.Side, pos.Contracts, pos.EntryQ8, owed-paid)
			}
		} else {
			due := mustMath(floorw(mulw(w(notional), w(-rate)), w(q9)).toInt64())
			if env.Level >= LevelExactFunding {
				// Below that level the receiver's share was floored from
				// the notional already rounded up (the payer's base), which
				// could pay 1 msat more than owed; now one rounding, down,
				// of the exact value x rate.
				num, den := valueExact(p, pos.Contracts, ev.MarkQ8)
				due = mustMath(floorw(mulw(num, w(-rate)), mulw(den, w(q9))).toInt64())
			}
			transfer(env.Ledger, ledger.House, margin, due)
			pos.MarginMsat += due
			f.FlowMsat, f.PaidMsat = due, due
		}
		if f.FlowMsat == 0 {
			continue
		}
		f.Seq = env.NextSeq()
		a.FundingFlows = append(a.FundingFlows, f)
		if len(a.FundingFlows) > FundingFlowsKept {
			a.FundingFlows = a.FundingFlows[len(a.FundingFlows)-FundingFlowsKept:]
		}
		env.Emit("funding_flow", id, f.Seq, NewFundingFlowView(f))
		if liq == nil {
			liq = s.book(ev.MarketID).liqIndex()
		}
		indexIn(env, liq, p, id, ev.MarketID, pos)
	}
	s.sweep(env, ev.MarketID)
}
