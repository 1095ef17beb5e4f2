package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
)

// The fast restore path (snapshot_fast.go) must give exactly the
// reference decoder's State, or fail and leave the snapshot to it. These
// tests hold it to that on states from the benchmark world, the trading
// simulation, the golden log and random values of every field, and on
// damaged snapshots; every other restore in this package's tests is
// shadowed by the reference too.

// shadowFallbacks counts snapshots the reference decoder read but the
// fast path did not (a perpd-written snapshot should never be one).
var shadowFallbacks atomic.Int64

func init() {
	restoreShadow = func(body []byte, fast *State, err error) {
		if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
			return // benchmarks time the fast path alone
		}
		if errors.Is(err, errFastPanic) {
			panic(fmt.Sprintf("fast restore hit a bug: %v", err))
		}
		ref, rerr := decodeStateRef(body)
		switch {
		case err == nil && rerr != nil:
			panic(fmt.Sprintf("fast restore accepted a body the reference refuses: %v", rerr))
		case err == nil && !reflect.DeepEqual(fast, ref):
			panic("fast restore decoded a state different from the reference's")
		case err != nil && rerr == nil:
			shadowFallbacks.Add(1)
		}
	}
}

// decodeSnapshotRef is decodeSnapshot as it was before the fast path.
func decodeSnapshotRef(data []byte) (*State, uint64, error) {
	if len(data) < len(snapshotMagic)+12 || !bytes.Equal(data[:len(snapshotMagic)], snapshotMagic) {
		return nil, 0, errors.New("not a perpd snapshot")
	}
	rest := data[len(snapshotMagic):]
	version := binary.BigEndian.Uint32(rest[:4])
	index := binary.BigEndian.Uint64(rest[4:12])
	if version > StateVersion {
		return nil, 0, errors.New("newer format")
	}
	st := NewState()
	if err := Unmarshal(rest[12:], st); err != nil {
		return nil, 0, err
	}
	st.Version = StateVersion
	// Before the fast path a fill hook's panic on a malformed state took
	// the node down; now it is a refusal, and so it is here.
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("malformed state: %v", p)
			}
		}()
		st.fillNil()
		return st.Ledger.Check()
	}()
	if err != nil {
		return nil, 0, err
	}
	return st, index, nil
}

// wantFastSame checks a perpd-written snapshot: the fast path must take
// it (no fallback), agree with the reference value for value, re-encode
// to the same bytes, and restore as the reference restore does.
func wantFastSame(t testing.TB, snap []byte) {
	t.Helper()
	body := snap[len(snapshotMagic)+12:]
	fast, err := decodeStateFast(body)
	if err != nil {
		t.Fatalf("fast path refused a perpd snapshot: %v", err)
	}
	ref, err := decodeStateRef(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, ref) {
		t.Fatal("fast and reference decodes differ")
	}
	again, err := Marshal(fast)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, body) {
		t.Fatal("the fast decode re-encodes to different bytes")
	}
	wantSameRestore(t, snap)
}

// wantSameRestore checks decodeSnapshot against decodeSnapshotRef on any
// bytes: the same refusals, the same states. It must never panic.
func wantSameRestore(t testing.TB, data []byte) {
	t.Helper()
	st, idx, err := decodeSnapshot(data)
	rst, ridx, rerr := decodeSnapshotRef(data)
	if (err == nil) != (rerr == nil) {
		t.Fatalf("restore error %v, reference restore error %v", err, rerr)
	}
	// Compared by encoding: the fill hooks build B-trees, whose internal
	// ids differ between any two builds.
	if err == nil && (idx != ridx || !bytes.Equal(encodeState(t, st), encodeState(t, rst))) {
		t.Fatal("restore and reference restore give different states")
	}
	if len(data) < len(snapshotMagic)+12 {
		return
	}
	body := data[len(snapshotMagic)+12:]
	fast, ferr := decodeStateFast(body)
	if errors.Is(ferr, errFastPanic) {
		t.Fatalf("fast path hit a bug: %v", ferr)
	}
	if ferr == nil {
		ref, rerr := decodeStateRef(body)
		if rerr != nil {
			t.Fatalf("fast path accepted a body the reference refuses: %v", rerr)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatal("fast and reference decodes differ")
		}
	}
}

