package rail

import "math/bits"

// Withdrawal fee schedule. Every result is rounded up to the next msat, in
// the venue's favour.
//
//   - Spark: a flat SparkWithdrawalFeeMsat. A Spark transfer costs the same
//     whatever its size, so the fee does too.
//   - Lightning: LightningFeeBaseMsat + ceil(amount x LightningFeePPM / 1e6),
//     capped at LightningFeeCapMsat. Base and ppm mirror what routing costs
//     (a small base plus a proportional part); the cap keeps large
//     withdrawals from paying more than a route could plausibly cost.
const (
	SparkWithdrawalFeeMsat int64 = 10_000    // 10 sats
	LightningFeeBaseMsat   int64 = 2_000     // 2 sats
	LightningFeePPM        int64 = 1_000     // 0.1%
	LightningFeeCapMsat    int64 = 5_000_000 // 5,000 sats
)

// Deposit schedule. Spark and Lightning deposits are credited in full; an
// on-chain deposit is claimed into Spark by a transaction whose miner fee it
// bears, so small ones are not worth making.
const (
	// L1RecommendedMinimumSats is the smallest on-chain deposit we advise:
	// below it the claim's miner fee is a large share of the amount.
	L1RecommendedMinimumSats int64 = 10_000
	// LightningDepositFeeMsat is what the venue keeps from a paid deposit
	// invoice: nothing; the payer's wallet pays the routing.
	LightningDepositFeeMsat int64 = 0
)

// quoteFee implements Rail.QuoteFee for the schedule above.
func quoteFee(path string, amountMsat int64) int64 {
	switch path {
	case PathSpark:
		return SparkWithdrawalFeeMsat
	case PathLightning:
		return lightningFee(amountMsat)
	default:
		return 0
	}
}

func lightningFee(amountMsat int64) int64 {
	if amountMsat <= 0 {
		return LightningFeeBaseMsat
	}
	// amount x ppm can exceed 63 bits; multiply in 128 bits and divide
	// rounding up. The quotient fits: it is below amount / 1000.
	hi, lo := bits.Mul64(uint64(amountMsat), uint64(LightningFeePPM))
	q, r := bits.Div64(hi, lo, 1_000_000)
	if r != 0 {
		q++
	}
	fee := LightningFeeBaseMsat + int64(q)
	return min(fee, LightningFeeCapMsat)
}

// depositFees implements Rail.DepositFees: a fresh slice per call, since
// the caller may keep or change it.
func depositFees() []DepositFee {
	l1Min := L1RecommendedMinimumSats
	return []DepositFee{
		{
			Path:        PathSpark,
			Description: "Spark transfer to your railAddress: no fee, no minimum; credited when the transfer lands.",
		},
		{
			Path:                   PathL1,
			Description:            "On-chain Bitcoin (L1) deposit: claimed into Spark after confirmation; the claim transaction's miner fee is deducted from the amount credited.",
			RecommendedMinimumSats: &l1Min,
		},
		{
			Path:        PathLightning,
			Description: "Lightning invoice from POST /v1/deposit-invoices: no venue fee; your wallet pays the routing fee.",
		},
	}
}
