package node

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
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
	// Raft gives the restored state a new index past its log, but the state
	// machine only learns indexes from command entries: until the next one
	// it reports the snapshot's own, older index, so X-Raft-Index and
	// appliedIndex would run backwards. A tick at once moves every replica
	// past everything applied before the restore.
	if _, err := n.proposeInternal(fsm.CmdTick, nil); err != nil {
		n.cfg.Logger.Warn("restore: tick after restore failed; the applied index catches up at the next tick", "err", err)
	}
	return nil
}
