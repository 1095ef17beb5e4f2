package usdx

import (
	"math"
	"math/big"
)

// inverseScale: one 1-dollar contract at price P (q8) is worth 1e19/P msat.
var bigInverse = new(big.Int).SetUint64(10_000_000_000_000_000_000)

// mulDivFloor is a*b/c rounded down (c > 0; a, b >= 0), saturating at
// MaxInt64.
func mulDivFloor(a, b, c int64) int64 {
	r := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	r.Quo(r, big.NewInt(c))
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}

// mulDivCeil is a*b/c rounded up (c > 0; a, b >= 0), saturating.
func mulDivCeil(a, b, c int64) int64 {
	r := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	r.Add(r, big.NewInt(c-1))
	r.Quo(r, big.NewInt(c))
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}

// ValueMsat is the value of usdx dollars at markQ8 in msat, rounded down:
// usdx x 1e19 / mark.
func ValueMsat(usdx, markQ8 int64) int64 {
	if markQ8 <= 0 || usdx <= 0 {
		return 0
	}
	r := new(big.Int).Mul(big.NewInt(usdx), bigInverse)
	r.Quo(r, big.NewInt(markQ8))
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}

// usdOfMsatFloor is floor(msat x mark / 1e19).
func usdOfMsatFloor(msat, markQ8 int64) int64 {
	r := new(big.Int).Mul(big.NewInt(msat), big.NewInt(markQ8))
	r.Quo(r, bigInverse)
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}

// satAdd is a + b for non-negative operands, at most math.MaxInt64 (the
// overflow answers of mulDivFloor and usdOfMsatFloor stay saturated).
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// DynFeeRateQ9 is the dynamic fee rate at utilisation uQ9 on the curve:
// linear between knots, rounded down; below the first knot its y, beyond
// the last knot the last y. An empty curve is 0.
func DynFeeRateQ9(curve []CurvePoint, uQ9 int64) int64 {
	if len(curve) == 0 {
		return 0
	}
	if uQ9 <= curve[0].XQ9 {
		return curve[0].YQ9
	}
	for i := 1; i < len(curve); i++ {
		a, b := curve[i-1], curve[i]
		if uQ9 <= b.XQ9 {
			if b.XQ9 == a.XQ9 {
				return b.YQ9
			}
			// y = ya + (yb-ya)(u-xa)/(xb-xa), floor (yb-ya may be negative:
			// big.Int Div is Euclidean, the floor for a positive divisor).
			num := new(big.Int).Mul(big.NewInt(b.YQ9-a.YQ9), big.NewInt(uQ9-a.XQ9))
			num.Div(num, big.NewInt(b.XQ9-a.XQ9))
			return a.YQ9 + num.Int64()
		}
	}
	return curve[len(curve)-1].YQ9
}

// SharePriceQ9 is the staking pool's USDx per sUSDx in q9, rounded down:
// staked x 1e9 / susdxSupply, and 1e9 while no sUSDx exists.
func SharePriceQ9(staked, susdxSupply int64) int64 {
	if susdxSupply <= 0 {
		return Q9
	}
	return mulDivFloor(staked, Q9, susdxSupply)
}

// holeShare is the part of a hole of hole msat in the hedge's margin
// (margin msat for n contracts) that closing q of them carries out: what
// they would release from a whole margin less what they release from this
// one, with the trading book's rounding (floor(margin x q / n), all of it
// when q == n). The rest of the hole stays with the contracts left.
func holeShare(margin, hole, q, n int64) int64 {
	if hole <= 0 || q <= 0 || n <= 0 {
		return 0
	}
	if q >= n {
		return hole
	}
	return mulDivFloor(satAdd(margin, hole), q, n) - mulDivFloor(margin, q, n)
}

// dynFeeCeil is the dynamic fee on notionalMsat at utilisation used /
// hardCap (hardCap > 0), exactly: the curve's rate there (linear between
// knots, as DynFeeRateQ9, but neither the utilisation nor the rate
// rounded) x notional / 1e9, rounded up once, in the venue's favour.
func dynFeeCeil(notionalMsat int64, curve []CurvePoint, used, hardCap int64) int64 {
	if len(curve) == 0 || notionalMsat <= 0 {
		return 0
	}
	// u x 1e9 = used x 1e9 / hardCap: a knot's x is passed when
	// used x 1e9 <= x x hardCap.
	hc := big.NewInt(hardCap)
	u := new(big.Int).Mul(big.NewInt(used), big.NewInt(Q9))
	within := func(x int64) bool { return u.Cmp(new(big.Int).Mul(big.NewInt(x), hc)) <= 0 }
	num, den := big.NewInt(curve[len(curve)-1].YQ9), big.NewInt(1) // the rate in q9 is num / den
	if within(curve[0].XQ9) {
		num = big.NewInt(curve[0].YQ9)
	} else {
		for i := 1; i < len(curve); i++ {
			a, b := curve[i-1], curve[i]
			if !within(b.XQ9) {
				continue
			}
			if b.XQ9 == a.XQ9 {
				num = big.NewInt(b.YQ9)
				break
			}
			// ya + (yb-ya)(u - xa)/(xb-xa) = (ya(xb-xa)hc + (yb-ya)(used x 1e9 - xa hc)) / ((xb-xa)hc)
			dx := big.NewInt(b.XQ9 - a.XQ9)
			den = new(big.Int).Mul(dx, hc)
			num = new(big.Int).Mul(big.NewInt(a.YQ9), den)
			rise := new(big.Int).Sub(u, new(big.Int).Mul(big.NewInt(a.XQ9), hc))
			num.Add(num, rise.Mul(rise, big.NewInt(b.YQ9-a.YQ9)))
			break
		}
	}
	// ceil(notional x num / (den x 1e9)); num >= 0 (the rate lies between two knots' y >= 0).
	r := new(big.Int).Mul(big.NewInt(notionalMsat), num)
	d := new(big.Int).Mul(den, big.NewInt(Q9))
	r.Add(r, d).Sub(r, big.NewInt(1)).Quo(r, d)
	if !r.IsInt64() {
		return math.MaxInt64
	}
	return r.Int64()
}
