package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
)

// The fast restore path.
//
// Restoring through the reflection-driven decoder (Unmarshal) costs well
// over a second at 100,000 accounts, most of it per-field reflection, one
// allocation per string and map growth. decodeStateFast reads the same
// canonical CBOR by hand for the parts of State that grow with the number
// of accounts, sizes every map and slice from its CBOR length, and decodes
// independent parts on all cores. What it does not read by hand it hands,
// as the exact bytes, to Unmarshal.
//
// Its contract: it either fails, and decodeSnapshot then runs the
// reference decoder (so every refusal, and every odd but valid encoding,
// is exactly as before), or it returns a State reflect.DeepEqual to the
// one Unmarshal makes from the same bytes (snapshot_fast_test.go checks
// both, and fuzzes the second). So it accepts only a strict subset of
// CBOR, the one Marshal writes: definite lengths, no tags, no floats or
// simple values but false, true and null, struct keys as strictly
// increasing unsigned integers, no duplicate map keys, and it checks
// everything the reference checks (UTF-8, integer ranges, nesting depth,
// element counts, trailing bytes). Anything else, an unknown field
// included, is a failure, never a guess.

// fastFail is the panic value that abandons the fast path; it never leaves
// decodeStateFast.
type fastFail string

// errFastPanic marks a fast-path failure that was not a fastFail, i.e. a
// bug; the fallback still handles the snapshot, and the tests look for it.
var errFastPanic = errors.New("fast restore: internal panic")

func failf(why string) { panic(fastFail(why)) }

// The reference decoder's limits (decMode in command.go).
const (
	fastMaxDepth = 64
	fastMaxItems = 1 << 27
)

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
// instead of one each. A chunk lives as long as any string or slice cut
// from it: what a restored state can pin that way is at most the size of
// its own strings, which the separate allocations would take anyway.
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

// mapN reads a map head; walk has bounded its count by the bytes present.
func (d *rd) mapN() int {
	m, n := d.head()
	if m != 5 {
		failf("not a map")
	}
	return int(n)
}

func (d *rd) arrN() int {
	m, n := d.head()
	if m != 4 {
		failf("not an array")
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
	var stack [fastMaxDepth + 1]uint64
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
			if d.depth+sp+1 > fastMaxDepth {
				failf("nested too deep")
			}
			if v > fastMaxItems {
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

// fastRun runs the decoding jobs of one snapshot on all cores.
type fastRun struct {
	jobs   chan fastJob
	wg     sync.WaitGroup
	failed atomic.Bool
	mu     sync.Mutex
	err    error
}

type fastJob struct {
	raw   []byte
	depth int
	fn    func(d *rd)
}

// spawn walks the next item of d and queues fn to decode it, from a
// reader of its own, at the same depth.
func (r *fastRun) spawn(d *rd, fn func(d *rd)) {
	depth := d.depth
	raw := d.raw()
	r.wg.Add(1)
	j := fastJob{raw: raw, depth: depth, fn: fn}
	select {
	case r.jobs <- j:
	default: // the workers are behind (or there are none): do it here
		r.run(j)
	}
}

func (r *fastRun) work() {
	for j := range r.jobs {
		r.run(j)
	}
}

func (r *fastRun) run(j fastJob) {
	defer r.wg.Done()
	if r.failed.Load() {
		return
	}
	defer r.catch()
	d := &rd{b: j.raw, depth: j.depth}
	j.fn(d)
	if d.off != len(d.b) {
		failf("job did not read its item exactly")
	}
}

// catch, deferred, turns a panic into the run's failure.
func (r *fastRun) catch() {
	if p := recover(); p != nil {
		r.fail(p)
	}
}

func (r *fastRun) fail(p any) {
	var err error
	if f, ok := p.(fastFail); ok {
		err = errors.New("fast restore: " + string(f))
	} else {
		err = fmt.Errorf("%w: %v", errFastPanic, p)
	}
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.failed.Store(true)
}

// decodeStateFast decodes a snapshot body (the CBOR of State) as
// Unmarshal into NewState() would, or fails (see the contract above).
func decodeStateFast(body []byte) (st *State, err error) {
	workers := min(runtime.GOMAXPROCS(0), 8)
	r := &fastRun{jobs: make(chan fastJob, 64)}
	var pool sync.WaitGroup
	for range workers - 1 {
		pool.Add(1)
		go func() {
			defer pool.Done()
			r.work()
		}()
	}
	st = NewState()
	func() {
		defer func() {
			close(r.jobs)
			if p := recover(); p != nil {
				r.fail(p)
			}
		}()
		d := &rd{b: body}
		decState(r, d, st)
		if d.off != len(body) {
			failf("extraneous data after the state")
		}
	}()
	// The planner is done: help with what is queued.
	r.work()
	r.wg.Wait()
	pool.Wait()
	if r.err != nil {
		return nil, r.err
	}
	return st, nil
}

// decState reads the top level of State into st (NewState()), queueing
// the large domains as jobs.
func decState(r *fastRun, d *rd, st *State) {
	if d.null() {
		failf("null state")
	}
	n := d.mapN()
	d.depth++
	prev := -1
	for range n {
		switch d.key(&prev) {
		case 1:
			st.Version = d.int()
		case 2:
			st.NowMs = d.i64()
		case 3:
			st.Seq = d.u64()
		case 4:
			d.delegate(&st.Genesis)
		case 5:
			if d.null() {
				st.Ledger = nil
				continue
			}
			decLedger(r, d, st.Ledger)
		case 6:
			if d.null() {
				st.Idem = nil
				continue
			}
			decIdem(r, d, st.Idem)
		case 7:
			d.delegate(&st.Nodes)
		case 8:
			if d.null() {
				st.Access = nil
				continue
			}
			decAccess(r, d, st.Access)
		case 9:
			if d.null() {
				st.Funds = nil
				continue
			}
			decFunds(r, d, st.Funds)
		case 10:
			d.delegate(&st.Market)
		case 11:
			if d.null() {
				st.Trade = nil
				continue
			}
			decTrade(r, d, st.Trade)
		case 15:
			if d.null() {
				st.Growth = nil
				continue
			}
			if st.Growth == nil {
				st.Growth = new(growth.State)
			}
			decGrowth(r, d, st.Growth)
		case 20:
			d.delegate(&st.USDx)
		case 30:
			d.delegate(&st.PoR)
		case 40:
			st.FeatureLevel = d.u32()
		default:
			failf("unknown State field")
		}
	}
	d.depth--
}

// checkLedger is l.Check() without sorting every account name when the
// answer cannot depend on the order. Check walks the balances in name
// order and reports the first negative non-house account, or an overflow
// of the running sum, before it compares the total. Without a negative
// non-house balance, and with the positive balances summing within int64,
// no prefix of that walk can overflow (every prefix lies between the
// house's balance and the sum of the positives), so only the total is
// left to compare, and any order gives it. Otherwise Check itself decides.
func checkLedger(l *ledger.Ledger) error {
	var pos, sum int64
	for k, v := range l.Balances {
		if v < 0 && k != ledger.House {
			return l.Check()
		}
		if v > 0 {
			if pos > math.MaxInt64-v {
				return l.Check()
			}
			pos += v
		}
		sum += v // cannot overflow: it lies between the house's balance and pos
	}
	if sum != l.CreditedMsat-l.PaidMsat {
		return l.Check()
	}
	return nil
}
