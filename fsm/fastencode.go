package fsm

import (
	"encoding/binary"

	"github.com/perpd/perpd/fsm/trade"
)

// The write path's CBOR without reflection: the command envelope (encoded
// again when the committer stamps each write), an order placement's
// payload and a group's payload, together about 2.5% of a loaded leader
// with the reflective encoder. Each writes exactly the bytes of
// encMode.Marshal (core deterministic CBOR: integer keys in order, empty
// optional fields left out, every head in its shortest form) and leaves
// anything it does not cover (a bracket, an empty group) to Marshal;
// TestAppendCommandMatchesMarshal, FuzzAppendCommand,
// TestAppendPlaceMatchesMarshal and TestAppendGroupMatchesMarshal hold
// them together, so an entry's bytes do not depend on which encoder wrote
// them.

// appendHead appends a CBOR head: major type major with argument n in
// its shortest form.
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, m|27), n)
	}
}

// appendInt appends v as a CBOR integer (major 0, or major 1 for a
// negative v, whose argument is -1-v).
func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendHead(b, 0, uint64(v))
	}
	return appendHead(b, 1, uint64(-1-v))
}

// appendCommand appends c's canonical encoding.
func appendCommand(b []byte, c *Command) []byte {
	fields := uint64(2)
	for _, present := range [...]bool{c.Account != "", c.KeyID != "", c.IdemKey != "", len(c.ReqHash) > 0, len(c.Payload) > 0} {
		if present {
			fields++
		}
	}
	b = appendHead(b, 5, fields)
	b = appendHead(appendHead(b, 0, 1), 0, uint64(c.Type))
	b = appendInt(appendHead(b, 0, 2), c.TsMs)
	b = appendText(b, 3, c.Account, true)
	b = appendText(b, 4, c.KeyID, true)
	b = appendText(b, 5, c.IdemKey, true)
	b = appendBytes(b, 6, c.ReqHash)
	return appendBytes(b, 7, c.Payload)
}

// commandSize bounds appendCommand's output, to size its buffer once.
func commandSize(c *Command) int {
	return 1 + 2 + 9 + 2 + 9 + 4*(2+9) + len(c.Account) + len(c.KeyID) + len(c.IdemKey) + len(c.ReqHash) + len(c.Payload)
}

// appendPlace appends the canonical encoding of an order placement's
// payload, the other half of decodePlaceFast; ok is false for a bracket,
// which is left to Marshal.
func appendPlace(b []byte, p *trade.PlaceRequest) ([]byte, bool) {
	if p.Bracket != nil {
		return b, false
	}
	fields := uint64(6)
	for _, present := range [...]bool{p.LimitPriceQ8 != 0, p.HasMaxSlippage, p.MaxSlippageQ9 != 0, p.TriggerPriceQ8 != 0,
		p.TriggerKind != "", p.TriggerLevelQ8 != 0, p.Leverage != 0} {
		if present {
			fields++
		}
	}
	b = appendHead(b, 5, fields)
	b = appendText(b, 1, p.OrderID, false)
	b = appendText(b, 2, p.MarketID, false)
	b = appendText(b, 3, p.Side, false)
	b = appendText(b, 4, p.Type, false)
	b = appendInt(appendHead(b, 0, 5), p.Contracts)
	b = appendBool(appendHead(b, 0, 6), p.ReduceOnly)
	b = appendIntField(b, 7, p.LimitPriceQ8)
	if p.HasMaxSlippage {
		b = appendBool(appendHead(b, 0, 8), true)
	}
	b = appendIntField(b, 9, p.MaxSlippageQ9)
	b = appendIntField(b, 10, p.TriggerPriceQ8)
	b = appendText(b, 11, p.TriggerKind, true)
	b = appendIntField(b, 12, p.TriggerLevelQ8)
	return appendIntField(b, 14, p.Leverage), true
}

// appendText appends key and s as a text string, nothing when s is empty
// and omitEmpty.
func appendText(b []byte, key uint64, s string, omitEmpty bool) []byte {
	if s == "" && omitEmpty {
		return b
	}
	return append(appendHead(appendHead(b, 0, key), 3, uint64(len(s))), s...)
}

// appendBytes appends key and p as a byte string, nothing when p is empty
// (omitempty).
func appendBytes(b []byte, key uint64, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	return append(appendHead(appendHead(b, 0, key), 2, uint64(len(p))), p...)
}

// appendIntField appends key and v, nothing when v is zero (omitempty).
func appendIntField(b []byte, key uint64, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendInt(appendHead(b, 0, key), v)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xf5)
	}
	return append(b, 0xf4)
}

// appendGroup appends a group's payload, the other half of
// decodeGroupFast; ok is false for no commands or a nil one (Marshal
// writes null for those).
func appendGroup(b []byte, cmds [][]byte) ([]byte, bool) {
	size := 16
	for _, c := range cmds {
		if c == nil {
			return b, false
		}
		size += 9 + len(c)
	}
	if len(cmds) == 0 {
		return b, false
	}
	if b == nil {
		b = make([]byte, 0, size)
	}
	b = appendHead(appendHead(appendHead(b, 5, 1), 0, 1), 4, uint64(len(cmds)))
	for _, c := range cmds {
		b = append(appendHead(b, 2, uint64(len(c))), c...)
	}
	return b, true
}
