// Package rail is the seam between perpd and the Bitcoin payment rail
// (Lightning and Spark), plus the simulated rail that the testnet and local
// deployments run.
//
// # What it owns
//
//   - The [Rail] interface: create a deposit invoice, validate a withdrawal
//     destination, quote a withdrawal fee, describe deposit fees, pay out,
//     and derive an account's Spark address.
//   - Wire formats: a BOLT11 encoder and decoder (bolt11_*.go) and the Spark
//     address codec (spark.go), both written against the public specs.
//   - The fee schedule (fees.go).
//   - [SimRail], the simulated rail: it signs real BOLT11 invoices with the
//     node key, "pays" Spark payouts, fails every Lightning payout as an
//     unknown payout invoice (SPEC section 7), and settles invoices on an
//     operator's request (perpd admin rail pay-invoice).
//
// # What it must never do
//
//   - Change the ledger. The leader drives the rail; every result (an issued
//     invoice, a settlement, a payout outcome) enters the replicated state
//     machine as a command, and only the state machine moves money. This
//     package returns facts and never decides balances.
//   - Be consulted by the state machine. Everything secret or random
//     (payment preimages and secrets, account seeds) is drawn here, on the
//     proposing node, and handed to the caller to carry in a command. The
//     functions that every node may call (ParseDestination, QuoteFee,
//     DepositFees, AccountAddress) are pure: no clock, no randomness, no I/O.
//   - Keep state beyond bounded in-memory caches. The simulated rail
//     remembers the invoices it issued ([MaxIssuedInvoices]), and its
//     simulated network ([SimBook], shared by the SimRails of one cluster
//     in a process) the payouts it executed ([MaxRememberedPayouts]), oldest
//     evicted first. Losing the invoices (a restart, a leadership change)
//     loses nothing: the replicated state records issued invoices by
//     payment hash and is the authority on whether one was already settled.
//   - Use floating point for money. Amounts are millisatoshis in int64.
package rail
