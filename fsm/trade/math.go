package trade

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/perpd/perpd/fsm/market"
)

// Side is +1 for a long position or a buy, -1 for a short or a sell, as in
// the design notes.
type Side int8

const (
	Long  Side = 1
	Short Side = -1
)

// Name is the side of an order or fill on the wire.
func (s Side) Name() string {
	if s == Long {
		return "buy"
	}
	return "sell"
}

// PositionName is the side of a position on the wire.
func (s Side) PositionName() string {
	if s == Long {
		return "long"
	}
	return "short"
}

// Contract math constants.
const (
	q8 = market.Q8
	q9 = market.Q9
	// InverseMsatPerContractDollar: one 1-dollar contract at price P (q8) is
	// worth 1e19/P msat (1 BTC = 1e11 msat, and P carries 1e8).
	inverseScale uint64 = 10_000_000_000_000_000_000
	// ImpactAtCapQ9 is the skew impact a trade pays when the book's net
	// open interest, averaged over the trade, equals the market's OI cap.
	ImpactAtCapQ9 int64 = 5_000_000 // 0.5%
)

// ErrMath reports a product or quotient outside int64, or an invalid input
// (a non-positive price): the caller refuses the order as validation.
var ErrMath = errors.New("trade: value out of range")

// Every formula below runs on wide (wide.go), 256-bit integers on the
// stack, with one rounding at its final division as its comment states.

// valueExact returns the value of n contracts at priceQ8 in msat as the
// fraction num/den: inverse n*1e19/P, quanto n*P*mult/1e8.
func valueExact(p *market.Params, n, priceQ8 int64) (num, den wide) {
	if p.ContractType == market.Inverse {
		return mulw(w(n), wu(inverseScale)), w(priceQ8)
	}
	return mulw(w(n), w(priceQ8), w(*p.QuantoMultiplierMsat)), w(q8)
}

// NotionalMsatMax is the largest notional an oracle print may give a
// market's open interest (fsm.LevelPrintGuard): an eighth of int64, so a
// position's PnL (at most the larger of its notionals at entry and exit),
// penalty and funding, and a few of them summed, stay within int64.
const NotionalMsatMax = math.MaxInt64 / 8

// NotionalMsat is the value of n contracts at priceQ8, rounded up: it is
// the base of the taker fee and the initial margin, which the trader pays.
func NotionalMsat(p *market.Params, n, priceQ8 int64) (int64, error) {
	if n < 0 || priceQ8 <= 0 {
		return 0, fmt.Errorf("%w: %d contracts at %d", ErrMath, n, priceQ8)
	}
	if p.ContractType == market.Inverse {
		if v, ok := mulDivCeil64(uint64(n), inverseScale, uint64(priceQ8)); ok {
			return v, nil
		}
	}
	num, den := valueExact(p, n, priceQ8)
	return ceilw(num, den).toInt64()
}

// PnLMsat is the realised PnL of closing n contracts of a position on side
// opened at entryQ8, at exitQ8, rounded down (toward minus infinity):
//
//	inverse: side * n * (1e19/entry - 1e19/exit) = side*n*1e19*(exit-entry)/(entry*exit)
//	quanto:  side * n * (exit - entry) * mult / 1e8
//
// One division of the exact rational, so the only loss is below 1 msat.
func PnLMsat(p *market.Params, side Side, n, entryQ8, exitQ8 int64) (int64, error) {
	if n < 0 || entryQ8 <= 0 || exitQ8 <= 0 {
		return 0, fmt.Errorf("%w: %d contracts %d -> %d", ErrMath, n, entryQ8, exitQ8)
	}
	diff := mulw(w(int64(side)), subw(w(exitQ8), w(entryQ8)))
	if p.ContractType == market.Inverse {
		return floorw(mulw(w(n), wu(inverseScale), diff), mulw(w(entryQ8), w(exitQ8))).toInt64()
	}
	return floorw(mulw(w(n), diff, w(*p.QuantoMultiplierMsat)), w(q8)).toInt64()
}

