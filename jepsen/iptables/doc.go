// Package iptables makes real network partitions between perpd nodes that
// share one machine, each on its own loopback address (127.0.0.11 ...).
//
// Loopback traffic leaves with source 127.0.0.1 whoever sends it, so the
// nodes run under their own uids and a nat rule (chain PERPD-JEPSEN-SNAT,
// jumped from POSTROUTING) rewrites each node's outgoing source to its own
// address by uid owner. Partitions are then plain DROP rules on
// (source, destination) pairs in the filter chain PERPD-JEPSEN, jumped
// from INPUT. Healing flushes PERPD-JEPSEN; Close deletes both chains and
// their jumps. The harness's own requests (as root, source 127.0.0.1) are
// never dropped: clients can always reach every node, as in Jepsen.
//
// It must only ever touch its own two chains and the jumps to them.
package iptables
