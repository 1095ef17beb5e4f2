package trade

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

// The math/big references of the formulas TestWideMathMatchesBig does not
// draw (funding's entry charge, the liquidation penalty, the margin a
// partial close releases), word for word like those of math_ref_test.go.

func refEntryCharged(p *market.Params, side Side, n, entryQ8, dMsat int64) int64 {
	if n <= 0 || dMsat <= 0 {
		return entryQ8
	}
	var e *big.Int
	if p.ContractType == market.Inverse {
		nS := refMul(refBi(n), bigInverse)
		num := refMul(refBi(entryQ8), nS)
		if side == Long {
			den := new(big.Int).Sub(nS, refMul(refBi(dMsat), refBi(entryQ8)))
			if den.Sign() <= 0 {
				return market.PriceQ8Max
			}
			e = refDivCeil(num, den)
		} else {
			e = refDivFloor(num, new(big.Int).Add(nS, refMul(refBi(dMsat), refBi(entryQ8))))
		}
	} else {
		step := refDivCeil(refMul(refBi(dMsat), bigQ8), refMul(refBi(n), refBi(*p.QuantoMultiplierMsat)))
		if side == Long {
			e = new(big.Int).Add(refBi(entryQ8), step)
		} else {
			e = new(big.Int).Sub(refBi(entryQ8), step)
		}
	}
	switch {
	case !e.IsInt64() && e.Sign() > 0 || e.IsInt64() && e.Int64() > market.PriceQ8Max:
		if side == Long {
			return market.PriceQ8Max
		}
		return 1
	case e.Cmp(big.NewInt(1)) < 0:
		return 1
	}
	return e.Int64()
}

// refPenalty is ceil(notional x mmRateQ9 / (2 x 1e9)) of the notional
// rounded up; ok false where the notional does not fit (the engine never
// gets there: the print guard bounds it).
func refPenalty(p *market.Params, q, execQ8 int64) (int64, bool) {
	notional, err := refNotionalMsat(p, q, execQ8)
	if err != nil {
		return 0, false
	}
	v, err := refToInt64(refDivCeil(refMul(refBi(notional), refBi(p.MMRateQ9)), refMul(bigQ9, refBi(LiquidationPenaltyDivisor))))
	return v, err == nil
}

// fuzzParams is a market of either contract type with the fuzzer's
// multiplier and maintenance rate, inside the bounds Params.Validate sets.
func fuzzParams(quanto bool, mult, mm int64) *market.Params {
	p := inverseParams()
	if quanto {
		p = quantoParams()
		m := 1 + int64(uint64(mult)%uint64(market.QuantoMultiplierMsatMax))
		p.QuantoMultiplierMsat = &m
	}
	p.MMRateQ9 = 1 + int64(uint64(mm)%uint64(market.Q9-1))
	return p
}

