// Package funds owns the money that crosses the venue's edge inside the
// state machine: deposit records (from a paid invoice, an on-chain or Spark
// transfer, or the testnet faucet — all through one settlement path) and,
// later, withdrawals. It moves money only through the ledger.
//
// Like all of fsm/, it must never read a clock, draw randomness, do I/O or
// let map iteration order leak into state or output.
package funds
