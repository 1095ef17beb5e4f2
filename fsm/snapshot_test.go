package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/perpd/perpd/fsm/ledger"
)

// busyReplica has a bit of every core domain: genesis, node metadata,
// stored idempotent answers, advanced time.
func busyReplica(t *testing.T) *replica {
	r := newReplica(t)
	wantOK(t, r.apply(mustCommand(t, CmdGenesis, 1000, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 42, Deployment: "testnet"})))
	for i := range 3 {
		id := fmt.Sprintf("node%d", i+1)
		wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, 1000, NodeMeta{ID: id, Raft: "127.0.0.1:700" + id[4:], HTTP: "h", Admin: "a"})))
	}
	for i := range 20 {
		wantOK(t, r.apply(noopAt(int64(2000+i), fmt.Sprintf("acct:%d", i), []byte{byte(i)})))
	}
	r.apply(tickAt(5000))
	return r
}

func TestSnapshotRoundTripKeepsStateHash(t *testing.T) {
	src := busyReplica(t)
	snap, err := src.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	dst := newReplica(t)
	if err := dst.m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	dst.next = src.next
	if dst.hash() != src.hash() {
		t.Fatal("restored state hashes differently")
	}
	if dst.m.Applied() != src.m.Applied() {
		t.Fatalf("restored applied index %d, want %d", dst.m.Applied(), src.m.Applied())
	}
	// The restored replica goes on exactly like the original: stored answers
	// replay with their original index, new entries land the same way.
	for _, cmd := range []*Command{
		noopAt(6000, "acct:3", []byte{3}),
		noopAt(6001, "acct:3", []byte{9}),
		noopAt(6002, "fresh", []byte{1}),
		tickAt(6000 + IdemRetentionMs),
	} {
		a, b := src.apply(cmd), dst.apply(cmd)
		if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) || a.Replay != b.Replay || a.Index != b.Index {
			t.Fatalf("answers differ after restore: %+v vs %+v", a, b)
		}
		if src.hash() != dst.hash() {
			t.Fatal("hashes differ after applying the same entry")
		}
	}
}

// TestRestoreLetsTheOldStateGo: the machine keeps its last entry's Ctx
// for the next one; a restore must not leave the replaced state reachable
// through it.
func TestRestoreLetsTheOldStateGo(t *testing.T) {
	r := busyReplica(t)
	snap, err := r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var old weak.Pointer[State]
	r.m.Read(func(st *State, _ uint64) { old = weak.Make(st) })
	if err := r.m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if old.Value() != nil {
		t.Fatal("the replaced state is still reachable")
	}
	runtime.KeepAlive(r.m)
}

func TestSnapshotOfEmptyMachineRestores(t *testing.T) {
	a := newReplica(t)
	snap, err := a.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b := newReplica(t)
	b.apply(tickAt(99)) // some state to be replaced
	if err := b.m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	// The applied index never runs backwards, whatever the header says.
	if b.m.Applied() != 1 {
		t.Fatalf("applied index %d after restoring an older snapshot, want 1", b.m.Applied())
	}
	_, ha, _ := a.m.StateHash()
	if _, hb, _ := b.m.StateHash(); ha != hb {
		t.Fatal("restoring an empty snapshot must give the empty state")
	}
}

func TestRestoreRefusesGarbage(t *testing.T) {
	r := busyReplica(t)
	before := r.hash()
	good, err := r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	header := good[:len(snapshotMagic)+12]
	cases := map[string][]byte{
		"empty":             nil,
		"magic only":        []byte("PERPDSNP"),
		"truncated header":  good[:len(snapshotMagic)+11],
		"wrong magic":       append([]byte("PERPDSNQ"), good[len(snapshotMagic):]...),
		"json":              []byte(`{"version":1,"nowMs":"5"}`),
		"body not cbor":     append(bytes.Clone(header), 0xff, 0xff, 0xff),
		"body truncated":    good[:len(good)-3],
		"body not a state":  append(bytes.Clone(header), mustMarshal(t, []string{"a", "b"})...),
		"trailing bytes":    append(bytes.Clone(good), 0x00),
		"header, no body":   bytes.Clone(header),
		"random bytes 1234": bytes.Repeat([]byte{0x5a}, 1234),
	}
	for name, b := range cases {
		if err := r.m.Restore(b); err == nil {
			t.Errorf("%s: restore accepted", name)
		}
	}
	if r.hash() != before {
		t.Fatal("a refused restore changed the state")
	}
}

func TestRestoreRefusesNewerVersion(t *testing.T) {
	r := busyReplica(t)
	before := r.hash()
	snap, err := r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(snap[len(snapshotMagic):], StateVersion+1)
	if err := r.m.Restore(snap); err == nil {
		t.Fatal("a snapshot from a newer build must be refused")
	}
	if r.hash() != before {
		t.Fatal("a refused restore changed the state")
	}
	binary.BigEndian.PutUint32(snap[len(snapshotMagic):], StateVersion)
	if err := r.m.Restore(snap); err != nil {
		t.Fatalf("the current version must restore: %v", err)
	}
}

