// Package funds owns the money that crosses the venue's edge inside the
// state machine:
//
//   - deposits (a paid invoice, an on-chain or Spark transfer, or the
//     testnet faucet — all through one settlement path, Settle);
//   - open deposit invoices, by payment ref, which a Lightning settlement
//     must match (account, amount, expiry in log time; once only);
//   - withdrawals: reserved into ledger.PendingWithdrawals when requested,
//     then paid (out of the venue, fee to revenue) or returned (back to
//     free, exactly) when the rail's answer is applied;
//   - withdrawal confirmation: each account's known destinations and the
//     set of spent confirm tokens.
//
// It moves money only through the ledger. The rail (node/rail) is never
// consulted here: the node that talks to the rail proposes what it said,
// and this package decides what that does to balances.
//
// Like all of fsm/, it must never read a clock, draw randomness, do I/O or
// let map iteration order leak into state or output.
package funds
