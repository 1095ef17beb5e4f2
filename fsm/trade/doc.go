// Package trade owns trading inside the perpd state machine: the contract
// math (inverse and quanto value, PnL, average entry, margin, fees, the
// execution price with spread and skew impact), positions (one per account
// and market), orders (market and limit; limit orders rest with reserved
// margin in a price index), triggers and brackets (triggers.go: market
// orders armed in the same index, executed by the print that reaches their
// level), fill records, and risk: the liquidation index, liquidations with
// the insurance fund and auto-deleveraging (risk.go, liquidate.go) and
// hourly funding flows (funding.go).
//
// Every msat a fill moves goes through the ledger, between the trader's
// Free, Reserved and Margin(account, market) accounts, ledger.House (the
// counterparty of every fill) and ledger.FeeRevenue. The venue is every
// fill's counterparty: fills are priced off the oracle's last print, never
// matched between traders.
//
// # What it must never do
//
// Like all of fsm/, it never reads a clock (time is the entry's stamp),
// draws randomness, does I/O, uses floating point (products go through
// math/big with the rounding named at each call), or lets map iteration
// order leak into state or output. A refused order changes nothing: every
// check runs on a plan before the first mutation, and a ledger error after
// that point is a bug (the caller panics and the replica halts).
//
// # Rounding (always in the venue's favour; each rule is tested)
//
//   - Notional value of a trade (tradeNotionalMsat, the base of fee and
//     initial margin): rounded up.
//   - Initial margin and taker fee: rounded up from that notional.
//   - Realised PnL: computed exactly from the rational value and rounded
//     down (toward minus infinity): a gain loses the fraction, a loss pays it.
//   - Average entry on adds: rounded against the position (up for a long,
//     down for a short), so the averaged position is never worth more
//     than its parts.
//   - Execution price: buys round up to the tick, sells round down.
//   - Skew impact: rounded up (the trader pays the fraction).
//   - Margin released on a partial close: rounded down; the remainder stays
//     with the position and is released when it closes.
package trade
