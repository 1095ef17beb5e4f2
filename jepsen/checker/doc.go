// Package checker judges a history recorded by the harness, plus what the
// cluster looked like at the end: linearizability of each account's
// balance (porcupine, one partition per account), no lost or duplicated
// writes (every acknowledged deposit and minted key present exactly once),
// money conservation (balance == sum of credited deposits, equal state
// hashes on every node at the same applied index) and liveness (how long
// writes were refused, and whether the cluster took writes again after each
// heal).
//
// It is pure: no network, no clock, no randomness. Given the same history
// and final state it always reaches the same verdicts, so its tests are
// synthetic histories with planted bugs.
package checker
