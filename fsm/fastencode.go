package fsm

import "encoding/binary"

// The log's envelope written without reflection. Every write the leader
// proposes is encoded here once more when the committer stamps it (and a
// group once again around its members), and the reflective encoder was
// about 1% of a loaded leader. appendCommand writes exactly the bytes of
// encMode.Marshal (core deterministic CBOR: keys 1..7 in order, empty
// optional fields left out, every head in its shortest form);
// TestAppendCommandMatchesMarshal and FuzzAppendCommand hold the two
// together, so an entry's bytes do not depend on which encoder wrote them.

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
	text := func(b []byte, key uint64, s string) []byte {
		if s == "" {
			return b
		}
		return append(appendHead(appendHead(b, 0, key), 3, uint64(len(s))), s...)
	}
	bytes := func(b []byte, key uint64, p []byte) []byte {
		if len(p) == 0 {
			return b
		}
		return append(appendHead(appendHead(b, 0, key), 2, uint64(len(p))), p...)
	}
	b = text(b, 3, c.Account)
	b = text(b, 4, c.KeyID)
	b = text(b, 5, c.IdemKey)
	b = bytes(b, 6, c.ReqHash)
	return bytes(b, 7, c.Payload)
}

// commandSize bounds appendCommand's output, to size its buffer once.
func commandSize(c *Command) int {
	return 1 + 2 + 9 + 2 + 9 + 4*(2+9) + len(c.Account) + len(c.KeyID) + len(c.IdemKey) + len(c.ReqHash) + len(c.Payload)
}
