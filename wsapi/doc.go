// Package wsapi is the WebSocket of SPEC section 6 at /v1/ws: the public
// `prices` and `stats` channels and the keyed `account` channel, fed from the
// node's event bus (the events its state machine emitted while applying the
// log, with the shared seq). Any node serves it; every node emits the same
// events, so a client de-duplicates on seq after a reconnect.
//
// It never changes state and never backfills: a reconnecting client takes a
// REST snapshot and resumes the stream.
package wsapi
