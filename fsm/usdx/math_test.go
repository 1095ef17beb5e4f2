package usdx

import "testing"

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
