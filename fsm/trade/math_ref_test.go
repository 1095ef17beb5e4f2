package trade

// The math/big implementations the 256-bit contract math replaced, kept as
// the reference the fast path is tested against (math_ref_test.go's
// property tests). They are the formulas of math.go and risk.go word for
// word, on arbitrary-precision integers.

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

var (
	bigInverse = new(big.Int).SetUint64(inverseScale)
	bigQ8      = big.NewInt(q8)
	bigQ9      = big.NewInt(q9)
)

func refBi(v int64) *big.Int { return big.NewInt(v) }

func refMul(xs ...*big.Int) *big.Int {
	p := big.NewInt(1)
	for _, x := range xs {
		p.Mul(p, x)
	}
	return p
}

func refDivFloor(num, den *big.Int) *big.Int { return new(big.Int).Div(num, den) }

func refDivCeil(num, den *big.Int) *big.Int {
	neg := new(big.Int).Neg(num)
	q := new(big.Int).Div(neg, den)
	return q.Neg(q)
}

func refToInt64(x *big.Int) (int64, error) {
	if !x.IsInt64() {
		return 0, fmt.Errorf("%w: %s", ErrMath, x)
	}
	return x.Int64(), nil
}

func refValueExact(p *market.Params, n, priceQ8 int64) (num, den *big.Int) {
	if p.ContractType == market.Inverse {
		return refMul(refBi(n), bigInverse), refBi(priceQ8)
	}
	return refMul(refBi(n), refBi(priceQ8), refBi(*p.QuantoMultiplierMsat)), bigQ8
}

func refNotionalMsat(p *market.Params, n, priceQ8 int64) (int64, error) {
	if n < 0 || priceQ8 <= 0 {
		return 0, fmt.Errorf("%w: %d contracts at %d", ErrMath, n, priceQ8)
	}
	num, den := refValueExact(p, n, priceQ8)
	return refToInt64(refDivCeil(num, den))
}

func refPnLMsat(p *market.Params, side Side, n, entryQ8, exitQ8 int64) (int64, error) {
	if n < 0 || entryQ8 <= 0 || exitQ8 <= 0 {
		return 0, fmt.Errorf("%w: %d contracts %d -> %d", ErrMath, n, entryQ8, exitQ8)
	}
	diff := refBi(int64(side) * (exitQ8 - entryQ8))
	if p.ContractType == market.Inverse {
		return refToInt64(refDivFloor(refMul(refBi(n), bigInverse, diff), refMul(refBi(entryQ8), refBi(exitQ8))))
	}
	return refToInt64(refDivFloor(refMul(refBi(n), diff, refBi(*p.QuantoMultiplierMsat)), bigQ8))
}

func refEntryAfterAdd(p *market.Params, side Side, n1, p1, n2, p2 int64) (int64, error) {
	if n1 < 0 || n2 < 0 || n1+n2 <= 0 || p1 <= 0 || p2 <= 0 {
		return 0, fmt.Errorf("%w: add %d@%d to %d@%d", ErrMath, n2, p2, n1, p1)
	}
	var num, den *big.Int
	if p.ContractType == market.Inverse {
		num = refMul(refBi(n1+n2), refBi(p1), refBi(p2))
		den = new(big.Int).Add(refMul(refBi(n1), refBi(p2)), refMul(refBi(n2), refBi(p1)))
	} else {
		num = new(big.Int).Add(refMul(refBi(n1), refBi(p1)), refMul(refBi(n2), refBi(p2)))
		den = refBi(n1 + n2)
	}
	if side == Long {
		return refToInt64(refDivCeil(num, den))
	}
	return refToInt64(refDivFloor(num, den))
}

func refRateOf(amountMsat, rateQ9 int64) (int64, error) {
	if amountMsat < 0 || rateQ9 < 0 {
		return 0, fmt.Errorf("%w: %d x %d", ErrMath, amountMsat, rateQ9)
	}
	return refToInt64(refDivCeil(refMul(refBi(amountMsat), refBi(rateQ9)), bigQ9))
}

func refImpactQ9(side Side, q, netBefore, capContracts int64) (int64, error) {
	if q <= 0 || capContracts <= 0 {
		return 0, fmt.Errorf("%w: impact of %d contracts, cap %d", ErrMath, q, capContracts)
	}
	num := new(big.Int).Add(refMul(refBi(2), refBi(int64(side)), refBi(netBefore)), refBi(q))
	if num.Sign() <= 0 {
		return 0, nil
	}
	return refToInt64(refDivCeil(refMul(refBi(ImpactAtCapQ9), num), refMul(refBi(2), refBi(capContracts))))
}

