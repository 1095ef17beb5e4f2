package node

import "github.com/hashicorp/raft"

// No heartbeat fast path. hashicorp/raft (v1.7.3) asks its transport to
// hand heartbeats to a callback that runs on the transport's goroutine, so
// that a follower whose main loop waits on the disk still hears its leader.
// That callback is raft's appendEntries, which the library documents as
// main-thread only, and which steps down and raises the current term when
// the heartbeat comes from a newer leader. A deposed leader (paused, then
// resumed) can therefore have its term raised under its main loop while
// that loop is dispatching a client entry: the entry is written with the
// new leader's term at an index where the new leader wrote another entry.
// Raft compares only terms, so the two logs are never reconciled: the
// replicas apply different entries at that index and diverge for good
// (upstream issue hashicorp/raft#695; the Jepsen harness caught it here:
// a write from the resumed old leader applied on it alone).
//
// So the guard never registers the callback: the network transport then
// queues heartbeats with every other request, raft's main loop handles
// them, and every change of term happens on that loop. A heartbeat may
// wait behind a log write; the election timeout (raftConfig) has room for
// that, and under load the appends that carry entries wait the same way.
func (g *snapshotGuard) SetHeartbeatHandler(func(rpc raft.RPC)) {}
