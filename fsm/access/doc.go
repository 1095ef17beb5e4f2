// Package access owns accounts and their API keys inside the state machine:
// signup, scoped delegate keys (sessions), revocation and the testnet
// faucet's grant limit. Key values never enter the state: only their
// SHA-256 hashes, carried in by the proposing node.
//
// Like all of fsm/, it must never read a clock, draw randomness, do I/O or
// let map iteration order leak into state or output.
package access
