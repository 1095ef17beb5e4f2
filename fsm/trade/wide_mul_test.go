package trade

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/holiman/uint256"
)

// TestMulStepIsMulOverflow compares mulStep's short path with the full
// 256-bit product on random operands of every width (0 to 4 limbs, limbs
// at their edges), both ways round. It fails if the short path is taken
// for operands whose product it cannot hold, or rounds a carry wrong.
func TestMulStepIsMulOverflow(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	limb := func() uint64 {
		switch rng.IntN(5) {
		case 0:
			return 0
		case 1:
			return math.MaxUint64
		case 2:
			return 1 + rng.Uint64N(1<<20)
		}
		return rng.Uint64()
	}
	operand := func() uint256.Int {
		var z uint256.Int
		for i := range rng.IntN(5) {
			z[i] = limb()
		}
		return z
	}
	short := 0
	for range 200_000 {
		a, b := operand(), operand()
		var want uint256.Int
		_, wantOver := want.MulOverflow(&a, &b)
		got, over := mulStep(&a, &b)
		if got != want || over != wantOver {
			t.Fatalf("%v * %v = %v (overflow %v), want %v (%v)", a, b, got, over, want, wantOver)
		}
		if (a[2]|a[3]|b[1]|b[2]|b[3]) == 0 || (b[2]|b[3]|a[1]|a[2]|a[3]) == 0 {
			short++
		}
	}
	if short < 10_000 {
		t.Fatalf("only %d of the operands took the short path", short)
	}
}

// TestMulwIsBigProduct holds mulw to math/big: products of one to five
// signed factors whose magnitudes sit at and around the edges the short
// path tests (2^64, 2^128, 2^192, 2^256, each +-1), so running products
// cross from the short path to the full one and past 256 bits. The
// product must equal big.Int's, and be marked bad exactly when a running
// product passed 256 bits (as MulOverflow did: a later zero factor does
// not clear it); zero is never negative. It fails if the short path drops a carry, takes operands it
// cannot hold, or misses an overflow.
func TestMulwIsBigProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	limit := new(big.Int).Lsh(big.NewInt(1), 256)
	magnitude := func() *big.Int {
		var z big.Int
		switch rng.IntN(4) {
		case 0: // small, zero included
			z.SetUint64(rng.Uint64N(1 << 20))
		case 1: // a full 64-bit number
			z.SetUint64(rng.Uint64())
		default: // 2^k + d for an edge k and a small d
			z.Lsh(big.NewInt(1), uint(64*rng.IntN(5)))
			z.Add(&z, big.NewInt(int64(rng.IntN(5))-2))
			if z.Sign() < 0 || z.Cmp(limit) >= 0 {
				z.SetUint64(math.MaxUint64)
			}
		}
		return &z
	}
	paths := map[bool]int{}
	for range 100_000 {
		xs := make([]wide, 1+rng.IntN(5))
		want, over := big.NewInt(1), false
		for i := range xs {
			m := magnitude()
			var u uint256.Int
			u.SetFromBig(m)
			xs[i] = wide{m: u, neg: m.Sign() != 0 && rng.IntN(2) == 0}
			if xs[i].neg {
				m.Neg(m)
			}
			want.Mul(want, m)
			over = over || new(big.Int).Abs(want).Cmp(limit) >= 0
		}
		got := mulw(xs...)
		paths[over]++
		switch {
		case got.bad != over:
			t.Fatalf("%v: bad %v, want %v (product %v)", xs, got.bad, over, want)
		case over:
		case got.big().Cmp(want) != 0:
			t.Fatalf("%v: %v, want %v", xs, got.big(), want)
		case got.m.IsZero() && got.neg:
			t.Fatalf("%v: negative zero", xs)
		}
	}
	if paths[true] < 1_000 || paths[false] < 10_000 {
		t.Fatalf("too few products on one side of 2^256: %v", paths)
	}
}