func encodeState(tb testing.TB, st *State) []byte {
	tb.Helper()
	b, err := Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func snapOf(tb testing.TB, m *Machine) []byte {
	tb.Helper()
	b, err := m.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func snapshotOf(t testing.TB, st *State, index uint64) []byte {
	t.Helper()
	body, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(snapshotMagic)
	_ = binary.Write(&b, binary.BigEndian, uint32(StateVersion))
	_ = binary.Write(&b, binary.BigEndian, index)
	b.Write(body)
	return b.Bytes()
}

// smallTradingWorld is BenchmarkScaling's world at n accounts: funded
// accounts with a position, a resting order, a fill and stored answers.
func smallTradingWorld(tb testing.TB, n int) *benchWorld {
	w := newBenchWorld(tb, n, btcBTC)
	rng := rand.New(rand.NewPCG(9, uint64(n)))
	for i := range n {
		side := "buy"
		if i%2 == 1 {
			side = "sell"
		}
		for _, b := range [][]byte{
			w.orderCmd(i, mktOrder(fmt.Sprintf("sp%d", i), "BTC-PERP", side, 1_000)),
			w.orderCmd(i, restingLimit(rng, fmt.Sprintf("sr%d", i), "BTC-PERP", i%2 == 0, 1_000, benchBTCMidQ8, benchTickBTC)),
		} {
			res, _ := w.applyRaw(b)
			w.mustOK(res)
		}
	}
	return w
}

func TestSnapshotFastRestoreMatchesReferenceOnTheBenchmarkWorld(t *testing.T) {
	w := smallTradingWorld(t, 300)
	wantFastSame(t, snapOf(t, w.m))
}

func TestSnapshotFastRestoreMatchesReferenceAfterTradingSimulation(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w := runTradeSim(t, simConfig{seed: 11, accounts: 200, hot: 40, entries: 3000, hashEvery: 1000})
	wantFastSame(t, snapOf(t, w.m))
}

// The golden log uses every command type: its states hold every domain.
func TestSnapshotFastRestoreMatchesReferenceAlongTheGoldenLog(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	entries, _ := readGolden(t)
	m := NewMachine(Options{})
	for i := 0; i < len(entries); i += 8 {
		part := entries[i:min(i+8, len(entries))]
		idx := make([]uint64, len(part))
		data := make([][]byte, len(part))
		for j, e := range part {
			idx[j], data[j] = e.Index, e.Data
		}
		m.ApplyBatch(idx, data)
		if m.Halted() != nil {
			t.Fatal(m.Halted())
		}
		wantFastSame(t, snapOf(t, m))
	}
}

// Random values in every field of every type of State, nil and empty
// collections, extreme integers and non-ASCII text included. It is also
// the guard for new fields: one the fast path does not read makes it
// fall back, and this test fail, until its decoder learns the field.
func TestSnapshotFastRestoreMatchesReferenceOnRandomStates(t *testing.T) {
	for seed := range uint64(300) {
		st := randomState(seed)
		wantFastSame(t, snapshotOf(t, st, seed))
	}
}

// Every restore the simulation makes is shadowed by the reference decoder
// (init above); none may fall back.
func TestShadowRestoreDuringSimulation(t *testing.T) {
	before := shadowFallbacks.Load()
	runSimulation(t, 5, 1500, true)
	if n := shadowFallbacks.Load() - before; n != 0 {
		t.Fatalf("%d perpd snapshots fell back to the reference decoder", n)
	}
}

// Damaged snapshots: every truncation and many single-byte changes of a
// real one restore exactly as the reference restore does (most are
// refused), and the fast path never fails by a bug.
func TestRestoreRefusesDamagedSnapshotsLikeTheReference(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w := smallTradingWorld(t, 3)
	snap := snapOf(t, w.m)
	header := snap[:len(snapshotMagic)+12]
	// Heads whose counts overflow an int (the fuzzer's first find).
	for _, body := range [][]byte{
		{0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0xa1, 0x05, 0xbb, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0xa1, 0x0b, 0xa1, 0x02, 0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		wantSameRestore(t, append(bytes.Clone(header), body...))
	}
	for n := 0; n < len(snap); n++ {
		wantSameRestore(t, snap[:n])
		if n > 64 && n < len(snap)-64 {
			n += 6 // every length near the ends, one in seven between
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 600 {
		i := rng.IntN(len(snap))
		for _, v := range []byte{0x00, 0xff, snap[i] ^ 0x01, snap[i] + 1, []byte{0xf6, 0x1b, 0x7f, 0xbf, 0xc0, byte(rng.IntN(256))}[rng.IntN(6)]} {
			mut := bytes.Clone(snap)
			mut[i] = v
			wantSameRestore(t, mut)
		}
	}
	for range 300 {
		mut := bytes.Clone(snap)
		at := rng.IntN(len(mut))
		switch rng.IntN(3) {
		case 0: // insert bytes
			ins := make([]byte, 1+rng.IntN(4))
			for j := range ins {
				ins[j] = byte(rng.IntN(256))
			}
			mut = append(mut[:at], append(ins, mut[at:]...)...)
		case 1: // delete bytes
			mut = append(mut[:at], mut[min(len(mut), at+1+rng.IntN(8)):]...)
		case 2: // swap two bytes
			j := rng.IntN(len(mut))
			mut[at], mut[j] = mut[j], mut[at]
		}
		wantSameRestore(t, mut)
	}
}

func FuzzSnapshotRestore(f *testing.F) {
	f.Add(snapOf(f, smallTradingWorld(f, 2).m))
	f.Add(snapOf(f, NewMachine(Options{})))
	for seed := range uint64(4) {
		f.Add(snapshotOf(f, randomState(seed), seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		wantSameRestore(t, data)
	})
}

// checkLedger must answer exactly as Ledger.Check, order-dependent
// overflows and first negative accounts included.
func TestSnapshotLedgerCheckAgreesWithLedgerCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	values := []int64{1, -1, 7, 1000, math.MaxInt64, math.MaxInt64 - 3, math.MinInt64, math.MinInt64 + 5, math.MaxInt64 / 2}
	for range 20_000 {
		l := ledger.New()
		for range rng.IntN(6) {
			name := []string{ledger.House, ledger.FeeRevenue, "acct:a:free", "acct:b:free", "acct:c:reserved", "acct:z:margin:BTC-PERP"}[rng.IntN(6)]
			v := values[rng.IntN(len(values))]
			if rng.IntN(2) == 0 {
				v = rng.Int64N(1000) - 100
			}
			l.Balances[name] = v
		}
		var sum int64
		for _, v := range l.Balances {
			sum += v
		}
		l.CreditedMsat = sum
		if rng.IntN(4) == 0 {
			l.CreditedMsat += rng.Int64N(3) - 1
		}
		if rng.IntN(4) == 0 {
			l.PaidMsat = rng.Int64N(5)
			l.CreditedMsat += l.PaidMsat
		}
		got, want := checkLedger(l), l.Check()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("balances %v credited %d paid %d: checkLedger %v, Check %v", l.Balances, l.CreditedMsat, l.PaidMsat, got, want)
		}
	}
}

// randomState fills every exported field of State, recursively, with
// random values (seeded).
func randomState(seed uint64) *State {
	f := &stateFiller{rng: rand.New(rand.NewPCG(seed, 77))}
	st := new(State)
	f.fill(reflect.ValueOf(st).Elem(), 0)
	return st
}

type stateFiller struct{ rng *rand.Rand }

var fillerStrings = []string{"", "a", "BTC-PERP", "acct:x:free", "é€😀", "\u0000", strings.Repeat("long", 70)}

func (f *stateFiller) fill(v reflect.Value, depth int) {
	r := f.rng
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		lo, hi := int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1)
		switch r.IntN(5) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt([]int64{lo, hi, -1, 1, 23, 24, -24, -25}[r.IntN(8)])
		case 2:
			v.SetInt(r.Int64N(1000) - 500)
		default:
			v.SetInt(int64(r.Uint64() >> (64 - bits)))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := v.Type().Bits()
		switch r.IntN(4) {
		case 0:
			v.SetUint(0)
		case 1:
			v.SetUint([]uint64{1, 23, 24, 255, 256, 65535, 65536, math.MaxUint64 >> (64 - bits)}[r.IntN(8)] & (math.MaxUint64 >> (64 - bits)))
		default:
			v.SetUint(r.Uint64() >> (64 - bits))
		}
	case reflect.String:
		s := fillerStrings[r.IntN(len(fillerStrings))]
		if r.IntN(2) == 0 {
			s = fmt.Sprintf("s%d", r.IntN(1000))
		}
		v.SetString(s)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			switch r.IntN(4) {
			case 0:
				v.SetBytes(nil)
			case 1:
				v.SetBytes([]byte{})
			default:
				b := make([]byte, r.IntN(40))
				for i := range b {
					b[i] = byte(r.IntN(256))
				}
				v.SetBytes(b)
			}
			return
		}
		n := f.size(depth)
		if n < 0 {
			return // nil
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		n := f.size(depth)
		if n < 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range n {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if depth > 6 || r.IntN(5) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() || sf.Tag.Get("cbor") == "-" || r.IntN(8) == 0 {
				continue
			}
			f.fill(v.Field(i), depth+1)
		}
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i), depth+1)
		}
	}
}

