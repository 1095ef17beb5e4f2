// Package cli holds perpd's cobra commands: `serve` (run a node), `devnet`
// (a local multi-process cluster) and `admin ...` (membership, snapshots,
// status, operator tools), with every flag also readable from a
// PERPD_<NAME> environment variable.
//
// It parses flags and prints results; the work itself lives in node/,
// cluster/ and httpapi/.
package cli
