// Package cli holds perpd's cobra commands: `serve` (run a node), `devnet`
// (a local multi-process cluster), `admin ...` (membership, snapshots,
// status, operator tools) and `bench` (a load generator, in cli/loadgen),
// with every flag also readable from a PERPD_<NAME> environment variable.
//
// It parses flags and prints results; the work itself lives in node/,
// cluster/, httpapi/ and cli/loadgen. Deployment profiles (testnet,
// local, bench) are in profile.go.
package cli
