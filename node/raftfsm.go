package node

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// raftFSM adapts fsm.Machine to raft.BatchingFSM and tells waiters when
// the applied index moves.
type raftFSM struct {
	m *fsm.Machine

	mu      sync.Mutex
	applied chan struct{} // closed and replaced after every batch
	publish func([]fsm.Event)
	// gap, when set, is told that a restore skipped entries: their
	// events were never emitted here.
	gap func()

	// halted is called once when the machine halts.
	halted   func(*fsm.Halt)
	haltOnce sync.Once

	// shadow encodes snapshots off the apply path (shadow.go).
	shadow *shadow
	// porBuilds builds the machine's Proof of Reserves snapshots on the
	// shadow (porbuild.go); dropped with the shadow on a restore.
	porBuilds *porBuilder
	// archive, when a test turns it on, records what was applied
	// (archive.go).
	archive *applyArchive

	checkRecorder // observer and last conservation check (observe.go)

	// figures are what /healthz reads of the state, published after
	// every batch and restore: a probe never waits on the machine's lock,
	// which a batch or a restore holds (and a pending one blocks readers
	// behind). busySince (monoNow, 0 when idle) marks a batch that holds
	// or waits for that lock; restoring a snapshot being read and installed.
	figures   atomic.Pointer[StateFigures]
	busySince atomic.Int64
	restoring atomic.Bool

	// beforeBatch, set only by tests (export_test.go), runs before each
	// batch is applied.
	beforeBatch atomic.Pointer[func()]
}

// monoNow is a monotonic clock reading in nanoseconds, never 0.
func monoNow() int64 { return int64(time.Since(monoEpoch)) + 1 }

var monoEpoch = time.Now()

// StateFigures are the facts of the applied state that /healthz needs.
type StateFigures struct {
	Applied uint64
	NowMs   int64
	// Genesis: the cluster genesis is applied; Markets: the catalogue
	// lists at least one market.
	Genesis, Markets bool
}

func newRaftFSM(m *fsm.Machine, publish func([]fsm.Event)) *raftFSM {
	f := &raftFSM{m: m, applied: make(chan struct{}), publish: publish}
	f.publishFigures()
	return f
}

// publishFigures reads the figures off the state. It runs on the applier
// (or before raft starts), the only writer, so no write is pending ahead
// of its read lock.
func (f *raftFSM) publishFigures() {
	var fig StateFigures
	f.m.Read(func(st *fsm.State, index uint64) {
		fig = StateFigures{Applied: index, NowMs: st.NowMs, Genesis: st.Genesis != nil, Markets: len(st.Market.MarketsByID) > 0}
	})
	f.figures.Store(&fig)
}

var _ raft.BatchingFSM = (*raftFSM)(nil)

func (f *raftFSM) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *raftFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if hook := f.beforeBatch.Load(); hook != nil {
		(*hook)()
	}
	if f.archive == nil {
		return f.applyRun(logs)
	}
	out := make([]interface{}, 0, len(logs))
	for _, run := range archiveCuts(logs) {
		out = append(out, f.applyRun(run)...)
		f.archive.applied(f.m, run)
	}
	return out
}

func (f *raftFSM) applyRun(logs []*raft.Log) []interface{} {
	start := time.Now()
	idx := make([]uint64, len(logs))
	data := make([][]byte, len(logs))
	for i, l := range logs {
		idx[i] = l.Index
		if l.Type == raft.LogCommand {
			data[i] = l.Data
		}
	}
	f.busySince.Store(monoNow())
	results, events := f.m.ApplyBatch(idx, data)
	f.publishFigures()
	f.busySince.Store(0)
	out := make([]interface{}, len(logs))
	for i, r := range results {
		if r != nil {
			out[i] = r
		}
	}
	if len(events) > 0 && f.publish != nil {
		f.publish(events)
	}
	f.checkHalt()
	f.notify()
	if o := f.obs.Load(); o != nil {
		(*o).Applied(len(logs), time.Since(start))
	}
	return out
}

