// Package nemesis injects faults into a running cluster and heals them:
// kill -9 (a random node or the leader) then restart on the same data,
// SIGSTOP/SIGCONT of the leader, network partitions (isolate the leader,
// majority/minority split, bridge) through package iptables, membership
// change (remove a node, wipe it, re-join it so it catches up from a
// snapshot) and leadership transfer under load. A Schedule runs the
// selected nemeses one fault at a time, records each start and stop in the
// history, and always heals before it returns.
//
// It must never leave a fault in place: every Start has a Heal that is
// safe to call repeatedly, and HealAll runs on every exit path.
package nemesis
