// Package ledger is the double-entry money core of the state machine.
//
// Every msat lives in exactly one ledger account. Money moves only by
// Transfer (account to account), or enters and leaves the venue by Credit
// (a settled deposit) and Debit (a paid withdrawal). The conservation
// invariant — the sum of all balances equals credited minus paid — holds
// after every call and is checked by Check.
//
// It must never read a clock, draw randomness, iterate a map where order
// could leak, or use floating point.
package ledger