// checkHalt reports a halt of the machine, once.
func (f *raftFSM) checkHalt() {
	h := f.m.Halted()
	if h == nil {
		return
	}
	f.haltOnce.Do(func() {
		if f.halted != nil {
			f.halted(h)
		}
	})
}

func (f *raftFSM) notify() {
	f.mu.Lock()
	close(f.applied)
	f.applied = make(chan struct{})
	f.mu.Unlock()
}

// changed returns a channel closed at the next apply.
func (f *raftFSM) changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// Snapshot records the applied index and returns at once: the state is
// encoded by Persist, from the shadow (shadow.go), beside apply. Without a
// shadow (no log store wired, as in some tests) it encodes the live state.
func (f *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	if h := f.m.Halted(); h != nil {
		return nil, h
	}
	if f.shadow != nil {
		return &lazySnapshot{f: f, index: f.m.Applied()}, nil
	}
	b, err := f.m.Snapshot()
	if err != nil {
		if f.m.Halted() != nil {
			f.recordCheck(f.m.Applied(), false)
		}
		f.checkHalt() // a failed ledger check halts the machine
		return nil, err
	}
	f.recordCheck(f.m.Applied(), true)
	return snapshotBytes(b), nil
}

// readSized reads a whole snapshot into one buffer of the size its
// metadata gives (io.ReadAll would grow by copying: at 150 MB, twice the
// snapshot in garbage while a node restores).
func readSized(r io.Reader, meta *raft.SnapshotMeta) ([]byte, error) {
	if meta == nil || meta.Size <= 0 || meta.Size > 1<<32 { // a size past 4 GiB is not trusted to allocate up front
		return io.ReadAll(r)
	}
	var buf bytes.Buffer
	buf.Grow(int(meta.Size) + bytes.MinRead) // ReadFrom wants MinRead free to stop at EOF
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// Restore installs a snapshot at the index raft's metadata gives it (the
// store is wrapped by metaSnapshots so the reader carries it). Without
// metadata, as from a plain store, the snapshot's own header is used.
func (f *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.restoring.Store(true)
	defer f.restoring.Store(false)
	meta := snapshotMetaOf(rc)
	b, err := readSized(rc, meta)
	if err != nil {
		return err
	}
	if meta != nil {
		err = f.m.RestoreAt(b, meta.Index)
	} else {
		err = f.m.Restore(b)
	}
	if err != nil {
		return err
	}
	f.publishFigures()
	if f.shadow != nil {
		f.shadow.reset() // rebuilt from the store at the next snapshot
	}
	if f.porBuilds != nil {
		f.porBuilds.reset()
	}
	if f.archive != nil {
		f.archive.restored(f.m.Applied())
	}
	if f.gap != nil {
		f.gap()
	}
	f.notify()
	return nil
}

// metaSnapshots wraps a snapshot store so every opened snapshot carries
// its metadata to raftFSM.Restore (raft wraps the reader in its own
// counting reader, which exposes the one inside).
type metaSnapshots struct{ raft.SnapshotStore }

func (s metaSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	return meta, &metaReader{ReadCloser: rc, meta: meta}, nil
}

type metaReader struct {
	io.ReadCloser
	meta *raft.SnapshotMeta
}

// snapshotMetaOf finds the metadata inside raft's reader wrappers.
func snapshotMetaOf(rc io.ReadCloser) *raft.SnapshotMeta {
	for range 8 {
		switch r := rc.(type) {
		case *metaReader:
			return r.meta
		case raft.ReadCloserWrapper:
			rc = r.WrappedReadCloser()
		default:
			return nil
		}
	}
	return nil
}

// snapshotBytes is an already-encoded state; Persist only writes it, so it
// runs safely alongside Apply.
type snapshotBytes []byte

func (s snapshotBytes) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshotBytes) Release() {}
