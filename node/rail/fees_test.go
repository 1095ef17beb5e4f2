package rail

import (
	"math"
	"testing"
)

func TestSparkWithdrawalFeeIsFlat(t *testing.T) {
	r := newTestRail(t, Testnet)
	for _, amount := range []int64{0, 1, 1_000, 100_000_000_000, math.MaxInt64} {
		if got := r.QuoteFee(PathSpark, amount); got != SparkWithdrawalFeeMsat {
			t.Errorf("QuoteFee(spark, %d) = %d, want %d", amount, got, SparkWithdrawalFeeMsat)
		}
	}
}

func TestLightningFeeRoundsUpAndIsCapped(t *testing.T) {
	r := newTestRail(t, Testnet)
	base, ppm := LightningFeeBaseMsat, LightningFeePPM
	// The amount at which the proportional part alone reaches the cap.
	capAt := (LightningFeeCapMsat - base) * 1_000_000 / ppm
	cases := []struct{ amount, fee int64 }{
		{-5, base}, // never negative: base only
		{0, base},
		{1, base + 1},     // 0.001 msat rounds up to 1
		{999, base + 1},   // 0.999 rounds up
		{1_000, base + 1}, // exactly 1
		{1_001, base + 2}, // 1.001 rounds up
		{1_000_000, base + 1_000},
		{100_000_000, base + 100_000}, // 100k sats -> 100 sats + base
		{capAt - 1_000, LightningFeeCapMsat - 1},
		{capAt, LightningFeeCapMsat},
		{capAt + 1, LightningFeeCapMsat},
		{math.MaxInt64, LightningFeeCapMsat}, // no overflow
	}
	for _, c := range cases {
		if got := r.QuoteFee(PathLightning, c.amount); got != c.fee {
			t.Errorf("QuoteFee(lightning, %d) = %d, want %d", c.amount, got, c.fee)
		}
	}
}

func TestQuoteFeeOfANonWithdrawalPathIsZero(t *testing.T) {
	r := newTestRail(t, Testnet)
	for _, p := range []string{PathL1, "", "ach"} {
		if got := r.QuoteFee(p, 1_000_000); got != 0 {
			t.Errorf("QuoteFee(%q) = %d, want 0", p, got)
		}
	}
}

func TestDepositFeesListEveryPathOnce(t *testing.T) {
	r := newTestRail(t, Testnet)
	fees := r.DepositFees()
	want := []string{PathSpark, PathL1, PathLightning}
	if len(fees) != len(want) {
		t.Fatalf("%d entries, want %d", len(fees), len(want))
	}
	for i, f := range fees {
		if f.Path != want[i] || f.Description == "" {
			t.Errorf("entry %d = %+v", i, f)
		}
		if (f.Path == PathL1) != (f.RecommendedMinimumSats != nil) {
			t.Errorf("%s: recommended minimum %v; only l1 has one", f.Path, f.RecommendedMinimumSats)
		}
	}
	if *fees[1].RecommendedMinimumSats != L1RecommendedMinimumSats {
		t.Errorf("l1 minimum %d, want %d", *fees[1].RecommendedMinimumSats, L1RecommendedMinimumSats)
	}
	// The caller owns the slice: changing it changes no later answer.
	*fees[1].RecommendedMinimumSats = 1
	fees[0].Description = "changed"
	again := r.DepositFees()
	if *again[1].RecommendedMinimumSats != L1RecommendedMinimumSats || again[0].Description == "changed" {
		t.Error("DepositFees shares memory between calls")
	}
}
