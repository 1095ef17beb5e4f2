// Package workload is what the Jepsen harness's clients do: it sets up
// accounts, then runs concurrent logical processes that each pick an
// operation kind by weight (faucet deposits, linearizable balance reads,
// deposit listings, session-key mints; market and limit orders and cancels
// on funded traders, and their cancel-all-after switch; Spark and Lightning
// withdrawals on funded withdrawers) against a node, recording every
// invocation and completion in the history. Operations with an unknown
// outcome are kept, to be settled after the faults heal by retrying them
// with their idempotency keys, and the final state is read back for the
// checkers.
//
// A new operation kind is one more Kind value in Kinds. The package must
// never judge a history; it only produces one.
package workload
