// Package growth owns the referral and promoter programmes and the public
// leaderboards inside the perpd state machine.
//
// Referral: an account creates one code; another account binds to it
// within its bind window (a grace period after signup). Every fill of a
// bound account splits its taker fee (trade.Env.FeeSplit): a discount back
// to the referee for a window and a volume cap, and a share of the net fee
// to the referrer, moved from ledger.FeeRevenue to ledger account
// ReferralPayable. Rewards accrue in day buckets, vest after the holdback
// (a day-boundary timer), are forfeited back to fee revenue when the
// referrer fails the eligibility gates at vesting, and are claimed (vested
// only, at least the minimum claim) from the payable to the referrer's
// free balance.
//
// Promoters: an approved application gives an account promoter codes in
// the same namespace, each with a kickback (bounded by the promoter share)
// paid to its referees on top of the discount; the promoter's rewards go
// through PromoterPayable with the same buckets, holdback and claim.
//
// Leaderboards: per trader day buckets fed by fills, funding flows and
// liquidations (PnL is the change of ledger equity those events make),
// folded into boards pnl and roi over 7d, 30d and all by a recompute on
// the log clock every CadenceMinutes. Traders appear under generated
// handles, never their account id.
//
// Like all of fsm/, it never reads a clock, draws randomness, uses floats
// or lets map order leak. Every division states its rounding.
package growth
