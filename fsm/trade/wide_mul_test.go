package trade

import (
	"math"
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