// EntryAfterAdd is the average entry of a position of n1 contracts at p1
// after adding n2 at p2 on the same side. Inverse uses the contract-weighted
// harmonic mean (n1+n2)/(n1/p1 + n2/p2) = (n1+n2)*p1*p2/(n1*p2 + n2*p1),
// which keeps the position's msat value equal to the sum of its parts;
// quanto the arithmetic mean (n1*p1 + n2*p2)/(n1+n2). The result rounds
// against the position: up for a long, down for a short.
func EntryAfterAdd(p *market.Params, side Side, n1, p1, n2, p2 int64) (int64, error) {
	if n1 < 0 || n2 < 0 || n1+n2 <= 0 || p1 <= 0 || p2 <= 0 {
		return 0, fmt.Errorf("%w: add %d@%d to %d@%d", ErrMath, n2, p2, n1, p1)
	}
	var num, den wide
	if p.ContractType == market.Inverse {
		num = mulw(addw(w(n1), w(n2)), w(p1), w(p2))
		den = addw(mulw(w(n1), w(p2)), mulw(w(n2), w(p1)))
	} else {
		num = addw(mulw(w(n1), w(p1)), mulw(w(n2), w(p2)))
		den = addw(w(n1), w(n2))
	}
	if side == Long {
		return ceilw(num, den).toInt64()
	}
	return floorw(num, den).toInt64()
}

// rateOf is ceil(amountMsat * rateQ9 / 1e9) for non-negative inputs.
func rateOf(amountMsat, rateQ9 int64) (int64, error) {
	if amountMsat < 0 || rateQ9 < 0 {
		return 0, fmt.Errorf("%w: %d x %d", ErrMath, amountMsat, rateQ9)
	}
	if v, ok := mulDivCeil64(uint64(amountMsat), uint64(rateQ9), uint64(q9)); ok {
		return v, nil
	}
	return ceilw(mulw(w(amountMsat), w(rateQ9)), w(q9)).toInt64()
}

// mulDivCeil64 is ceil(a*b/d) in 128-bit arithmetic, without allocating:
// the hot path of notional and fee. ok is false when the quotient would
// not fit an int64 (the caller then takes math/big, which reports it); it
// gives exactly what the math/big path gives (tested against it).
func mulDivCeil64(a, b, d uint64) (int64, bool) {
	if d == 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return 0, false // the quotient needs more than 64 bits
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		q++
	}
	if q == 0 && r != 0 || q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// ErrLeverage refuses a margin rate that allows more than maxLeverage.
var ErrLeverage = errors.New("trade: leverage beyond maxLeverage")

// InitialMarginMsat is notional x imRateQ9 / 1e9, rounded up, where
// imRateQ9 is the order's margin rate (MarginRateQ9); the check that
// imRate >= 1/maxLeverage is repeated here so that a market whose rates
// were ever inconsistent refuses orders instead of granting more leverage
// than it advertises.
func InitialMarginMsat(notionalMsat, imRateQ9, maxLeverage int64) (int64, error) {
	if maxLeverage < 1 || imRateQ9 <= 0 || imRateQ9 > q9 || imRateQ9*maxLeverage < q9 {
		return 0, fmt.Errorf("%w: imRateQ9 %d, maxLeverage %d", ErrLeverage, imRateQ9, maxLeverage)
	}
	return rateOf(notionalMsat, imRateQ9)
}

// MarginRateQ9 is the initial margin rate of an order asking for leverage
// (0: the market's most, maxLeverage): the larger of the market's
// imRateQ9 and 1/leverage, rounded up. The caller has checked leverage
// against [1, maxLeverage].
func MarginRateQ9(p *market.Params, leverage int64) int64 {
	if leverage <= 0 {
		return p.IMRateQ9
	}
	return max(p.IMRateQ9, (q9+leverage-1)/leverage)
}

