// Package db runs the system under test: real perpd processes, one per
// loopback address (127.0.0.11, .12, ... or .41, .42, ... on another
// range: Config.IPBase), each with its own data
// directory, log file and (when the harness is root) its own uid so the
// firewall can tell the nodes' traffic apart. It starts, kills (SIGKILL),
// pauses (SIGSTOP/SIGCONT), wipes and restarts nodes, and finds the leader
// through the admin listeners.
//
// It decides nothing about faults (that is package nemesis) and must leave
// no process behind: children die with the harness (Pdeathsig) and StopAll
// kills whatever is left.
package db
