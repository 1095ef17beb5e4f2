// Package client is the Jepsen harness's view of a perpd node from outside:
// a small HTTP client for the public API (signup, faucet, account, deposits,
// sessions, health) and for the admin listener (status, state), which sorts
// every answer into the history's outcomes: ok, fail (certainly not
// applied) or info (may or may not have been applied).
//
// It talks to nodes only over HTTP, like any customer or operator would,
// and must never import perpd's own packages: the harness tests the system
// as a black box.
package client
