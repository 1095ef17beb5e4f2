package trade

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"

	"github.com/holiman/uint256"
)

// wide is a signed integer of up to 256 bits (sign and magnitude) for the
// contract math. Every formula in this package multiplies at most four
// factors of 64 bits or less, so its products fit; the operations still
// check, and an overflow (or a division by a non-positive number) makes
// the value invalid, which toInt64 reports as ErrMath, never a wrapped
// number. It lives on the stack: the order path allocates nothing for its
// arithmetic (math/big did, about half of a market order's allocations).
type wide struct {
	m   uint256.Int // magnitude
	neg bool        // sign; never set on zero
	bad bool        // overflowed somewhere up the expression
}

// w is v as a wide.
func w(v int64) wide {
	var x wide
	if v < 0 {
		x.neg = true
		x.m.SetUint64(uint64(^v) + 1) // |MinInt64| fits a uint64
	} else {
		x.m.SetUint64(uint64(v))
	}
	return x
}

// wu is an unsigned v as a wide.
func wu(v uint64) wide {
	var x wide
	x.m.SetUint64(v)
	return x
}

func (a wide) sign() int {
	switch {
	case a.m.IsZero():
		return 0
	case a.neg:
		return -1
	}
	return 1
}

func (a wide) negate() wide {
	if !a.m.IsZero() {
		a.neg = !a.neg
	}
	return a
}

// mulw is the product of its factors.
func mulw(xs ...wide) wide {
	p := wu(1)
	for i := range xs {
		var over bool
		p.m, over = mulStep(&p.m, &xs[i].m)
		p.bad = p.bad || xs[i].bad || over
		p.neg = p.neg != xs[i].neg
	}
	if p.m.IsZero() {
		p.neg = false
	}
	return p
}

// mulStep is a*b and whether it overflowed 256 bits. The contract math's
// factors are 64-bit numbers and its running products rarely pass 128
// bits: that case takes two 64-bit multiplications instead of
// MulOverflow's full 256x256 product (a funding boundary makes a dozen
// per position). TestMulStepIsMulOverflow holds it to MulOverflow.
func mulStep(a, b *uint256.Int) (uint256.Int, bool) {
	if a[2]|a[3]|b[1]|b[2]|b[3] != 0 {
		if b[2]|b[3]|a[1]|a[2]|a[3] != 0 {
			var z uint256.Int
			_, over := z.MulOverflow(a, b)
			return z, over
		}
		a, b = b, a
	}
	// a < 2^128, b < 2^64: the product is below 2^192.
	h0, l0 := bits.Mul64(a[0], b[0])
	h1, l1 := bits.Mul64(a[1], b[0])
	mid, c := bits.Add64(h0, l1, 0)
	return uint256.Int{l0, mid, h1 + c, 0}, false
}

// addw is a + b.
func addw(a, b wide) wide {
	s := wide{bad: a.bad || b.bad}
	if a.neg == b.neg {
		_, over := s.m.AddOverflow(&a.m, &b.m)
		s.bad, s.neg = s.bad || over, a.neg
	} else if a.m.Cmp(&b.m) >= 0 {
		s.m.Sub(&a.m, &b.m)
		s.neg = a.neg
	} else {
		s.m.Sub(&b.m, &a.m)
		s.neg = b.neg
	}
	if s.m.IsZero() {
		s.neg = false
	}
	return s
}

// subw is a - b.
func subw(a, b wide) wide { return addw(a, b.negate()) }

// cmpw compares a and b (-1, 0, +1); invalid values compare as their bits.
func cmpw(a, b wide) int {
	sa, sb := a.sign(), b.sign()
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	c := a.m.Cmp(&b.m)
	if sa < 0 {
		return -c
	}
	return c
}

// floorw is num/den rounded toward minus infinity (den zero: invalid).
func floorw(num, den wide) wide {
	q := wide{bad: num.bad || den.bad || den.sign() == 0}
	if q.bad {
		return q
	}
	if den.neg {
		num, den = num.negate(), den.negate()
	}
	var r uint256.Int
	q.m.DivMod(&num.m, &den.m, &r)
	if num.neg {
		if !r.IsZero() {
			q.m.AddUint64(&q.m, 1)
		}
		q.neg = !q.m.IsZero()
	}
	return q
}

// ceilw is num/den rounded toward plus infinity (den zero: invalid).
func ceilw(num, den wide) wide { return floorw(num.negate(), den).negate() }

// toInt64 is a as an int64, or ErrMath when it is invalid or out of range.
func (a wide) toInt64() (int64, error) {
	if a.bad || !a.m.IsUint64() {
		return 0, fmt.Errorf("%w: %s", ErrMath, a.describe())
	}
	u := a.m.Uint64()
	switch {
	case !a.neg && u <= math.MaxInt64:
		return int64(u), nil
	case a.neg && u <= 1<<63:
		return int64(-u), nil // -(1<<63) wraps to MinInt64, as wanted
	}
	return 0, fmt.Errorf("%w: %s", ErrMath, a.describe())
}

// big is a as a math/big integer, for the rare paths that work on exact
// rationals (the partial liquidation's sizing).
func (a wide) big() *big.Int {
	b := a.m.ToBig()
	if a.neg {
		b.Neg(b)
	}
	return b
}

func (a wide) describe() string {
	if a.bad {
		return "overflow"
	}
	return a.big().String()
}