// FuzzContractMathMatchesBig: on any inputs the fuzzer finds, every
// contract formula of the 256-bit fast path answers what math/big does
// (the same value, or an error on both), for both contract types and any
// multiplier in [1, QuantoMultiplierMsatMax], and the entry charge takes
// at least what it is asked to at every exit within the price range.
func FuzzContractMathMatchesBig(f *testing.F) {
	seeds := []struct {
		quanto            bool
		mult, mm          int64
		n, a, b, c, n2, d int64
		short             bool
	}{
		{false, 0, 5_000_000, 1, 1, 2, 1, 1, 1, false},
		{true, 299, 5_000_000, 10, 340_000_000_000, 350_000_000_000, 500_000, 5, 1_000, true},
		{true, math.MaxInt64, 5_000_001, 1_000_000_000_000, market.PriceQ8Max, 1, 99, 1_000_000_000_000, math.MaxInt64, false},
		{true, 0, 1, 10_000_000_000_000, 1, market.PriceQ8Max, 1 << 40, 1, 1 << 62, true},
		{false, 0, 999_999_999, 10_000_000_000_000, 1, market.PriceQ8Max, 3, 10_000_000_000_000, 7, true},
		{false, 0, 5_000_000, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, false},
		{true, 1, 5_000_000, 1, 50_000_000, 1, 0, 1, 1, true},
	}
	for _, s := range seeds {
		f.Add(s.quanto, s.mult, s.mm, s.n, s.a, s.b, s.c, s.n2, s.d, s.short)
	}
	f.Fuzz(func(t *testing.T, quanto bool, mult, mm, n, a, b, c, n2, d int64, short bool) {
		p := fuzzParams(quanto, mult, mm)
		s := Long
		if short {
			s = Short
		}
		same := func(what string, got int64, gerr error, want int64, werr error) {
			t.Helper()
			if (gerr != nil) != (werr != nil) || (gerr == nil && got != want) {
				t.Fatalf("%s: wide %d (%v), big %d (%v)", what, got, gerr, want, werr)
			}
		}
		g, ge := NotionalMsat(p, n, a)
		r, re := refNotionalMsat(p, n, a)
		same("notional", g, ge, r, re)
		g, ge = PnLMsat(p, s, n, a, b)
		r, re = refPnLMsat(p, s, n, a, b)
		same("pnl", g, ge, r, re)
		if ge == nil {
			// The two sides of one trade never pay out more than they take.
			o, oe := PnLMsat(p, -s, n, a, b)
			if oe == nil && g+o != 0 && g+o != -1 {
				t.Fatalf("pnl %d and %d of the two sides sum to %d", g, o, g+o)
			}
		}
		g, ge = EntryAfterAdd(p, s, n, a, n2, b)
		r, re = refEntryAfterAdd(p, s, n, a, n2, b)
		same("entry after add", g, ge, r, re)
		if ge == nil && n > 0 && n2 > 0 && (g < min(a, b) || g > max(a, b)) {
			t.Fatalf("average entry %d outside [%d, %d]", g, min(a, b), max(a, b))
		}
		live := a&math.MaxInt64 | 1 // its callers pass a live mid
		g, ge = ImpactMsat(p, n, live, c)
		r, re = refImpactMsat(p, n, live, c)
		same("impact msat", g, ge, r, re)
		g, ge = rateOf(n, c)
		r, re = refRateOf(n, c)
		same("rate of", g, ge, r, re)
		g, ge = ImpactQ9(s, n, c, d)
		r, re = refImpactQ9(s, n, c, d)
		same("impact q9", g, ge, r, re)
		spread, tick := int64(uint64(c)%uint64(q9)), 1+int64(uint64(d)%uint64(market.PriceQ8Max))
		g, ge = ExecPriceQ8(s, a, spread, tick)
		r, re = refExecPriceQ8(s, a, spread, tick)
		same("exec price", g, ge, r, re)
		if WithinSlippage(s, a, b, c) != refWithinSlippage(s, a, b, c) {
			t.Fatal("within slippage differs")
		}

		// A live position: contracts and entry positive, margin anything.
		pos := Position{Side: s, Contracts: n&math.MaxInt64 | 1, EntryQ8: a&math.MaxInt64 | 1, MarginMsat: d}
		lv, ld, lok := LiqLevel(p, pos)
		rv, rd, rok := refLiqLevel(p, pos)
		if lv != rv || ld != rd || lok != rok {
			t.Fatalf("liq level %+v: wide %d %v %v, big %d %v %v", pos, lv, ld, lok, rv, rd, rok)
		}
		mid := 1 + int64(uint64(b)%uint64(market.PriceQ8Max))
		if UnderMaintenance(p, pos, mid) != refUnderMaintenance(p, pos, mid) {
			t.Fatalf("under maintenance %+v at %d differs", pos, mid)
		}
		if lok {
			// The index level is exact: due at the level, not one step before.
			if !UnderMaintenance(p, pos, lv) {
				t.Fatalf("%+v is not under maintenance at its own level %d", pos, lv)
			}
			next := lv + 1
			if ld == market.Rising {
				next = lv - 1
			}
			if next >= 1 && next <= market.PriceQ8Max && lv != market.PriceQ8Max && lv != 1 && UnderMaintenance(p, pos, next) {
				t.Fatalf("%+v is under maintenance at %d, before its level %d", pos, next, lv)
			}
		}

		// Funding's entry charge, for a position the book could hold.
		en, ee := pos.Contracts%(10*market.OrderContractsCeiling)+1, 1+pos.EntryQ8%market.PriceQ8Max
		charge := d & math.MaxInt64 >> (uint64(c) % 64)
		got := EntryCharged(p, s, en, ee, charge)
		if want := refEntryCharged(p, s, en, ee, charge); got != want {
			t.Fatalf("entry charged %d %d@%d by %d: wide %d, big %d", s, en, ee, charge, got, want)
		}
		if got != market.PriceQ8Max && got != 1 {
			before, e1 := refPnLMsat(p, s, en, ee, mid)
			after, e2 := refPnLMsat(p, s, en, got, mid)
			taken := new(big.Int).Sub(refBi(before), refBi(after))
			if e1 == nil && e2 == nil && taken.Cmp(refBi(charge-1)) < 0 {
				// Each PnL is floored once: the charge may show 1 msat short.
				t.Fatalf("entry %d -> %d takes %s msat at %d, charged %d", ee, got, taken, mid, charge)
			}
		}

		// The liquidation penalty and the margin a partial close releases.
		q := pos.Contracts%(10*market.OrderContractsCeiling) + 1
		exec := 1 + pos.EntryQ8%market.PriceQ8Max
		if want, ok := refPenalty(p, q, exec); ok {
			if got := liquidationPenalty(p, q, exec, LevelExactPenalty); got != want {
				t.Fatalf("penalty of %d at %d: wide %d, big %d", q, exec, got, want)
			}
		}
		if m := d & math.MaxInt64; n > 0 && n2 > 0 {
			closed, held := min(n, n2), max(n, n2)
			got, err := floorw(mulw(w(m), w(closed)), w(held)).toInt64()
			want := refDivFloor(refMul(refBi(m), refBi(closed)), refBi(held))
			if err != nil || got != want.Int64() || got > m {
				t.Fatalf("released margin of %d of %d from %d: wide %d (%v), big %s", closed, held, m, got, err, want)
			}
		}
	})
}

