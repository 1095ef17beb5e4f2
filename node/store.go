package node

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// openLogStore opens the raft log and stable store. bolt's defaults write
// the whole freelist, an array of every free page id, at each commit.
// After the first compaction of a running node (a snapshot deletes up to
// TrailingLogs entries, each several pages) that list holds tens of
// thousands of pages, and every later log append rewrote and fsynced it:
// 400 µs of CPU per append instead of 160 on the comparison VM. So the
// freelist is not synced (bolt rebuilds it by scanning the file when it
// opens, which costs a read of the file at start) and is kept as a map
// (allocation without sorting a long array), as etcd runs its bolt.
//
// The file lock is waited for briefly: another process holding it (a
// second serve on this data directory) would otherwise hang the start
// forever without a word.
func openLogStore(path string) (*raftboltdb.BoltStore, error) {
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		Timeout:        logStoreLockWait,
	}})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s is locked by another process (is a perpd already serving %s?): stop it first, "+
			"or give this node its own --data", path, filepath.Dir(path))
	}
	return s, err
}

// logStoreLockWait bounds the wait for the raft log's file lock.
const logStoreLockWait = 3 * time.Second

// watchedStore is the raft log and stable store with its last failed
// write remembered until a write succeeds again, and its last failed log
// append until an append (or a probe as large) succeeds: raft's term and
// vote are small writes that succeed on a disk too full to append to.
// raft only logs such a failure (a leader steps down, a follower refuses
// the append and is sent it again), so without it a node whose disk
// filled looks merely slow: /healthz and /metrics name the cause
// (StoreProblem), and the node does not campaign (campaign.go).
type watchedStore struct {
	*raftboltdb.BoltStore
	failed atomic.Pointer[error]
	// appendFailed is the last log append when it failed, nil once an
	// append or a probe of its size succeeded (campaign.go).
	appendFailed atomic.Pointer[appendFailure]
	probeMu      sync.Mutex
	probedFor    *appendFailure // the failure the last failed probe was for
	probedAt     time.Time
	probeErr     error
}

func (w *watchedStore) note(err error) error {
	if err != nil {
		w.failed.Store(&err)
	} else if w.failed.Load() != nil {
		w.failed.Store(nil)
	}
	return err
}

func (w *watchedStore) StoreLog(l *raft.Log) error {
	return w.noteAppend([]*raft.Log{l}, w.BoltStore.StoreLog(l))
}

func (w *watchedStore) StoreLogs(logs []*raft.Log) error {
	return w.noteAppend(logs, w.BoltStore.StoreLogs(logs))
}

func (w *watchedStore) DeleteRange(min, max uint64) error {
	return w.note(w.BoltStore.DeleteRange(min, max))
}

func (w *watchedStore) Set(k, v []byte) error { return w.note(w.BoltStore.Set(k, v)) }

func (w *watchedStore) SetUint64(k []byte, v uint64) error {
	return w.note(w.BoltStore.SetUint64(k, v))
}

// writeFailure is the last write's error, nil once a write succeeded, or
// else the last append's, nil once an append succeeded.
func (w *watchedStore) writeFailure() error {
	if p := w.failed.Load(); p != nil {
		return *p
	}
	if f := w.appendFailed.Load(); f != nil {
		return f.err
	}
	return nil
}

// StoreWriteFailing reports, without touching the disk, whether the raft
// log store's last write failed and none has succeeded since, or its last
// log append failed and none has succeeded since: such a node cannot
// append, so it cannot apply what the leader commits either.
func (n *Node) StoreWriteFailing() bool { return n.store.writeFailure() != nil }

// StoreProblem names what is wrong with the raft log store, or "" when
// nothing is: it does not answer a read, or its last write (or log
// append) failed and none has succeeded since. The text is public
// (/healthz): it names the kind of fault, never the path or the error's
// own words, which the node's log has.
func (n *Node) StoreProblem() string {
	if _, err := n.store.LastIndex(); err != nil {
		return "the log store does not answer"
	}
	switch err := n.store.writeFailure(); {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ENOSPC):
		return "the log store cannot write: its disk is full"
	default:
		return "the log store cannot write"
	}
}
