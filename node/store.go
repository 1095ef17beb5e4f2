package node

import (
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
func openLogStore(path string) (*raftboltdb.BoltStore, error) {
	return raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	}})
}
