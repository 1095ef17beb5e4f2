package httpapi

import (
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/node"
)

// reqState is what the middlewares learn about one request and hand on to
// its handler: the request id (requestLog), the caller (authGuard), the
// idempotency key (idemGuard) and the draw of the route's budget
// (meterGuard). It is one allocation per request, where a c.Set per value
// cost a boxed value each and gin a Keys map per request.
//
// The gin context reaches it through the single entry of a Keys map that
// requestLog takes from keyMaps and gives back, emptied and detached from
// the context, once the whole chain has answered. The state itself is
// never pooled: the node may still hold the draw (a write still queued
// when its caller gave up), and the answer's header map holds slices of
// hdr.
type reqState struct {
	id      string
	caller  caller
	idemKey string
	hasIdem bool
	draw    node.Draw
	hasDraw bool
	// local is this node's verdict on a keyed write's local budget
	// (meterGuard), which the leader draws again: the binding one if it
	// has fewer tokens left than the leader's (bindingVerdict). A read
	// token an X-Min-Index wait draws on an order is not the write's
	// budget and is not recorded.
	local    verdict
	hasLocal bool
	// linearized: authGuard already applied a read index learned after
	// the request arrived (to judge an unknown key), which serves
	// X-Consistency: linearizable for the read too.
	linearized bool
	// hdr backs the values of the headers this package sets on most
	// answers (setHeader), so they cost no allocation of their own.
	hdr [hdrSlots]string
	// w400 is the writer of a Refuses400 route, kept here so that it
	// costs no allocation of its own.
	w400 status400Writer
}

// The slots of reqState.hdr, one per header.
const (
	slotRequestID = iota
	slotRaftIndex
	slotRateLimit
	slotRateRemaining
	slotRateReset
	slotReplayed
	slotContentType
	slotContentLength
	hdrSlots
)

// setHeader sets the header key, which must be in canonical form (what
// Header.Set would make of it), to the single value v, held in the
// request's own slot: the same map entry Header.Set writes, without its
// allocation. The slice is capped at one element, so an Add appends to a
// copy, never into the next slot; setting the slot again (X-Raft-Index,
// first when the request arrives, then with the write's index) replaces
// the value as Header.Set would.
func (st *reqState) setHeader(c *gin.Context, slot int, key, v string) {
	st.hdr[slot] = v
	c.Writer.Header()[key] = st.hdr[slot : slot+1 : slot+1]
}

// stateKey is the Keys entry holding the request's *reqState.
type stateKey struct{}

// keyMaps are the Keys maps of requests in flight, each with at most the
// state entry in it between requests (maps keep their room when emptied).
var keyMaps = sync.Pool{New: func() any { return make(map[any]any, 1) }}

// attachState gives c a fresh reqState in a pooled Keys map. The map goes
// back with detachState.
func attachState(c *gin.Context) (*reqState, map[any]any) {
	st := &reqState{}
	keys := keyMaps.Get().(map[any]any)
	keys[stateKey{}] = st
	c.Keys = keys
	return st, keys
}

// detachState empties keys and returns it to the pool once nothing can
// read it: the chain has answered, and c (which gin pools too) no longer
// points to it.
func detachState(c *gin.Context, keys map[any]any) {
	c.Keys = nil
	clear(keys)
	keyMaps.Put(keys)
}

// stateOf is the request's state. A context that did not come through
// requestLog (none does in the server) gets a state of its own.
func stateOf(c *gin.Context) *reqState {
	if v, ok := c.Get(stateKey{}); ok {
		return v.(*reqState)
	}
	st := &reqState{}
	c.Set(stateKey{}, st)
	return st
}

// idemKeyOf is the request's idempotency key, when idemGuard took one.
func idemKeyOf(c *gin.Context) (string, bool) {
	st := stateOf(c)
	return st.idemKey, st.hasIdem
}

// drawOf is the request's draw, when meterGuard named one.
func drawOf(c *gin.Context) *node.Draw {
	if st := stateOf(c); st.hasDraw {
		return &st.draw
	}
	return nil
}