// size picks a collection's length: -1 for nil, often empty, a few
// elements otherwise (fewer deeper down).
func (f *stateFiller) size(depth int) int {
	switch x := f.rng.IntN(6); {
	case x == 0 || depth > 8:
		return -1
	case x == 1:
		return 0
	default:
		return 1 + f.rng.IntN(max(1, 4-depth/3))
	}
}

// TestIdemRecordStatusRoundTripsAndRefusesPastInt32: a stored answer's
// status (an int32 since the record was packed) restores as it was
// encoded, and a snapshot whose status does not fit is refused by the
// fast path and the reference alike.
func TestIdemRecordStatusRoundTripsAndRefusesPastInt32(t *testing.T) {
	w := smallTradingWorld(t, 2)
	snap := snapOf(t, w.m)
	st, _, err := decodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Idem.Records) == 0 {
		t.Fatal("no stored answers")
	}
	for k, rec := range st.Idem.Records {
		if want := w.m.st.Idem.Records[k]; rec.Status != want.Status || rec.Status != http.StatusCreated {
			t.Fatalf("%s: restored status %d, stored %d", k, rec.Status, want.Status)
		}
	}
	if !bytes.Equal(snapOf(t, w.m), snapshotOf(t, st, w.m.Applied())) {
		t.Fatal("the restored state encodes to other bytes")
	}
	// Key 2 (status) with 201 in CBOR (0x18 0xc9) becomes 2^31.
	created := []byte{0x02, 0x18, 0xc9}
	i := bytes.Index(snap, created)
	if i < 0 {
		t.Fatal("no status 201 in the snapshot")
	}
	mut := append(bytes.Clone(snap[:i]), append([]byte{0x02, 0x1a, 0x80, 0, 0, 0}, snap[i+len(created):]...)...)
	if _, _, err := decodeSnapshotRef(mut); err == nil {
		t.Fatal("the reference restored a status past int32")
	}
	wantSameRestore(t, mut)
}
