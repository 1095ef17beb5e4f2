// Package cluster owns membership and the operator surface of a perpd
// cluster: the admin listener (status, join, remove, leadership transfer,
// snapshot and restore, the node-to-node write channel), its client used by
// the `perpd admin` commands, the join-on-start flow, the leader's
// scheduled comparison of the replicas' state hashes, and the local
// multi-process launcher behind `perpd devnet`.
//
// It must never serve the public API nor change state except through
// node.Propose or raft's own membership calls.
package cluster
