package fsm

import (
	"encoding/binary"
	"math"
	"strings"
	"sync"
	"unicode/utf8"
)

// The reader of the fast restore path (snapshot_fast.go): CBOR items,
// checked as the reference decoder checks them, and the arena their
// strings are cut from.

// walkDepthMax bounds the nesting walk follows (its stack is an array);
// the reference decoder's own limits (decMode in command.go) apply too.
const walkDepthMax = 64

// refLimits are the reference decoder's nesting and element limits: the
// fast path must refuse whatever the reference refuses.
var refLimits = sync.OnceValue(func() (l struct{ depth, array, pairs int }) {
	o := decMode.DecOptions()
	l.depth, l.array, l.pairs = min(o.MaxNestedLevels, walkDepthMax), o.MaxArrayElements, o.MaxMapPairs
	return l
})

// rd reads one CBOR item (a job's bytes) front to back.
type rd struct {
	b   []byte
	off int
	// depth is the nesting level of the item being read: the decoders
	// that hand items to Unmarshal pass it to walk.
	depth int
	// small caches recent strings of fields with few distinct values
	// (market ids, statuses), so each is allocated once per job.
	small [64]string
	ar    arena
}

// arena hands out strings and byte slices from shared chunks, so that a
// restore makes thousands of allocations for its millions of strings
// instead of one each (and the restored heap holds that many fewer
// objects for the collector to mark). A chunk lives as long as any string
// or slice cut from it, so what chunks can keep alive after most of their
// strings are gone is bounded by the strings the snapshot held.
// Strings come from a strings.Builder, which never changes bytes it has
// handed out; byte slices are capped at their length, so an append to
// one moves it rather than overwrite its neighbour.
type arena struct {
	s strings.Builder
	b []byte
}

// arenaChunk is the size of one chunk; arenaMax the longest string or
// slice cut from a chunk (a longer one is allocated alone).
const (
	arenaChunk = 4096
	arenaMax   = 256
)

func (a *arena) str(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if len(p) > arenaMax {
		return string(p)
	}
	if a.s.Cap()-a.s.Len() < len(p) {
		a.s = strings.Builder{}
		a.s.Grow(arenaChunk)
	}
	at := a.s.Len()
	a.s.Write(p)
	return a.s.String()[at:]
}

// bytes copies p; an empty p gives a non-nil empty slice, as the
// reference decoder's does.
func (a *arena) bytes(p []byte) []byte {
	if len(p) == 0 || len(p) > arenaMax {
		out := make([]byte, len(p))
		copy(out, p)
		return out
	}
	if cap(a.b)-len(a.b) < len(p) {
		a.b = make([]byte, 0, arenaChunk)
	}
	at := len(a.b)
	a.b = append(a.b, p...)
	return a.b[at:len(a.b):len(a.b)]
}

// head reads the initial byte and argument of a definite-length item of
// major types 0 to 6.
func (d *rd) head() (major byte, arg uint64) {
	off := d.off
	if off >= len(d.b) {
		failf("truncated")
	}
	b := d.b[off:]
	c := b[0]
	major = c >> 5
	switch ai := c & 31; {
	case ai < 24:
		d.off = off + 1
		return major, uint64(ai)
	case ai == 24 && len(b) >= 2:
		d.off = off + 2
		return major, uint64(b[1])
	case ai == 25 && len(b) >= 3:
		d.off = off + 3
		return major, uint64(binary.BigEndian.Uint16(b[1:]))
	case ai == 26 && len(b) >= 5:
		d.off = off + 5
		return major, uint64(binary.BigEndian.Uint32(b[1:]))
	case ai == 27 && len(b) >= 9:
		d.off = off + 9
		return major, binary.BigEndian.Uint64(b[1:])
	}
	failf("indefinite, reserved or truncated head")
	return 0, 0
}

// null consumes a CBOR null if one is next.
func (d *rd) null() bool {
	if d.off < len(d.b) && d.b[d.off] == 0xf6 {
		d.off++
		return true
	}
	return false
}

func (d *rd) i64() int64 {
	m, v := d.head()
	if v > math.MaxInt64 {
		failf("integer overflows int64")
	}
	switch m {
	case 0:
		return int64(v)
	case 1:
		return -1 - int64(v)
	}
	failf("not an integer")
	return 0
}

func (d *rd) u64() uint64 {
	m, v := d.head()
	if m != 0 {
		failf("not an unsigned integer")
	}
	return v
}

func (d *rd) int() int {
	v := d.i64()
	if int64(int(v)) != v {
		failf("integer overflows int")
	}
	return int(v)
}

