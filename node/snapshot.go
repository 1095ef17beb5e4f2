package node

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// TakeSnapshot forces a snapshot and opens it for reading. When nothing
// changed since the last snapshot, that one is opened instead.
func (n *Node) TakeSnapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	f := n.Raft.Snapshot()
	if err := f.Error(); err == nil {
		return f.Open()
	} else if !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, nil, err
	}
	list, err := n.snaps.List()
	if err != nil {
		return nil, nil, err
	}
	if len(list) == 0 {
		return nil, nil, errors.New("no snapshot available")
	}
	return n.snaps.Open(list[0].ID)
}

// RestoreSnapshot replaces the whole cluster's state with a snapshot, through
// raft's user restore (leader only): the leader installs it and followers
// receive it by snapshot install.
func (n *Node) RestoreSnapshot(meta *raft.SnapshotMeta, r io.Reader) error {
	if !n.IsLeader() {
		return ErrNotLeaderAdmin
	}
	if err := n.Raft.Restore(meta, r, 2*time.Minute); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}
