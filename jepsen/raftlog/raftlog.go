// Package raftlog reads a stopped node's raft log and snapshots, so that
// after a run the harness can check two things no client read shows:
//
//   - Log matching: an entry a node has applied is the same entry, byte for
//     byte, on every node that applied that index. Two replicas that differ
//     with equal logs have a nondeterministic state machine; two that differ
//     because their logs differ have a replication bug. The check tells
//     which.
//   - Replay: rebuilding a node's state from its own store (its newest
//     usable snapshot, then the log) gives the hash the node reported at
//     that index.
//
// Both read the data directories only after every node has stopped.
package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// Store is one node's raft log and snapshots, opened read-only.
type Store struct {
	Dir         string
	First, Last uint64 // the log's index range (0, 0 when empty)
	// From is where the entries the node could have applied from this log
	// begin: past the last gap in the log and past any stored snapshot
	// whose index the log lacks or holds with another term. Raft leaves
	// such a gap when it installs a leader's snapshot over a log that ends
	// before the snapshot's index (or restores an operator's snapshot), and
	// keeps the entries below it (hashicorp/raft v1.7 compacts only up to
	// min(snapshot index, last index - TrailingLogs), issue #697): entries
	// the snapshot replaced, possibly ones no leader committed. From is
	// First when there are none, and past Last when the log holds only such
	// entries.
	From uint64
	// Below is the index of the gap or snapshot that puts From past First
	// (0 when From is First).
	Below uint64
	logs  *raftboltdb.BoltStore
	snaps *raft.FileSnapshotStore
}

// Open opens the raft store in a stopped node's data directory.
func Open(dataDir string) (*Store, error) {
	path := filepath.Join(dataDir, "raft.db")
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	logs, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{ReadOnly: true}})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 3, hclog.NewNullLogger())
	if err != nil {
		logs.Close()
		return nil, err
	}
	s := &Store{Dir: dataDir, logs: logs, snaps: snaps}
	if s.First, err = logs.FirstIndex(); err == nil {
		s.Last, err = logs.LastIndex()
	}
	if err == nil {
		err = s.findFrom()
	}
	if err != nil {
		logs.Close()
		return nil, err
	}
	return s, nil
}

// findFrom sets From and Below (see Store).
func (s *Store) findFrom() error {
	s.From = s.First
	if s.First == 0 {
		return nil
	}
	var l raft.Log
	for i := s.First; i < s.Last; i++ {
		switch err := s.logs.GetLog(i, &l); {
		case errors.Is(err, raft.ErrLogNotFound):
			s.From, s.Below = i+1, i
		case err != nil:
			return fmt.Errorf("log entry %d: %w", i, err)
		case node.IsSnapshotPoint(&l):
			// The node's guard stored an installed snapshot's point over
			// stale entries that went on past it (node.dropUnvouched).
			s.From, s.Below = i+1, i
		}
	}
	metas, err := s.snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	for _, m := range metas {
		if m.Index < s.First || m.Index < s.From {
			continue
		}
		switch err := s.logs.GetLog(m.Index, &l); {
		case err == nil && l.Term == m.Term && !node.IsSnapshotPoint(&l):
			continue // the log holds the snapshot's own history there
		case err != nil && !errors.Is(err, raft.ErrLogNotFound):
			return fmt.Errorf("log entry %d: %w", m.Index, err)
		}
		s.From, s.Below = m.Index+1, m.Index
	}
	return nil
}

// Close releases the store.
func (s *Store) Close() error { return s.logs.Close() }

// Entry returns the log entry at index.
func (s *Store) Entry(index uint64) (*raft.Log, error) {
	var l raft.Log
	if err := s.logs.GetLog(index, &l); err != nil {
		return nil, fmt.Errorf("log entry %d: %w", index, err)
	}
	return &l, nil
}

// Mismatch is the first index at which two nodes' logs differ.
type Mismatch struct {
	Index uint64
	A, B  *raft.Log
}

func (m *Mismatch) String() string {
	return fmt.Sprintf("index %d: %s / %s", m.Index, Describe(m.A), Describe(m.B))
}

// FirstMismatch compares a's and b's entries from the first index both
// could have applied from their logs (From) up to upTo (an index both have
// applied, so committed on both).
func FirstMismatch(a, b *Store, upTo uint64) (*Mismatch, uint64, error) {
	from := max(a.From, b.From)
	to := min(a.Last, b.Last, upTo)
	var compared uint64
	for i := from; i <= to && i != 0; i++ {
		x, err := a.Entry(i)
		if err != nil {
			return nil, compared, err
		}
		y, err := b.Entry(i)
		if err != nil {
			return nil, compared, err
		}
		compared++
		if !sameEntry(x, y) {
			return &Mismatch{Index: i, A: x, B: y}, compared, nil
		}
	}
	return nil, compared, nil
}

func sameEntry(x, y *raft.Log) bool {
	return x.Term == y.Term && x.Type == y.Type && bytes.Equal(x.Data, y.Data) && bytes.Equal(x.Extensions, y.Extensions)
}

// Describe names an entry for a report: its term and type, and for a
// command its type, stamp and size, with a group's members.
func Describe(l *raft.Log) string {
	if l == nil {
		return "missing"
	}
	s := fmt.Sprintf("term %d %s %d bytes", l.Term, l.Type, len(l.Data))
	if l.Type != raft.LogCommand {
		return s
	}
	c, err := fsm.DecodeCommand(l.Data)
	if err != nil {
		return s + " (undecodable)"
	}
	s += fmt.Sprintf(" cmd %d ts %d", c.Type, c.TsMs)
	if c.Type != fsm.CmdGroup {
		return s + describeCmd(c)
	}
	var g fsm.GroupPayload
	if err := fsm.Unmarshal(c.Payload, &g); err != nil {
		return s + " (undecodable group)"
	}
	s += fmt.Sprintf(" group of %d:", len(g.Cmds))
	for _, b := range g.Cmds {
		sc, err := fsm.DecodeCommand(b)
		if err != nil {
			s += " ?"
			continue
		}
		s += fmt.Sprintf(" [%d ts %d%s]", sc.Type, sc.TsMs, describeCmd(sc))
	}
	return s
}

func describeCmd(c *fsm.Command) string {
	if c.IdemKey != "" {
		return " " + c.IdemKey
	}
	return ""
}

// HashAt rebuilds the state at index from the store alone (node.RebuildAt)
// and returns its hash.
func (s *Store) HashAt(index uint64) (string, error) {
	m, err := node.RebuildAt(s.logs, s.snaps, index)
	if err != nil {
		return "", err
	}
	at, hash, err := m.StateHash()
	if err == nil && at != index {
		err = fmt.Errorf("replay reached index %d, not %d", at, index)
	}
	return hash, err
}
