package node

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

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
