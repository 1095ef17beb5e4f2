package node

import (
	"io"
	"sync"

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
}

func newRaftFSM(m *fsm.Machine, publish func([]fsm.Event)) *raftFSM {
	return &raftFSM{m: m, applied: make(chan struct{}), publish: publish}
}

var _ raft.BatchingFSM = (*raftFSM)(nil)

func (f *raftFSM) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *raftFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	idx := make([]uint64, len(logs))
	data := make([][]byte, len(logs))
	for i, l := range logs {
		idx[i] = l.Index
		if l.Type == raft.LogCommand {
			data[i] = l.Data
		}
	}
	results, events := f.m.ApplyBatch(idx, data)
	out := make([]interface{}, len(logs))
	for i, r := range results {
		if r != nil {
			out[i] = r
		}
	}
	if len(events) > 0 && f.publish != nil {
		f.publish(events)
	}
	f.notify()
	return out
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

func (f *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	b, err := f.m.Snapshot()
	if err != nil {
		return nil, err
	}
	return snapshotBytes(b), nil
}

func (f *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if err := f.m.Restore(b); err != nil {
		return err
	}
	f.notify()
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
