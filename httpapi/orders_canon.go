package httpapi

import (
	"strconv"

	"github.com/perpd/perpd/fsm/wire"
)

// appendCanonicalJSON writes the order's canonical form (the bytes
// encoding/json would write, which the request hash covers) faster than
// reflection; ok false sends the caller back to encoding/json. It writes
// the order as encoding/json does, for the
// common order with no trigger and no bracket and field texts that JSON
// writes verbatim; anything else is left to encoding/json. Every order's
// hash goes through here on the write path (a placement is hashed on the
// node that takes it), and reflection was 2% of a loaded leader.
// TestOrderCanonicalJSONMatchesEncodingJSON holds the two to the same
// bytes.
func (r OrderRequest) appendCanonicalJSON(b []byte) ([]byte, bool) {
	if r.Trigger != nil || r.Bracket != nil || !wire.PlainJSON(r.MarketID) || !wire.PlainJSON(r.Side) || !wire.PlainJSON(r.Type) {
		return b, false
	}
	b = append(b, `{"marketId":"`...)
	b = append(b, r.MarketID...)
	b = append(b, `","side":"`...)
	b = append(b, r.Side...)
	b = append(b, `","type":"`...)
	b = append(b, r.Type...)
	b = append(b, `","contracts":`...)
	b = appendWireInt(b, &r.Contracts)
	b = append(b, `,"reduceOnly":`...)
	b = strconv.AppendBool(b, r.ReduceOnly)
	b = append(b, `,"limitPriceQ8":`...)
	b = appendWireInt(b, r.LimitPriceQ8)
	b = append(b, `,"triggerPriceQ8":`...)
	b = appendWireInt(b, r.TriggerPriceQ8)
	b = append(b, `,"leverage":`...)
	b = appendWireInt(b, r.Leverage)
	b = append(b, `,"maxSlippageQ9":`...)
	b = appendWireInt(b, r.MaxSlippageQ9)
	return append(b, `,"trigger":null,"bracket":null}`...), true
}

// appendWireInt writes a wire.Int as encoding/json does, or null for a
// nil pointer.
func appendWireInt(b []byte, v *wire.Int) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return v.AppendJSON(b)
}