func (d *rd) i32() int32 {
	v := d.i64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		failf("integer overflows int32")
	}
	return int32(v)
}

func (d *rd) i8() int8 {
	v := d.i64()
	if v < math.MinInt8 || v > math.MaxInt8 {
		failf("integer overflows int8")
	}
	return int8(v)
}

func (d *rd) u8() uint8 {
	v := d.u64()
	if v > math.MaxUint8 {
		failf("integer overflows uint8")
	}
	return uint8(v)
}

func (d *rd) u32() uint32 {
	v := d.u64()
	if v > math.MaxUint32 {
		failf("integer overflows uint32")
	}
	return uint32(v)
}

func (d *rd) bool() bool {
	if d.off < len(d.b) {
		switch d.b[d.off] {
		case 0xf4:
			d.off++
			return false
		case 0xf5:
			d.off++
			return true
		}
	}
	failf("not a bool")
	return false
}

// span reads the payload of a string of major type want.
func (d *rd) span(want byte) []byte {
	m, n := d.head()
	if m != want {
		failf("wrong string type")
	}
	if n > uint64(len(d.b)-d.off) {
		failf("truncated string")
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

// text reads a text string's bytes, which must be valid UTF-8.
func (d *rd) text() []byte {
	s := d.span(3)
	if !utf8.Valid(s) {
		failf("invalid UTF-8")
	}
	return s
}

func (d *rd) str() string { return d.ar.str(d.text()) }

// strSmall is str for a field with few distinct values.
func (d *rd) strSmall() string {
	b := d.text()
	if len(b) == 0 {
		return ""
	}
	slot := &d.small[(uint(len(b))*31+uint(b[0])*7+uint(b[len(b)-1]))&63]
	if *slot != string(b) {
		*slot = d.ar.str(b)
	}
	return *slot
}

// bytes reads a byte string into a fresh slice (non-nil when empty, as
// the reference makes it), or null into nil.
func (d *rd) bytes() []byte {
	if d.null() {
		return nil
	}
	return d.ar.bytes(d.span(2))
}

// mapN reads a map head. The count is at most the bytes left (walk has
// also held the maps of every job to the reference's limits; the few
// structs the planner reads in place have a handful of known keys).
func (d *rd) mapN() int {
	m, n := d.head()
	if m != 5 || n > uint64(len(d.b)-d.off) {
		failf("not a map, or a map longer than its bytes")
	}
	return int(n)
}

func (d *rd) arrN() int {
	m, n := d.head()
	if m != 4 || n > uint64(len(d.b)-d.off) {
		failf("not an array, or an array longer than its bytes")
	}
	return int(n)
}

// key reads a struct's next field key: an unsigned integer above prev.
func (d *rd) key(prev *int) int {
	m, v := d.head()
	if m != 0 || v > 1<<16 || int(v) <= *prev {
		failf("struct key not an increasing unsigned integer")
	}
	*prev = int(v)
	return int(v)
}

// walk checks the well-formedness of the next item, as the reference's
// pre-pass does and more strictly (see the contract above), and skips it.
// d.depth is the nesting level of the container holding the item.
func (d *rd) walk() {
	lim := refLimits()
	var stack [walkDepthMax + 1]uint64
	sp := 0
	pending := uint64(1)
	for {
		for pending == 0 {
			if sp == 0 {
				return
			}
			sp--
			pending = stack[sp]
		}
		pending--
		if d.off >= len(d.b) {
			failf("truncated")
		}
		if c := d.b[d.off]; c >= 0xe0 {
			if c < 0xf4 || c > 0xf6 {
				failf("float or simple value")
			}
			d.off++
			continue
		}
		m, v := d.head()
		rest := uint64(len(d.b) - d.off)
		switch m {
		case 2, 3:
			if v > rest {
				failf("truncated string")
			}
			d.off += int(v)
		case 4, 5:
			if d.depth+sp+1 > lim.depth {
				failf("nested too deep")
			}
			if m == 4 && v > uint64(lim.array) || m == 5 && v > uint64(lim.pairs) {
				failf("too many elements")
			}
			if m == 5 {
				v *= 2
			}
			if v > rest {
				failf("truncated container")
			}
			stack[sp] = pending
			sp++
			pending = v
		case 6:
			failf("tag")
		}
	}
}

// raw walks the next item and returns its bytes.
func (d *rd) raw() []byte {
	start := d.off
	d.walk()
	return d.b[start:d.off]
}

// delegate decodes the next item into v (a pointer to the field the
// reference decoder would fill) with the reference decoder itself.
func (d *rd) delegate(v any) {
	if err := Unmarshal(d.raw(), v); err != nil {
		failf("reference decoder refused a field")
	}
}