func refExecPriceQ8(side Side, midQ8, spreadQ9, tickQ8 int64) (int64, error) {
	if midQ8 <= 0 || spreadQ9 < 0 || spreadQ9 >= q9 || tickQ8 <= 0 {
		return 0, fmt.Errorf("%w: mid %d spread %d tick %d", ErrMath, midQ8, spreadQ9, tickQ8)
	}
	tick := refBi(tickQ8)
	if side == Long {
		// ceil(mid*(1e9+s)/(1e9*tick)) * tick: one rounding, up.
		n := refDivCeil(refMul(refBi(midQ8), refBi(q9+spreadQ9)), refMul(bigQ9, tick))
		return refToInt64(n.Mul(n, tick))
	}
	n := refDivFloor(refMul(refBi(midQ8), refBi(q9-spreadQ9)), refMul(bigQ9, tick))
	v, err := refToInt64(n.Mul(n, tick))
	if err == nil && v <= 0 {
		err = fmt.Errorf("%w: sell at mid %d rounds to no price", ErrMath, midQ8)
	}
	return v, err
}

func refWithinSlippage(side Side, execQ8, midQ8, maxSlippageQ9 int64) bool {
	worse := int64(side) * (execQ8 - midQ8)
	if worse <= 0 {
		return true
	}
	return refMul(refBi(worse), bigQ9).Cmp(refMul(refBi(maxSlippageQ9), refBi(midQ8))) <= 0
}

func refImpactMsat(p *market.Params, q, midQ8, impactQ9 int64) (int64, error) {
	if impactQ9 == 0 {
		return 0, nil
	}
	num, den := refValueExact(p, q, midQ8)
	return refToInt64(refDivFloor(refMul(num, refBi(impactQ9)), refMul(den, bigQ9)))
}

func refLiqThreshold(p *market.Params, pos Position) (num, den *big.Int, ok bool) {
	n, e, m, mm := refBi(pos.Contracts), refBi(pos.EntryQ8), refBi(pos.MarginMsat), refBi(p.MMRateQ9)
	if p.ContractType == market.Inverse {
		nv := refMul(n, bigInverse) // n*1e19
		if pos.Side == Long {
			return refMul(nv, e, new(big.Int).Add(bigQ9, mm)), refMul(bigQ9, new(big.Int).Add(refMul(m, e), nv)), true
		}
		d := new(big.Int).Sub(nv, refMul(m, e))
		if d.Sign() <= 0 {
			return nil, nil, false
		}
		return refMul(nv, e, new(big.Int).Sub(bigQ9, mm)), refMul(bigQ9, d), true
	}
	k := refBi(*p.QuantoMultiplierMsat)
	nek, mq8 := refMul(n, e, k), refMul(m, bigQ8)
	if pos.Side == Long {
		d := new(big.Int).Sub(nek, mq8)
		if d.Sign() <= 0 {
			return nil, nil, false
		}
		return refMul(bigQ9, d), refMul(n, k, new(big.Int).Sub(bigQ9, mm)), true
	}
	return refMul(bigQ9, new(big.Int).Add(nek, mq8)), refMul(n, k, new(big.Int).Add(bigQ9, mm)), true
}

func refLiqLevel(p *market.Params, pos Position) (levelQ8 int64, dir market.Direction, ok bool) {
	num, den, ok := refLiqThreshold(p, pos)
	if !ok {
		return 0, 0, false
	}
	if pos.Side == Long {
		l := refDivFloor(num, den)
		if l.Sign() <= 0 {
			return 0, 0, false
		}
		if !l.IsInt64() || l.Int64() > market.PriceQ8Max {
			return market.PriceQ8Max, market.Falling, true
		}
		return l.Int64(), market.Falling, true
	}
	l := refDivCeil(num, den)
	if !l.IsInt64() || l.Int64() > market.PriceQ8Max {
		return 0, 0, false
	}
	return max(l.Int64(), 1), market.Rising, true
}

func refUnderMaintenance(p *market.Params, pos Position, midQ8 int64) bool {
	num, den, ok := refLiqThreshold(p, pos)
	if !ok {
		return false
	}
	c := refMul(refBi(midQ8), den).Cmp(num)
	if pos.Side == Long {
		return c <= 0
	}
	return c >= 0
}