// A position taken from flat back to flat through random adds, partial
// closes and flips (at random prices, both contract types, multipliers
// from 1 msat to QuantoMultiplierMsatMax, sizes up to the order ceiling)
// never realises more than the exact value of its fills: for inverse each
// buy of q at P is worth q*1e19/P and each sell minus that; for quanto a
// buy costs q*P*mult/1e8. Averaging, partial-close and flip rounding all
// fall on the venue's side.
func TestRoundTripNeverBeatsItsExactValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 5_000; iter++ {
		quanto := rng.IntN(2) == 0
		p := fuzzParams(quanto, []int64{0, 299, 6, market.QuantoMultiplierMsatMax - 1}[rng.IntN(4)], 5_000_000)
		p.TakerFeeQ9, p.IMRateQ9, p.MaxLeverage, p.MaxOrderContracts = 0, 1_000_000, 1000, market.OrderContractsCeiling
		m := &market.MarketState{Params: *p}
		base := []int64{1, 100, 7_777, market.Q8, 3_400 * market.Q8, market.PriceQ8Max / 3}[rng.IntN(6)]
		pos, realized, exact := Position{}, int64(0), new(big.Rat)
		steps := rng.IntN(8) + 2
		for s := 0; s < steps || pos.Contracts != 0; s++ {
			side, q := Long, max(1, rng.Int64N(market.OrderContractsCeiling)>>rng.IntN(40))
			if rng.IntN(2) == 0 {
				side = Short
			}
			if s >= steps {
				side, q = -pos.Side, pos.Contracts
			}
			px := max(1, base+rng.Int64N(base/5+1)-base/10)
			pl, ref := PlanFill(m, pos, side, q, Quote{MidQ8: px, ExecQ8: px}, 1<<62, 0)
			if ref != nil {
				if s >= steps { // a whole too large to price in one order
					exact = nil
					break
				}
				continue
			}
			realized += pl.RealizedPnlMsat
			num, den := valueExact(p, q, px)
			v := new(big.Rat).SetFrac(num.big(), den.big())
			if (side == Long) == quanto {
				v.Neg(v)
			}
			exact.Add(exact, v)
			pos = pl.After
		}
		if exact != nil && new(big.Rat).SetInt64(realized).Cmp(exact) > 0 {
			t.Fatalf("iteration %d (quanto %v): realised %d, the fills are worth %s", iter, quanto, realized, exact.FloatString(3))
		}
	}
}
