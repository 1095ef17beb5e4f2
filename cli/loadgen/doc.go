// Package loadgen is the load generator behind `perpd bench`: simulated
// traders against a running cluster's public API, with per-operation
// throughput, latency percentiles and refusals counted by code. It also
// holds `perpd bench http`, a generic closed-loop HTTP load whose request
// bodies and headers are templates (template.go, httpload.go: the same
// code drives etcd's gateway and perpd's orders in the comparison), and
// `perpd bench ws`, the WebSocket fan-out measurement (wsfanout.go).
//
// What it owns: the traders' behaviour (signup, faucet, then a weighted
// mix of market orders, limit orders, cancels and reads), the measurement
// (every latency is one full HTTP round trip, measured by the client; a
// WebSocket frame's lateness is its receive time minus its log time) and
// the result (a table and a JSON document).
//
// What it must never do: run against a prod deployment (Run asks
// /deployment first; so do the perpd signups of the HTTP load and the
// fan-out's traders); send a request before a 429's Retry-After has passed
// (the trader or worker that got it sleeps); reuse an idempotency-key for
// another write (every write gets 16 fresh random bytes, whatever the seed;
// only a retried faucet grant repeats its own); start an operation after
// the run's deadline. The seed drives only the traders' choices (which
// operation, side, size and price), never the keys.
package loadgen
