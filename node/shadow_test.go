package node

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// shadowLog writes n client-style entries (plus a configuration entry, as
// raft's log has) to a log store, from index 1, and applies the same to a
// reference machine, keeping its encoded state after every entry.
func shadowLog(t *testing.T, n int) (*raft.InmemStore, map[uint64][]byte) {
	t.Helper()
	logs := raft.NewInmemStore()
	ref := fsm.NewMachine(fsm.Options{})
	states := map[uint64][]byte{}
	for i := uint64(1); i <= uint64(n); i++ {
		l := &raft.Log{Index: i, Term: 1, Type: raft.LogCommand}
		if i == 1 {
			l.Type = raft.LogConfiguration
		} else {
			cmd := &fsm.Command{Type: fsm.CmdNoop, TsMs: 1_700_000_000_000 + int64(i),
				IdemKey: fmt.Sprintf("acct:a:%d", i), ReqHash: fsm.RequestHash([]byte{byte(i)})}
			b, err := cmd.Encode()
			if err != nil {
				t.Fatal(err)
			}
			l.Data = b
		}
		if err := logs.StoreLog(l); err != nil {
			t.Fatal(err)
		}
		var data []byte
		if l.Type == raft.LogCommand {
			data = l.Data
		}
		ref.ApplyBatch([]uint64{i}, [][]byte{data})
		b, err := ref.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		states[i] = b
	}
	return logs, states
}

// The shadow's snapshot at index i is, byte for byte, the state a machine
// that applied the log up to i encodes: from an empty start, moving on,
// after a reset from a stored snapshot, and asked for an index behind it.
func TestShadowSnapshotEqualsTheStateAtItsIndex(t *testing.T) {
	logs, states := shadowLog(t, 300)
	snaps := raft.NewInmemSnapshotStore()
	sh := &shadow{logs: logs, snaps: snaps}
	for _, at := range []uint64{120, 121, 250} {
		b, err := sh.snapshotAt(at)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, states[at]) {
			t.Fatalf("shadow at %d differs from the state at %d", at, at)
		}
	}
	// A stored snapshot at 200 and a reset (the live machine was
	// restored): the shadow starts from the store and replays from 201.
	sink, err := snaps.Create(raft.SnapshotVersionMax, 200, 1, raft.Configuration{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(states[200]); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	sh.reset()
	if b, err := sh.snapshotAt(300); err != nil || !bytes.Equal(b, states[300]) {
		t.Fatalf("after a reset: %v, equal %v", err, bytes.Equal(b, states[300]))
	}
	// Behind its own index, the shadow rebuilds (from the store at 200).
	if b, err := sh.snapshotAt(260); err != nil || !bytes.Equal(b, states[260]) {
		t.Fatalf("behind: %v, equal %v", err, bytes.Equal(b, states[260]))
	}
	// An entry the log no longer has: an error, never a wrong state.
	if err := logs.DeleteRange(280, 290); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.snapshotAt(300); err == nil {
		t.Fatal("the shadow replayed past a missing entry")
	}
	if sh.m != nil {
		t.Fatal("a shadow left half-replayed is kept")
	}
}

// raft's Snapshot call records an index and encodes nothing: Persist does,
// from the shadow, and writes the state at that index even though the
// live machine moved on meanwhile.
func TestLazySnapshotPersistsTheStateAtItsIndex(t *testing.T) {
	logs, states := shadowLog(t, 100)
	live := fsm.NewMachine(fsm.Options{})
	for i := uint64(1); i <= 60; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		var data []byte
		if l.Type == raft.LogCommand {
			data = l.Data
		}
		live.ApplyBatch([]uint64{i}, [][]byte{data})
	}
	f := newRaftFSM(live, nil)
	f.shadow = &shadow{logs: logs, snaps: raft.NewInmemSnapshotStore()}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, lazy := snap.(*lazySnapshot); !lazy {
		t.Fatalf("snapshot is %T", snap)
	}
	for i := uint64(61); i <= 100; i++ { // apply goes on
		var l raft.Log
		_ = logs.GetLog(i, &l)
		live.ApplyBatch([]uint64{i}, [][]byte{l.Data})
	}
	store := raft.NewInmemSnapshotStore()
	sink, _ := store.Create(raft.SnapshotVersionMax, 60, 1, raft.Configuration{}, 0, nil)
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	_, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	if !bytes.Equal(b, states[60]) {
		t.Fatal("persisted snapshot is not the state at its index")
	}
}

// BenchmarkSnapshotStall measures how long raft's Snapshot call holds the
// apply goroutine with 50,000 idempotency records in the state: lazy (the
// shadow encodes later, beside apply) against encoding the live state.
func BenchmarkSnapshotStall(b *testing.B) {
	m := fsm.NewMachine(fsm.Options{})
	for i := uint64(1); i <= 50_000; i++ {
		cmd := &fsm.Command{Type: fsm.CmdNoop, TsMs: 1_700_000_000_000 + int64(i), IdemKey: fmt.Sprintf("acct:a:%d", i),
			ReqHash: fsm.RequestHash([]byte(fmt.Sprint(i)))}
		data, _ := cmd.Encode()
		m.Apply(i, data)
	}
	b.Run("lazy", func(b *testing.B) {
		f := newRaftFSM(m, nil)
		f.shadow = &shadow{logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		for i := 0; i < b.N; i++ {
			if _, err := f.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode-live", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := m.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The shadow's hash at an index is the hash of the state at that index.
func TestShadowHashIsTheStateHashAtItsIndex(t *testing.T) {
	logs, states := shadowLog(t, 80)
	sh := &shadow{logs: logs, snaps: raft.NewInmemSnapshotStore()}
	for _, at := range []uint64{40, 80} {
		h, err := sh.hashAt(at)
		if err != nil {
			t.Fatal(err)
		}
		ref := fsm.NewMachine(fsm.Options{})
		if err := ref.RestoreAt(states[at], at); err != nil {
			t.Fatal(err)
		}
		if _, want, _ := ref.StateHash(); h != want {
			t.Fatalf("hash at %d: %s, want %s", at, h, want)
		}
	}
}

// snapshotAt returns the encoded state at index (tests read it whole).
func (s *shadow) snapshotAt(index uint64) ([]byte, error) {
	var buf bytes.Buffer
	if err := s.writeSnapshotAt(index, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
