package market

import (
	"errors"
	"math"
	"math/bits"
)

// Fixed-point scales shared by the whole package.
const (
	// Q8 is the scale of prices: 1 dollar = 1e8.
	Q8 int64 = 100_000_000
	// Q9 is the scale of rates and fractions: 100% = 1e9.
	Q9 int64 = 1_000_000_000
)

// rounding names the direction of the one division in mulDiv.
type rounding int

const (
	roundFloor      rounding = iota // toward minus infinity
	roundCeil                       // toward plus infinity
	roundTowardZero                 // truncation, symmetric around zero
)

var errOverflow = errors.New("market: integer overflow")

// mulDiv returns a*b/d rounded as asked, computing the product in 128 bits so
// that it cannot overflow before the division. It fails when d is zero or the
// quotient does not fit in an int64.
func mulDiv(a, b, d int64, mode rounding) (int64, error) {
	if d == 0 {
		return 0, errors.New("market: division by zero")
	}
	neg := (a < 0) != (b < 0)
	if a == 0 || b == 0 {
		neg = false
	}
	if d < 0 {
		neg = !neg
	}
	hi, lo := bits.Mul64(absU64(a), absU64(b))
	ud := absU64(d)
	if hi >= ud {
		return 0, errOverflow
	}
	q, r := bits.Div64(hi, lo, ud)
	bumpMagnitude := false
	if r != 0 {
		switch mode {
		case roundFloor:
			bumpMagnitude = neg
		case roundCeil:
			bumpMagnitude = !neg
		}
	}
	if bumpMagnitude {
		q++
	}
	if q == 0 {
		return 0, nil
	}
	if neg {
		if q > uint64(math.MaxInt64)+1 {
			return 0, errOverflow
		}
		// q-1 fits in an int64 even when q is 2^63 (the result MinInt64).
		return -int64(q-1) - 1, nil
	}
	if q > math.MaxInt64 {
		return 0, errOverflow
	}
	return int64(q), nil
}

// absU64 returns |v| as an unsigned value; it is exact for math.MinInt64.
func absU64(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

// addChecked adds two int64 values and reports overflow instead of wrapping.
func addChecked(a, b int64) (int64, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, errOverflow
	}
	return s, nil
}

// floorTo aligns ts down to a multiple of step (step > 0), also for negative ts.
func floorTo(ts, step int64) int64 {
	r := ts % step
	if r < 0 {
		r += step
	}
	return ts - r
}

func clamp(v, lo, hi int64) int64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
