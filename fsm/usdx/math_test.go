package usdx

import (
	"math/big"
	"testing"
)

func TestDynFeeCurveInterpolatesAndRoundsDown(t *testing.T) {
	c := DefaultParams().DynFeeCurve // (0,0) (0.5,0) (0.8,1e6) (1,5e6)
	for _, tc := range []struct{ u, want int64 }{
		{0, 0}, {400_000_000, 0}, {500_000_000, 0},
		{650_000_000, 500_000},     // half way from 0.5 to 0.8
		{500_000_500, 1},           // 1e6 x 500/3e8 = 1.67: down
		{900_000_000, 3_000_000},   // half way from 0.8 to 1
		{1_000_000_000, 5_000_000}, // the last knot
		{3_000_000_000, 5_000_000}, // beyond: the last y
	} {
		if got := DynFeeRateQ9(c, tc.u); got != tc.want {
			t.Errorf("u %d: %d, want %d", tc.u, got, tc.want)
		}
	}
	if DynFeeRateQ9(nil, 5) != 0 {
		t.Fatal("empty curve")
	}
	// A falling segment still rounds toward minus infinity.
	if got := DynFeeRateQ9([]CurvePoint{{0, 10}, {3, 0}}, 1); got != 6 {
		t.Fatalf("falling: %d", got) // 10 + floor(-10/3) = 10 - 4
	}
}

func TestSharePriceAndValueRoundInTheVenuesFavour(t *testing.T) {
	if SharePriceQ9(0, 0) != Q9 || SharePriceQ9(2, 3) != 666_666_666 || SharePriceQ9(150, 100) != 1_500_000_000 {
		t.Fatal("share price")
	}
	// 1 USDx at 100,000.00: 1e19 / 1e13 = 1e6 msat exactly; at 99,999.99
	// 1e19 / 9999999000000 = 1000000.1...: down.
	if ValueMsat(1, 10_000_000_000_000) != 1_000_000 || ValueMsat(1, 9_999_999_000_000) != 1_000_000 || ValueMsat(0, 1) != 0 {
		t.Fatal("value")
	}
	if usdOfMsatFloor(1_999_999, 10_000_000_000_000) != 1 {
		t.Fatal("dollars of msat")
	}
}

func TestRequoteToleranceIsExactAtTheEdge(t *testing.T) {
	// 0.2% of 100,000.00000000 (1e13 q8) is 2e10 q8.
	if beyondTolerance(10_000_000_000_000+20_000_000_000, 10_000_000_000_000, 2_000_000) {
		t.Fatal("exactly at the tolerance is within")
	}
	if !beyondTolerance(10_000_000_000_000+20_000_000_001, 10_000_000_000_000, 2_000_000) {
		t.Fatal("one unit beyond")
	}
	if !beyondTolerance(10_000_000_000_000-20_000_000_001, 10_000_000_000_000, 2_000_000) {
		t.Fatal("either direction")
	}
	// Products beyond 64 bits (the bug the 128-bit compare fixes).
	if !beyondTolerance(1<<62, 1<<61, 2_000_000) {
		t.Fatal("large prices")
	}
}

func TestValidAddress(t *testing.T) {
	for a, ok := range map[string]bool{"sprt1abcdefgh": true, "short": false, "UPPERCASE123": false, "sprt1 space": false} {
		if ValidAddress(a) != ok {
			t.Errorf("%q", a)
		}
	}
}

// TestDynFeeCeilIsTheExactRateRoundedUpOnce checks dynFeeCeil against
// exact rationals on every segment of a curve, at the knots, between them
// and beyond the last, and that it is never below the fee of the rounded
// rate.
func TestDynFeeCeilIsTheExactRateRoundedUpOnce(t *testing.T) {
	curve := []CurvePoint{{XQ9: 100_000_000, YQ9: 7}, {XQ9: 500_000_000, YQ9: 7}, {XQ9: 800_000_000, YQ9: 1_000_000},
		{XQ9: 900_000_000, YQ9: 300_000}, {XQ9: 1_000_000_000, YQ9: 5_000_000}}
	exact := func(notional, used, hc int64) int64 {
		u := new(big.Rat).SetFrac64(used, hc)
		u.Mul(u, new(big.Rat).SetInt64(Q9))
		y := new(big.Rat).SetInt64(curve[len(curve)-1].YQ9)
		if u.Cmp(new(big.Rat).SetInt64(curve[0].XQ9)) <= 0 {
			y.SetInt64(curve[0].YQ9)
		} else {
			for i := 1; i < len(curve); i++ {
				a, b := curve[i-1], curve[i]
				if u.Cmp(new(big.Rat).SetInt64(b.XQ9)) <= 0 {
					f := new(big.Rat).Sub(u, new(big.Rat).SetInt64(a.XQ9))
					f.Mul(f, new(big.Rat).SetFrac64(b.YQ9-a.YQ9, b.XQ9-a.XQ9))
					y.Add(new(big.Rat).SetInt64(a.YQ9), f)
					break
				}
			}
		}
		fee := new(big.Rat).Mul(y, new(big.Rat).SetInt64(notional))
		fee.Quo(fee, new(big.Rat).SetInt64(Q9))
		n := new(big.Int).Quo(fee.Num(), fee.Denom())
		if new(big.Rat).SetInt(n).Cmp(fee) < 0 {
			n.Add(n, big.NewInt(1))
		}
		return n.Int64()
	}
	short := 0
	for _, hc := range []int64{1, 3, 7, 3_000, 10_000_000} {
		for used := int64(0); used <= hc*11/10+2; used += max(1, hc/97) {
			for _, notional := range []int64{0, 1, 999_999, 2_000_000_000, 1_000_000_000_000} {
				got, want := dynFeeCeil(notional, curve, used, hc), exact(notional, used, hc)
				if got != want {
					t.Fatalf("hc %d used %d notional %d: %d, exact %d", hc, used, notional, got, want)
				}
				old := mulDivCeil(notional, DynFeeRateQ9(curve, mulDivFloor(used, Q9, hc)), Q9)
				if got < old {
					t.Fatalf("hc %d used %d notional %d: %d below the rounded rate's %d", hc, used, notional, got, old)
				}
				if got > old {
					short++
				}
			}
		}
	}
	if short == 0 {
		t.Fatal("the rounded rate never fell short: the case proves nothing")
	}
	t.Logf("%d cases where rounding the rate down undercharged", short)
}
