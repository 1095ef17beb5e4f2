package node

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/por"
)

// Snapshots that never stall apply. Encoding the live state takes its read
// lock, so apply would wait for the whole encoding (seconds at a million
// accounts). Instead the node keeps a shadow: a second state machine that
// follows the same log, lazily. raft's Snapshot() only records the applied
// index (O(1), on the apply goroutine); Persist, on raft's snapshot
// goroutine, replays the committed entries from the log store into the
// shadow up to that index and encodes the shadow there, while the live
// machine keeps applying. The machine is deterministic, so the shadow at
// index i is the live state at index i, byte for byte.
//
// The shadow starts from the newest snapshot in the store (or an empty
// machine when there is none; the log then still holds every entry), and
// is dropped whenever raft restores the live machine from a snapshot (an
// install from the leader, an operator's restore): the next snapshot
// rebuilds it from the store. It costs a second copy of the state in
// memory and replaying each entry once more, off the apply path.
type shadow struct {
	logs  raft.LogStore
	snaps raft.SnapshotStore

	mu sync.Mutex
	m  *fsm.Machine
	// built holds the Proof of Reserves snapshots m built at the last
	// entry that built any (porbuild.go): a group entry may make a tree
	// due and publish it, then publish another, so that m, which stops
	// only between entries, holds it neither pending nor as the latest.
	built map[porKey]*por.Snapshot
}

// reset drops the shadow (the live machine was restored from a snapshot).
func (s *shadow) reset() {
	s.mu.Lock()
	s.m = nil
	s.built = nil
	s.mu.Unlock()
}

// writeSnapshotAt writes the encoded state at index to w as it is encoded
// (fsm.Machine.SnapshotTo: a field of State at a time in memory).
func (s *shadow) writeSnapshotAt(index uint64, w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reach(index); err != nil {
		return err
	}
	return s.m.SnapshotTo(w)
}

// hashAt returns the state hash at index, computed on the shadow (so the
// live machine is not held while the state is encoded).
func (s *shadow) hashAt(index uint64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reach(index); err != nil {
		return "", err
	}
	_, h, err := s.m.StateHash()
	return h, err
}

// reach brings the shadow to index: from the store when it has none, is
// past index or halted, then by replaying the log.
func (s *shadow) reach(index uint64) error {
	if s.m == nil || s.m.Applied() > index || s.m.Halted() != nil {
		m, err := s.fromStore(index)
		if err != nil {
			return err
		}
		s.m = m
	}
	if err := s.catchUp(index); err != nil {
		s.m = nil // a partial replay is not trusted next time
		return err
	}
	return nil
}

// fromStore builds a shadow from the newest stored snapshot at or below
// index, or an empty machine.
func (s *shadow) fromStore(index uint64) (*fsm.Machine, error) {
	return machineFromStore(s.logs, s.snaps, index, fsm.Options{PoRBuilt: s.noteBuilt})
}

// noteBuilt keeps a snapshot m built inline at index (fsm.Options.PoRBuilt,
// inside m's apply, under s.mu), forgetting those of earlier entries.
func (s *shadow) noteBuilt(index uint64, snap *por.Snapshot) {
	for k := range s.built {
		if k.index < index {
			delete(s.built, k)
		}
	}
	if s.built == nil {
		s.built = make(map[porKey]*por.Snapshot)
	}
	s.built[porKey{index, snap.TsMs}] = snap
}

// catchUp applies the committed log entries after the shadow's index up to
// index, in batches like raft hands them to the live machine.
func (s *shadow) catchUp(index uint64) error { return replayLog(s.m, s.logs, index) }

// RebuildAt builds the state at index from a node's stores alone: the
// newest snapshot at or below index that the log continues (else an empty
// machine), then the log. The shadow does this on a running node; tests
// do it on a stopped node's data directory to check the state it
// reported.
func RebuildAt(logs raft.LogStore, snaps raft.SnapshotStore, index uint64) (*fsm.Machine, error) {
	m, err := machineFromStore(logs, snaps, index, fsm.Options{})
	if err != nil {
		return nil, err
	}
	if err := replayLog(m, logs, index); err != nil {
		return nil, err
	}
	return m, nil
}

func machineFromStore(logs raft.LogStore, snaps raft.SnapshotStore, index uint64, opts fsm.Options) (*fsm.Machine, error) {
	m := fsm.NewMachine(opts)
	list, err := snaps.List()
	if err != nil {
		return nil, err
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return nil, err
	}
	for _, meta := range list { // newest first
		if meta.Index > index || (meta.Index < index && first > meta.Index+1) {
			continue
		}
		opened, rc, err := snaps.Open(meta.ID)
		if err != nil {
			return nil, err
		}
		b, err := readSized(rc, opened)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if err := m.RestoreAt(b, meta.Index); err != nil {
			return nil, err
		}
		break
	}
	return m, nil
}

// replayLog applies the log entries after m's index up to index, in
// batches like raft hands them to the live machine.
func replayLog(m *fsm.Machine, logs raft.LogStore, index uint64) error {
	const batch = 256
	next := m.Applied() + 1
	for next <= index {
		n := min(index-next+1, batch)
		idx := make([]uint64, 0, n)
		data := make([][]byte, 0, n)
		for i := next; i < next+n; i++ {
			var l raft.Log
			if err := logs.GetLog(i, &l); err != nil {
				return fmt.Errorf("log entry %d: %w", i, err)
			}
			if IsSnapshotPoint(&l) {
				// It stands for a snapshot's last entry, which replay
				// never needs: a base before it is not this log's.
				return fmt.Errorf("log entry %d is a snapshot's point, not the entry: replay needs a base at or after it", i)
			}
			idx = append(idx, i)
			if l.Type == raft.LogCommand {
				data = append(data, l.Data)
			} else {
				data = append(data, nil)
			}
		}
		m.ApplyBatch(idx, data)
		if h := m.Halted(); h != nil {
			return h
		}
		next += n
	}
	return nil
}

// lazySnapshot is raft's FSMSnapshot of the state at index: nothing is
// encoded until Persist, which runs beside apply.
type lazySnapshot struct {
	f     *raftFSM
	index uint64
}

func (s *lazySnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.f.shadow.writeSnapshotAt(s.index, sink); err != nil {
		// No snapshot this time (raft tries again at its next interval):
		// encoding the live machine instead would give a state at a later
		// index than raft records. A halt of the shadow (a broken ledger,
		// a panicking entry) is the live machine's too: it is the same
		// state, so the live replica stops rather than serve it.
		var h *fsm.Halt
		if errors.As(err, &h) {
			s.f.recordCheck(s.index, false)
			s.f.m.HaltWith(h)
			s.f.checkHalt()
		}
		_ = sink.Cancel()
		return fmt.Errorf("snapshot at %d: %w", s.index, err)
	}
	s.f.recordCheck(s.index, true) // the shadow's SnapshotTo checked the ledger
	return sink.Close()
}

func (s *lazySnapshot) Release() {}
