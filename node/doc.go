// Package node is one perpd process's replication glue: it wires
// hashicorp/raft to the fsm.Machine (apply, snapshot, restore), proposes
// commands (raft.Apply on the leader, forwarded from a follower over the
// authenticated admin channel), offers read barriers (X-Min-Index and
// linearizable reads), and runs the leader-side drivers that turn the
// outside world into commands: the clock tick, the oracle feed, the rail.
//
// It must never decide a rule of money or trading: that is fsm/'s job.
// Everything it learns from outside enters the state only as a command.
package node
