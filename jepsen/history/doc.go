// Package history records what the Jepsen harness's clients and nemeses did:
// every operation as an invocation and a completion (ok, fail or info) with
// monotonic timestamps, the logical process that ran it and the node it
// went to. It owns the on-disk format (JSON lines) and nothing else.
//
// It must never interpret operations: deciding what a history means is the
// checker package's job.
package history
