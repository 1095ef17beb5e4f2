// Package fsm is perpd's deterministic state machine: every rule about
// money, orders, positions, funding, USDx, PoR and access lives below it.
// This package owns the command envelope, dispatch, the log clock, the shared
// record sequence, the idempotency store, snapshots and the state hash;
// domain sub-packages (ledger, market, access, ...) own their part of State.
//
// Every replica that applies the same log must reach the same bytes, so code
// under fsm/ must never: read a clock (time comes from the entry's leader
// stamp), draw randomness (the proposer draws and carries it in the command),
// do I/O, use floating point, or let Go map iteration order leak into state
// or output. It imports no raft, HTTP or clock package: node/ adapts it.
package fsm
