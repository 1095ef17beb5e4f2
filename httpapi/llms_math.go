package httpapi

import (
	"fmt"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/node/rail"
)

// contractMath is the llms-full.txt section that states every trading
// formula and its rounding, so that an agent can check each figure the
// venue reports to the msat. The constants come from the packages that
// use them; fsm/trade/math.go, risk.go, funding.go and liquidate.go hold
// the code (TestContractMathMatchesTheVenue checks the text's formulas
// against a fill on a running server).
func contractMath() string {
	return fmt.Sprintf(`## Contract math

Integers throughout; every result is rounded once, as stated, in the venue's favour. n = contracts (positive), P = a price in q8, E = a position's entry (q8), M = its margin (msat), side = +1 for a long or a buy, -1 for a short or a sell. A market's parameters are the fields of GET /v1/markets/{id}.

- Contract value. inverse: one contract is 1 dollar, so n contracts at P are worth n*1e19/P msat. quanto: one contract is quantoMultiplierMsat (k) msat per dollar of price, so n contracts at P are worth n*P*k/1e8 msat (not 1 dollar each).
- Notional (the base of the fee and of the margin): that value at the execution price, rounded up.
- Spread of a fill (spreadQ9) = baseSpreadQ9 + impactQ9. impactQ9 = ceil(%d * (2*side*netOI + n) / (2*cap)), 0 when that is not positive: netOI is the market's long minus short open interest before the fill (not published as such: skewQ9 is it as a fraction of the total, truncated), cap = %d * maxOrderContracts. A fill that grows the skew pays impact, one that reduces it pays none.
- Execution price: a buy at ceil(mid*(1e9+spreadQ9) / (1e9*tick)) * tick, a sell at floor(mid*(1e9-spreadQ9) / (1e9*tick)) * tick, with mid the oracle's and tick = tickSizeQ8. impactMsat reports floor(value at mid * impactQ9 / 1e9); it is part of the price, not charged again.
- Taker fee = ceil(notional * takerFeeQ9 / 1e9).
- Initial margin = ceil(notional * rate / 1e9), rate = max(imRateQ9, ceil(1e9 / leverage)) (leverage 1..maxLeverage, default maxLeverage). An order pays margin for the contracts it opens and the fee on all its contracts. A resting limit order reserves (reservedMsat) the margin of what it would open at its limit price plus the fee on all its contracts at the limit price; at its fill that reservation is released (the fill's reservedMarginMsat) and the fill's own margin and fee are charged.
- Average entry after adding n2 at P2 to n1 at E: inverse (n1+n2)*E*P2 / (n1*P2 + n2*E) (the harmonic mean), quanto (n1*E + n2*P2) / (n1+n2); rounded up for a long, down for a short.
- Realised PnL of closing n at X: inverse side*n*1e19*(X-E) / (E*X), quanto side*n*(X-E)*k / 1e8; rounded down (toward minus infinity). The closed share of the margin is released, floor(M * n / contracts); a loss is paid from the position's margin, never from free, and what the whole margin cannot pay is deficitMsat (on a fill the house book absorbs it; on a liquidation the insurance fund, then auto-deleveraging).
- Maintenance: a position is liquidated when its margin plus its PnL at the oracle mid is at most mmRateQ9/1e9 times its value at the mid. Its liquidationPriceQ8 is that mid: inverse long n*1e19*E*(1e9+mm) / (1e9*(M*E + n*1e19)), inverse short n*1e19*E*(1e9-mm) / (1e9*(n*1e19 - M*E)), quanto long 1e9*(n*E*k - M*1e8) / (n*k*(1e9-mm)), quanto short 1e9*(n*E*k + M*1e8) / (n*k*(1e9+mm)), with mm = mmRateQ9; rounded down for a long (due at a mid at or below it), up for a short (due at or above it); absent when no price reaches it. An order that opens contracts is refused insufficient_margin when free balance cannot pay their margin and the fee, or when the fill would leave the position under maintenance at the mid.
- Liquidation: at the mid with spread, no taker fee; partial when closing part leaves equity at least %d times the maintenance of what remains, else whole. penaltyMsat = ceil(N * mmRateQ9 / (%d * 1e9)), N the notional of the closed contracts at the execution price, to the insurance fund, never more than the margin left after the loss.
- Funding, every hour on the hour of log time (nextFundingTsMs): skewQ9 = (longOI - shortOI) * 1e9 / (longOI + shortOI), truncated toward zero (0 without open interest); rate = skewQ9 * %d / 1e9, truncated toward zero and held within a cap per market (%d on the shipped markets, an operator's market parameter; fundingRateHourlyQ9 is the rate the next boundary pays if open interest stays as it is). Each open position pays or receives rate * its value at the boundary's mark (the market's last print): a long pays when the rate is positive, a short when it is negative. The payer owes ceil(notional at the mark * |rate| / 1e9), taken from the position's margin (paidMsat; what the margin cannot cover is charged to the position's entry instead); the receiver gets floor(value at the mark * |rate| / 1e9) into its margin. Funding never touches free balance.
- Limits: a position holds at most %d * maxOrderContracts contracts (position_limit), each side's open interest at most %d * maxOrderContracts (oi_cap); reducing is never refused by them.
- Withdrawal fees (also in every quote): spark %d msat flat; lightning %d + ceil(amount * %d / 1e6) msat, at most %d msat. Spark moves whole sats, so its amount is a multiple of 1000 msat.

`,
		trade.ImpactAtCapQ9, trade.OICapOrders,
		trade.LiquidationTargetMultiple, trade.LiquidationPenaltyDivisor,
		market.FundingSkewCoefQ9, market.DefaultFundingCapQ9,
		trade.PositionLimitOrders, trade.OICapOrders,
		rail.SparkWithdrawalFeeMsat, rail.LightningFeeBaseMsat, rail.LightningFeePPM, rail.LightningFeeCapMsat)
}
