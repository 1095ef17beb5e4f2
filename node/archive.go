package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// The apply archive is a test harness's witness of what this replica's
// live machine did (Config.ApplyArchive; the Jepsen harness turns it on).
// Raft compacts its log after a snapshot, so once a run has ended the logs
// no longer show which entries each replica applied. The archive keeps
// every entry as the live machine got it, and the state's hash at every
// index that is a multiple of ArchiveHashEvery, so replicas can be compared
// entry by entry and state by state: equal entries with different states
// is a nondeterministic machine, different entries a replication bug.
//
// It is one JSON object per line, appended as entries are applied:
//
//	{"i":index,"t":term,"k":raft log type,"d":data}  an applied entry
//	{"i":index,"h":state hash,"s":seq,"n":log time}  the state after i
//	{"i":index,"r":true}                              restored from a snapshot at i
//
// It costs a state encoding every ArchiveHashEvery entries on the apply
// path: a test setting, never a production one.
type applyArchive struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error
}

// ArchiveHashEvery is how often the archive records the state hash.
const ArchiveHashEvery = 16

// ArchiveRecord is one line of an apply archive.
type ArchiveRecord struct {
	Index   uint64 `json:"i"`
	Term    uint64 `json:"t,omitempty"`
	Kind    uint8  `json:"k,omitempty"`
	Data    []byte `json:"d,omitempty"`
	Hash    string `json:"h,omitempty"`
	Seq     uint64 `json:"s,omitempty"`
	NowMs   int64  `json:"n,omitempty"`
	Restore bool   `json:"r,omitempty"`
}

func openApplyArchive(path string) (*applyArchive, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("apply archive: %w", err)
	}
	// A kill -9 can cut the last line short: end it, so this start's first
	// record is a line of its own and not lost glued to the torn one.
	if err := endTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("apply archive: %w", err)
	}
	return &applyArchive{f: f, w: bufio.NewWriter(f)}, nil
}

func endTornLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return err
	}
	if last[0] != '\n' {
		_, err = f.Write([]byte{'\n'})
	}
	return err
}

func (a *applyArchive) write(rec ArchiveRecord) {
	if a.err != nil {
		return
	}
	b, err := json.Marshal(rec)
	if err == nil {
		b = append(b, '\n')
		_, err = a.w.Write(b)
	}
	a.err = err
}

// applied records a run of entries the machine has applied, cut by the
// caller at hash points, and the state after the last when it is one.
func (a *applyArchive) applied(m *fsm.Machine, logs []*raft.Log) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range logs {
		a.write(ArchiveRecord{Index: l.Index, Term: l.Term, Kind: uint8(l.Type), Data: l.Data})
	}
	if last := logs[len(logs)-1].Index; last%ArchiveHashEvery == 0 && m.Halted() == nil {
		at, hash, err := m.StateHash()
		var seq uint64
		var now int64
		m.Read(func(st *fsm.State, _ uint64) { seq, now = st.Seq, st.NowMs })
		if err == nil && at == last {
			a.write(ArchiveRecord{Index: last, Hash: hash, Seq: seq, NowMs: now})
		}
	}
	if a.err == nil {
		a.err = a.w.Flush() // a kill -9 must not lose what was applied
	}
}

// restored records that the machine was replaced by a snapshot at index.
func (a *applyArchive) restored(index uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.write(ArchiveRecord{Index: index, Restore: true})
	if a.err == nil {
		a.err = a.w.Flush()
	}
}

func (a *applyArchive) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = a.w.Flush()
	}
	if err := a.f.Close(); a.err == nil {
		a.err = err
	}
	return a.err
}

// archiveCuts splits logs after every index that is a multiple of
// ArchiveHashEvery, so the archive can hash the state there.
func archiveCuts(logs []*raft.Log) [][]*raft.Log {
	var out [][]*raft.Log
	start := 0
	for i, l := range logs {
		if l.Index%ArchiveHashEvery == 0 {
			out = append(out, logs[start:i+1])
			start = i + 1
		}
	}
	if start < len(logs) {
		out = append(out, logs[start:])
	}
	return out
}