// TakerFeeMsat is notional x takerFeeQ9 / 1e9, rounded up.
func TakerFeeMsat(notionalMsat, takerFeeQ9 int64) (int64, error) {
	return rateOf(notionalMsat, takerFeeQ9)
}

// ImpactQ9 is the skew impact of a trade of q contracts on side, when the
// book's net open interest (long - short) is netBefore: ImpactAtCapQ9 times
// the book's net skew averaged over the trade, signed by the trade's side,
// as a fraction of the cap:
//
//	impact = ImpactAtCapQ9 * side*(netBefore + side*q/2) / capContracts
//	       = ImpactAtCapQ9 * (2*side*netBefore + q) / (2*capContracts)
//
// rounded up and never below zero. A trade that grows the skew pays more
// the further it pushes; one that reduces it pays nothing (a trade that
// crosses zero pays for the part beyond the midpoint). Every buy moves net
// OI up by q and every sell down, whether it opens or closes, so the rule
// needs no knowledge of the trader's position.
func ImpactQ9(side Side, q, netBefore, capContracts int64) (int64, error) {
	if q <= 0 || capContracts <= 0 {
		return 0, fmt.Errorf("%w: impact of %d contracts, cap %d", ErrMath, q, capContracts)
	}
	num := addw(mulw(w(2), w(int64(side)), w(netBefore)), w(q))
	if num.sign() <= 0 && !num.bad {
		return 0, nil
	}
	return ceilw(mulw(w(ImpactAtCapQ9), num), mulw(w(2), w(capContracts))).toInt64()
}

// ExecPriceQ8 is the fill price of a trade on side at the oracle mid with
// spreadQ9: buys at mid*(1+spread) rounded up to the tick, sells at
// mid*(1-spread) rounded down to the tick. A sell that rounds to zero or
// below is refused (ErrMath): there is no price to fill at.
func ExecPriceQ8(side Side, midQ8, spreadQ9, tickQ8 int64) (int64, error) {
	if midQ8 <= 0 || spreadQ9 < 0 || spreadQ9 >= q9 || tickQ8 <= 0 {
		return 0, fmt.Errorf("%w: mid %d spread %d tick %d", ErrMath, midQ8, spreadQ9, tickQ8)
	}
	tick := w(tickQ8)
	if side == Long {
		// ceil(mid*(1e9+s)/(1e9*tick)) * tick: one rounding, up.
		n := ceilw(mulw(w(midQ8), w(q9+spreadQ9)), mulw(w(q9), tick))
		return mulw(n, tick).toInt64()
	}
	n := floorw(mulw(w(midQ8), w(q9-spreadQ9)), mulw(w(q9), tick))
	v, err := mulw(n, tick).toInt64()
	if err == nil && v <= 0 {
		err = fmt.Errorf("%w: sell at mid %d rounds to no price", ErrMath, midQ8)
	}
	return v, err
}

// WithinSlippage reports whether execQ8 is no worse than midQ8 by more than
// maxSlippageQ9 as a fraction of mid: |exec - mid| * 1e9 <= max * mid on
// the trader's bad side (a buy above mid, a sell below). Exactly at the
// bound is within.
func WithinSlippage(side Side, execQ8, midQ8, maxSlippageQ9 int64) bool {
	worse := int64(side) * (execQ8 - midQ8)
	if worse <= 0 {
		return true
	}
	return cmpw(mulw(w(worse), w(q9)), mulw(w(maxSlippageQ9), w(midQ8))) <= 0
}

// ImpactMsat is the part of a trade's cost that the impact adds: the
// notional at mid times impactQ9, rounded down (it is a report of what
// the trader paid, not a charge; the charge is in the execution price).
func ImpactMsat(p *market.Params, q, midQ8, impactQ9 int64) (int64, error) {
	if impactQ9 == 0 {
		return 0, nil
	}
	num, den := valueExact(p, q, midQ8)
	return floorw(mulw(num, w(impactQ9)), mulw(den, w(q9))).toInt64()
}