func TestRestoreFillsDomainsMissingFromOldSnapshots(t *testing.T) {
	// A state written before the idempotency store and node table existed.
	old := &State{Version: StateVersion, NowMs: 500, Ledger: ledger.New()}
	var b bytes.Buffer
	b.Write(snapshotMagic)
	_ = binary.Write(&b, binary.BigEndian, uint32(StateVersion))
	_ = binary.Write(&b, binary.BigEndian, uint64(7))
	b.Write(mustMarshal(t, old))

	r := newReplica(t)
	if err := r.m.Restore(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	r.next = 8
	wantOK(t, r.apply(noopAt(600, "K", []byte{1})))
	wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, 600, NodeMeta{ID: "n", Raft: "r"})))
	if r.now() != 600 {
		t.Fatalf("now %d", r.now())
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Raft restores at the index its metadata gives; the snapshot's header,
// written by whatever cluster took it, does not move Applied().
func TestRestoreAtTakesTheIndexFromRaftNotTheHeader(t *testing.T) {
	src := busyReplica(t) // header index = src's applied index (~25)
	snap := mustSnapshot(t, src.m)
	_, want, _ := src.m.StateHash()

	// A header far below: the index raft gives wins.
	dst := newReplica(t)
	for range 100 {
		dst.apply(tickAt(10))
	}
	if err := dst.m.RestoreAt(snap, 500); err != nil {
		t.Fatal(err)
	}
	if dst.m.Applied() != 500 {
		t.Fatalf("applied %d after a restore at 500 (header %d)", dst.m.Applied(), src.m.Applied())
	}
	if _, got, _ := dst.m.StateHash(); got != want {
		t.Fatal("restored state differs")
	}
	// A header far above: raft's index wins too.
	var hdr bytes.Buffer
	hdr.Write(snap[:12])
	_ = binary.Write(&hdr, binary.BigEndian, uint64(1_000_000))
	hdr.Write(snap[20:])
	other := newReplica(t)
	if err := other.m.RestoreAt(hdr.Bytes(), 7); err != nil {
		t.Fatal(err)
	}
	if other.m.Applied() != 7 {
		t.Fatalf("applied %d, want raft's 7 whatever the header says", other.m.Applied())
	}
	// Never backwards: a restore at an index below the applied one keeps it.
	if err := dst.m.RestoreAt(snap, 3); err != nil {
		t.Fatal(err)
	}
	if dst.m.Applied() != 500 {
		t.Fatalf("applied index ran backwards to %d", dst.m.Applied())
	}
}

// The snapshot and the hash encode State a field at a time, through a
// buffer sized from the last encoding (encode_fields.go); the bytes must
// stay Marshal's, byte for byte, whatever the size hints and whichever
// omitempty fields are present, since replicas and old snapshots compare
// them.
func TestSnapshotAndHashEncodeAsMarshal(t *testing.T) {
	fresh := newReplica(t) // before genesis: the omitempty fields absent
	busy := busyReplica(t)
	full := busyReplica(t)
	full.m.st.FeatureLevel = 7 // the last key, in its two-byte form
	// The idempotency store is written a record at a time in the order
	// of the keys' encodings: keys across every head length, some equal
	// in length, a nil record, a tombstone and an empty order.
	for _, n := range []int{1, 5, 5, 23, 24, 24, 200, 255, 256, 70000} {
		k := strings.Repeat(string(rune('a'+n%26)), n-1) + string(rune('0'+len(full.m.st.Idem.Records)%10))
		full.m.st.Idem.Records[k] = &IdemRecord{ReqHash: []byte{byte(n)}, Status: 200, Body: []byte("{}"), Index: uint64(n), Evicted: n == 24}
		full.m.st.Idem.Order = append(full.m.st.Idem.Order, k)
	}
	full.m.st.Idem.Records["nil-record"] = nil
	noOrder := busyReplica(t)
	noOrder.m.st.Idem.Order = nil
	noIdem := busyReplica(t)
	noIdem.m.st.Idem = nil
	for _, r := range []*replica{fresh, busy, full, noOrder, noIdem} {
		want, err := Marshal(r.m.st)
		if err != nil {
			t.Fatal(err)
		}
		for _, hint := range []int64{0, 1, int64(len(want)) - 1, int64(len(want)), 10 * int64(len(want))} {
			r.m.encodedSize.Store(hint)
			r.m.largestField.Store(hint / 2)
			snap, err := r.m.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			header := append(append([]byte{}, snapshotMagic...), 0, 0, 0, 0)
			binary.BigEndian.PutUint32(header[len(snapshotMagic):], uint32(StateVersion))
			header = binary.BigEndian.AppendUint64(header, r.m.Applied())
			if !bytes.Equal(snap, append(header, want...)) {
				t.Fatalf("hint %d: the snapshot is not header+Marshal(State)", hint)
			}
			r.m.largestField.Store(hint)
			_, h, err := r.m.StateHash()
			sum := sha256.Sum256(want)
			if err != nil || h != hex.EncodeToString(sum[:]) {
				t.Fatalf("hint %d: state hash %s %v, want SHA-256 of Marshal(State)", hint, h, err)
			}
		}
	}
}
