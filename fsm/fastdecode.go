package fsm

import (
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// Fast decoding of the entries every order brings: the command envelope,
// an order's payload and a group of commands. cbor's reflective decoder
// was a fifth of applying a market order. These decoders take only the
// canonical form Marshal writes (definite lengths, shortest arguments,
// integer keys in ascending order, each field in its own CBOR type,
// nothing after the map) and report false for anything else, which the
// caller then decodes with Unmarshal: so an input decodes to the same
// value whichever path takes it (fastdecode_test.go checks both on the
// same inputs), and what the fast path declines still gets Unmarshal's
// answer, refusals included.

// canon reads canonical CBOR items off b. The first mismatch clears ok;
// every read after that returns zero values.
type canon struct {
	b  []byte
	ok bool
}

// head reads an item's initial byte and argument (RFC 8949 section 3),
// in its shortest form only.
func (r *canon) head() (major byte, arg uint64) {
	if !r.ok || len(r.b) == 0 {
		r.ok = false
		return 0, 0
	}
	major, info := r.b[0]>>5, r.b[0]&0x1f
	var n int
	var least uint64 // the shortest form's bound: smaller takes fewer bytes
	switch info {
	case 24:
		n, least = 1, 24
	case 25:
		n, least = 2, 1<<8
	case 26:
		n, least = 4, 1<<16
	case 27:
		n, least = 8, 1<<32
	default:
		if info > 27 { // indefinite lengths and reserved values
			r.ok = false
			return 0, 0
		}
		r.b = r.b[1:]
		return major, uint64(info)
	}
	if len(r.b) < 1+n {
		r.ok = false
		return 0, 0
	}
	var buf [8]byte
	copy(buf[8-n:], r.b[1:1+n])
	arg = binary.BigEndian.Uint64(buf[:])
	if arg < least {
		r.ok = false
		return 0, 0
	}
	r.b = r.b[1+n:]
	return major, arg
}

// expect reads a head of the given major type and returns its argument.
func (r *canon) expect(major byte) uint64 {
	m, arg := r.head()
	if m != major {
		r.ok = false
		return 0
	}
	return arg
}

// mapLen reads a map's head; more than limit pairs is not ours.
func (r *canon) mapLen(limit uint64) uint64 {
	n := r.expect(5)
	if n > limit {
		r.ok = false
	}
	return n
}

// key reads a map key: an unsigned integer above the previous one.
func (r *canon) key(prev *uint64) uint64 {
	k := r.expect(0)
	if k <= *prev {
		r.ok = false
	}
	*prev = k
	return k
}

func (r *canon) uint(limit uint64) uint64 {
	v := r.expect(0)
	if v > limit {
		r.ok = false
	}
	return v
}

func (r *canon) int64() int64 {
	m, arg := r.head()
	if (m != 0 && m != 1) || arg > math.MaxInt64 {
		r.ok = false
		return 0
	}
	if m == 1 {
		return -1 - int64(arg)
	}
	return int64(arg)
}

func (r *canon) bool() bool {
	m, arg := r.head()
	if m != 7 || (arg != 20 && arg != 21) {
		r.ok = false
		return false
	}
	return arg == 21
}

// raw reads the content of a byte or text string (major 2 or 3).
func (r *canon) raw(major byte) []byte {
	n := r.expect(major)
	if !r.ok || n > uint64(len(r.b)) {
		r.ok = false
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

// bytes reads a byte string: a copy, or, with alias, b's own bytes.
func (r *canon) bytes(alias bool) []byte {
	s := r.raw(2)
	if alias || !r.ok {
		return s
	}
	return append([]byte{}, s...)
}

// utf8 reads a text string's bytes, which must be UTF-8 (as Unmarshal
// requires).
func (r *canon) utf8() []byte {
	s := r.raw(3)
	if !r.ok || !utf8.Valid(s) {
		r.ok = false
		return nil
	}
	return s
}

// text reads a text string. A few values that every order carries come
// back as constants rather than fresh strings.
func (r *canon) text() string { return r.textOf(r.utf8()) }

// textOf is text for the bytes utf8 read.
func (r *canon) textOf(s []byte) string {
	if !r.ok {
		return ""
	}
	switch string(s) { // the conversion in a switch does not allocate
	case "buy":
		return "buy"
	case "sell":
		return "sell"
	case trade.TypeMarket:
		return trade.TypeMarket
	case trade.TypeLimit:
		return trade.TypeLimit
	}
	return string(s)
}

// done reports whether everything decoded and nothing follows.
func (r *canon) done() bool { return r.ok && len(r.b) == 0 }

// decodeCommandFast decodes a canonical command into the zero c. With
// alias, c.Payload is b's own bytes (the machine's entries: the payload
// is decoded again within the entry and kept by nothing). With known (the
// state's access domain; nil: none), an account or key id the state holds
// comes back as the state's own string: no allocation, and what the
// command leaves behind (orders, fills) shares it.
func decodeCommandFast(b []byte, c *Command, alias bool, known *access.State) bool {
	r := canon{b: b, ok: true}
	var prev uint64
	for n := r.mapLen(7); n > 0 && r.ok; n-- {
		switch r.key(&prev) {
		case 1:
			c.Type = CmdType(r.uint(math.MaxUint16))
		case 2:
			c.TsMs = r.int64()
		case 3:
			s := r.utf8()
			if id, ok := known.AccountIDOf(s); ok {
				c.Account = id
			} else {
				c.Account = string(s)
			}
		case 4:
			s := r.utf8()
			if id, ok := known.KeyIDOf(s); ok {
				c.KeyID = id
			} else {
				c.KeyID = string(s)
			}
		case 5:
			c.IdemKey = r.text()
		case 6:
			c.ReqHash = r.bytes(false)
		case 7:
			c.Payload = r.bytes(alias)
		default:
			return false
		}
	}
	return r.done()
}

// decodePlaceFast decodes a canonical order payload into the zero p; a
// bracket is left to Unmarshal.
func decodePlaceFast(b []byte, p *trade.PlaceRequest) bool {
	return decodePlaceShared(b, p, "", nil)
}

// decodePlaceShared is decodePlaceFast that allocates neither of the
// strings every order brings when it can share one with the same value.
// The order id is the client's idempotency key (SPEC), so the command's
// scoped key ("acct:<id>:<key>", idemKey) ends with it: the id is that
// key's tail. A market id markets knows (nil: none) is the market's own
// string. Both stay alive as long as an order or fill keeps them, as the
// account and key ids shared by decodeCommandFast do.
func decodePlaceShared(b []byte, p *trade.PlaceRequest, idemKey string, markets *market.State) bool {
	r := canon{b: b, ok: true}
	var prev uint64
	for n := r.mapLen(14); n > 0 && r.ok; n-- {
		switch r.key(&prev) {
		case 1:
			s := r.utf8()
			if tail := len(idemKey) - len(s); r.ok && tail >= 0 && idemKey[tail:] == string(s) {
				p.OrderID = idemKey[tail:]
			} else {
				p.OrderID = r.textOf(s)
			}
		case 2:
			s := r.utf8()
			if id, ok := markets.MarketIDOf(s); ok {
				p.MarketID = id
			} else {
				p.MarketID = r.textOf(s)
			}
		case 3:
			p.Side = r.text()
		case 4:
			p.Type = r.text()
		case 5:
			p.Contracts = r.int64()
		case 6:
			p.ReduceOnly = r.bool()
		case 7:
			p.LimitPriceQ8 = r.int64()
		case 8:
			p.HasMaxSlippage = r.bool()
		case 9:
			p.MaxSlippageQ9 = r.int64()
		case 10:
			p.TriggerPriceQ8 = r.int64()
		case 11:
			p.TriggerKind = r.text()
		case 12:
			p.TriggerLevelQ8 = r.int64()
		case 14:
			p.Leverage = r.int64()
		default:
			return false
		}
	}
	return r.done()
}

// decodeGroupFast decodes a canonical group of 1 to GroupMax commands into
// the zero g, each command b's own bytes.
func decodeGroupFast(b []byte, g *GroupPayload) bool {
	r := canon{b: b, ok: true}
	var prev uint64
	if r.mapLen(1) != 1 || r.key(&prev) != 1 {
		return false
	}
	n := r.expect(4)
	if !r.ok || n == 0 || n > GroupMax {
		return false
	}
	g.Cmds = make([][]byte, n)
	for i := range g.Cmds {
		g.Cmds[i] = r.bytes(true)
	}
	return r.done()
}
