// Package harness runs one Jepsen-style test of perpd end to end: it builds
// perpd, sets up the firewall chains, starts a cluster of real processes on
// 127.0.0.11..15 (or another range, Options.IPBase), creates accounts, runs the workload's concurrent clients
// while the nemesis schedule injects faults, heals everything, settles
// writes with unknown outcomes, reads the final state back, runs the
// checkers and writes the report.
//
// It owns the order of those phases and the guarantee that every exit path
// (success, error, panic, signal through ctx) stops every process it
// started and deletes its firewall chains. Faults, clients, checks and
// formatting belong to their own packages.
package harness
