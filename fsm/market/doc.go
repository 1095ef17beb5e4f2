// Package market owns the replicated market book of the perpd state machine:
// market parameters, the last oracle print per feed, candles, funding
// boundaries and their history, open-interest counters, 24h statistics and
// the price index that the trading engine uses for triggers and liquidation
// levels.
//
// # What it must never do
//
// Everything here runs inside raft apply on every replica and must reach the
// same bytes on every replica, so this package never reads a clock (time comes
// in as nowMs, the log entry's stamp), never draws randomness (the seed of the
// pre-launch history comes in the bootstrap command), never does I/O during
// apply, never uses floating point, and never lets Go map iteration order leak
// into state or output (keys are sorted first, or an ordered B-tree is used).
// A test in this package walks all of fsm/ and fails on float32, float64,
// time.Now and math/rand in non-test files.
//
// # Units and rounding
//
// Prices are q8 int64 (dollars x 1e8), rates and fractions q9 int64
// (fraction x 1e9), timestamps and durations ms int64, sizes whole contracts.
// Products that can exceed 63 bits go through mulDiv (128-bit, math/bits) with
// the rounding named at each call site.
//
// # Decisions (recorded here so the core and the API can cite them)
//
//   - Candles are returned oldest first (newest last), the order Binance klines
//     and most charting libraries use; the newest bar may still be open.
//     Bars exist only for periods with a print or a fill: gaps are not filled.
//   - Bars of every interval are updated directly by each print, not rolled up
//     from finer bars, so an hourly or daily bar never depends on pruned minute
//     bars. Minute bars are kept for four days (MinuteBarsMax, 5760 per
//     market); hourly and daily bars are permanent rollups in the sense of the
//     spec, with a safety cap (HourBarsMax = ten years, DayBarsMax = a
//     century) so that nothing grows without a bound.
//   - volumeContracts: a bar reports it (including 0) when it ends after the
//     market's first fill; earlier bars report it absent.
//   - 24h stats use the basis "rolling_1m_bars": the 1440 minute bars ending
//     with the current minute. hi/lo are null when no print falls in the
//     window; truncated is true when the window starts before the market's
//     first print (or there is none).
//   - Funding: skewQ9 = (long - short) x 1e9 / (long + short), truncated toward
//     zero, 0 with no open interest. The hourly rate is
//     clamp(skewQ9 x FundingSkewCoefQ9 / 1e9, -cap, +cap), truncated toward
//     zero; with FundingSkewCoefQ9 = 1e5 a fully one-sided book pays 0.01% per
//     hour before the cap, and the shipped cap (maxFundingRateHourlyQ9 =
//     50,000, 0.005%/h) binds from 50% skew. A positive rate means longs pay.
//     Truncation toward zero keeps the rule symmetric: mirrored books get
//     mirrored rates.
//   - Missed funding boundaries (the cluster was down or no entry arrived for
//     several hours): Advance records only the latest passed boundary and
//     reports how many it skipped. Nobody could trade during the gap, so
//     charging every missed hour at one stale skew would bill positions for
//     hours in which they could not react.
//   - Funding history is returned oldest first, like candles.
//   - The ticker's stalenessMs is the market's oracleStalenessMs threshold:
//     the spec's "staleness input" that clients compare with the print's tsMs.
//   - openInterestContracts is long OI + short OI of trader positions (the
//     venue's house book is the counterparty of both sides).
//   - Operator pins and scripts (Override) are stored on the feed, so every
//     leader's oracle driver plays the same override from the same start.
//     The book never judges prints by them: prints are the leader's.
//
// # Pre-launch history
//
// Daily bars before launch are a synthetic pre-launch index history derived
// from the bootstrap seed: no outside data is reachable from the cluster, so
// SeededDailyBars draws a deterministic integer-only random walk (splitmix64,
// 3% daily volatility) backwards from an anchor price, so that the last seeded
// close equals the anchor (the initial price) and the chart joins the first
// real bar without a gap. Those bars carry Seeded = true and Prints = 0.
//
// # Catalogue files
//
// LoadCatalogue reads a JSON array of markets with the field names of the
// spec's Market resource. Integer fields may be written either as JSON
// strings of decimal integers (the wire encoding of the API, "50000000") or as
// plain JSON integers (50000000); fractions and exponents are refused.
// quantoMultiplierMsat is null or absent for inverse markets. Unknown fields
// are refused so that typos do not silently fall back to zero. LoadCatalogue
// runs at bootstrap on the node, never inside apply.
//
// # Concurrency
//
// State is not safe for concurrent use: the core serialises apply and reads
// (for example with a read-write lock around the whole FSM).
package market