// The 256-bit contract math answers exactly what the math/big formulas do:
// the same value, or an error where they give one, on both contract types,
// over edge values and 100,000 random draws per function.
func TestWideMathMatchesBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	edges := []int64{0, 1, 2, 3, 7, 99, 1e8, 1e9, 97_000 * q8, 1e13, market.PriceQ8Max, 1<<62 + 1, math.MaxInt64}
	pick := func() int64 {
		if rng.IntN(4) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return rng.Int64N(math.MaxInt64) >> rng.IntN(63)
	}
	signed := func() int64 {
		v := pick()
		if rng.IntN(2) == 0 {
			return -v
		}
		return v
	}
	side := func() Side {
		if rng.IntN(2) == 0 {
			return Long
		}
		return Short
	}
	same := func(what string, got int64, gerr error, want int64, werr error) {
		t.Helper()
		if (gerr != nil) != (werr != nil) || (gerr == nil && got != want) {
			t.Fatalf("%s: wide %d (%v), big %d (%v)", what, got, gerr, want, werr)
		}
	}
	for _, p := range []*market.Params{inverseParams(), quantoParams()} {
		for range 100_000 {
			n, a, b, c := pick(), pick(), pick(), pick()
			s := side()
			g, ge := NotionalMsat(p, n, a)
			r, re := refNotionalMsat(p, n, a)
			same(fmt.Sprintf("notional %d@%d", n, a), g, ge, r, re)
			g, ge = PnLMsat(p, s, n, a, b)
			r, re = refPnLMsat(p, s, n, a, b)
			same(fmt.Sprintf("pnl %d %d %d->%d", s, n, a, b), g, ge, r, re)
			n2 := pick()
			g, ge = EntryAfterAdd(p, s, n, a, n2, b)
			r, re = refEntryAfterAdd(p, s, n, a, n2, b)
			same(fmt.Sprintf("entry %d@%d + %d@%d", n, a, n2, b), g, ge, r, re)
			g, ge = ImpactMsat(p, n, a|1, c) // its callers pass a live mid
			r, re = refImpactMsat(p, n, a|1, c)
			same(fmt.Sprintf("impact msat %d@%d x %d", n, a, c), g, ge, r, re)

			pos := Position{Side: s, Contracts: n | 1, EntryQ8: a | 1, MarginMsat: signed()} // a live position
			if rng.IntN(2) == 0 {
				pos.MarginMsat = b // mostly positive, like the book's
			}
			lv, ld, lok := LiqLevel(p, pos)
			rv, rd, rok := refLiqLevel(p, pos)
			if lv != rv || ld != rd || lok != rok {
				t.Fatalf("liq level %+v: wide %d %v %v, big %d %v %v", pos, lv, ld, lok, rv, rd, rok)
			}
			if mid := c%market.PriceQ8Max + 1; UnderMaintenance(p, pos, mid) != refUnderMaintenance(p, pos, mid) {
				t.Fatalf("under maintenance %+v at %d differs", pos, mid)
			}
		}
	}
	for range 100_000 {
		a, b, c, d := pick(), pick(), pick(), pick()
		s := side()
		g, ge := rateOf(a, b)
		r, re := refRateOf(a, b)
		same(fmt.Sprintf("rate %d x %d", a, b), g, ge, r, re)
		net := signed()
		g, ge = ImpactQ9(s, a, net, b)
		r, re = refImpactQ9(s, a, net, b)
		same(fmt.Sprintf("impact %d %d net %d cap %d", s, a, net, b), g, ge, r, re)
		spread := c % q9
		g, ge = ExecPriceQ8(s, a, spread, d%(1e12)+1)
		r, re = refExecPriceQ8(s, a, spread, d%(1e12)+1)
		same(fmt.Sprintf("exec %d mid %d spread %d tick %d", s, a, spread, d%(1e12)+1), g, ge, r, re)
		if WithinSlippage(s, a, b, c) != refWithinSlippage(s, a, b, c) {
			t.Fatalf("slippage %d %d %d %d differs", s, a, b, c)
		}
	}
}

// The arithmetic of the order path allocates nothing.
func TestWideMathDoesNotAllocate(t *testing.T) {
	p := inverseParams()
	pos := Position{Side: Long, Contracts: 1_000, EntryQ8: 97_000 * q8, MarginMsat: 10_000_000}
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = PnLMsat(p, Short, 1_000, 97_000*q8, 96_000*q8)
		_, _ = EntryAfterAdd(p, Long, 1_000, 97_000*q8, 500, 98_000*q8)
		_, _ = ExecPriceQ8(Long, 97_000*q8, 500_000, 50_000_000)
		_, _ = ImpactQ9(Long, 1_000, 5_000, 1_000_000)
		_, _ = ImpactMsat(p, 1_000, 97_000*q8, 1_000)
		_, _, _ = LiqLevel(p, pos)
		_ = UnderMaintenance(p, pos, 90_000*q8)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run of the contract math", allocs)
	}
}
