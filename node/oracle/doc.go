// Package oracle is the leader-side price source: it turns "what is the
// underlying worth now" into integer prints {MidQ8, ConfQ9, TsMs} that the
// node's oracle driver proposes to the log.
//
// It owns the Source seam, the built-in seeded simulation (SimSource), and
// the Pinned overrides that tests and demos use to hold a feed at a price or
// play a scripted path.
//
// # What it must never do
//
// It runs outside the state machine, on the leader only, so it may use the
// clock the driver hands it, floating point and randomness; but nothing it
// computes reaches the state except the integer print the driver proposes.
// It never reads or writes replicated state itself: after a leadership change
// the driver reads the last print from the state and calls Resume, so the new
// leader's feed continues from the committed price instead of restarting from
// a seed price. It never decides whether a print is acceptable; the FSM does
// (positive mid, strictly newer timestamp, bounded lead over the log's time).
//
// # The simulation
//
// Per feed, log-price follows a geometric random walk whose total
// annualised volatility (diffusion plus jumps) is the feed's AnnualVol:
// BTC 55%, ETH 75% by default. Jumps arrive as a Poisson process (about one a
// week) with a size of 2-5% in either direction, and the confidence band
// widens by a fifth of the jump and decays back with a 30-second half-life.
// The confidence otherwise sits near the feed's base (3 bp BTC, 5 bp ETH)
// with noise, inside 2-10 bp. Output mids are rounded to the nearest integer
// q8 (not to the market tick; the tick applies to fills). Given a seed, a
// feed and the same sequence of calls, the output is identical, and Resume
// reseeds from (seed, feed, resume timestamp) so two leaders resuming from the
// same committed print walk the same path.
package oracle
