package fsm

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

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
	// The few struct levels the planner reads in place are not walked;
	// limits tight enough to refuse them leave everything to the reference.
	if lim := refLimits(); lim.depth < 8 || lim.pairs < 64 || lim.array < 64 {
		return nil, errors.New("fast restore: the reference decoder's limits are too tight")
	}
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
