package node

import (
	"bytes"
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

// ErrRestoreRefused is a snapshot that decodes but does not belong in this
// cluster.
var ErrRestoreRefused = errors.New("restore refused")

// RestoreSnapshot replaces the whole cluster's state with a snapshot, through
// raft's user restore (leader only): the leader installs it and followers
// receive it by snapshot install. check, when set, may refuse the snapshot
// on its facts before anything is installed.
func (n *Node) RestoreSnapshot(meta *raft.SnapshotMeta, r io.Reader, check func(fsm.SnapshotFacts) error) error {
	if !n.IsLeader() {
		return ErrNotLeaderAdmin
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	// Raft panics if the state machine refuses a user restore: check first.
	facts, err := fsm.InspectSnapshot(b)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Another deployment's state (a testnet's faucet balances on prod) is
	// never this venue's, and every member would then refuse to restart
	// (its --deployment no longer matches the genesis).
	if facts.Deployment != "" && facts.Deployment != n.cfg.Deployment {
		return fmt.Errorf("%w: the snapshot is of a %q deployment and this cluster runs %q: "+
			"restore it into a cluster started with --deployment %s", ErrRestoreRefused, facts.Deployment, n.cfg.Deployment, facts.Deployment)
	}
	if check != nil {
		if err := check(facts); err != nil {
			return fmt.Errorf("%w: %w", ErrRestoreRefused, err)
		}
	}
	meta.Size = int64(len(b))
	if err := n.Raft.Restore(meta, bytes.NewReader(b), 2*time.Minute); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Raft gives the restored state a new index past its log, and the
	// machine takes it from raft's metadata. A tick at once still moves log
	// time on and gives every replica a fresh entry past the restore.
	if _, err := n.proposeInternal(fsm.CmdTick, nil); err != nil {
		n.cfg.Logger.Warn("restore: tick after restore failed; the applied index catches up at the next tick", "err", err)
	}
	return nil
}

// SnapshotHashAfter finds the oldest stored snapshot past index after and
// returns its index and state hash. After a restore (RestoreSnapshot) with
// after set to the log's last index before it, that is the restored
// snapshot: the operator compares its hash with the backup's.
func (n *Node) SnapshotHashAfter(after uint64) (uint64, string, error) {
	list, err := n.snaps.List()
	if err != nil {
		return 0, "", err
	}
	var pick *raft.SnapshotMeta
	for _, m := range list {
		if m.Index > after && (pick == nil || m.Index < pick.Index) {
			pick = m
		}
	}
	if pick == nil {
		return 0, "", fmt.Errorf("no snapshot past index %d", after)
	}
	opened, rc, err := n.snaps.Open(pick.ID)
	if err != nil {
		return 0, "", err
	}
	defer rc.Close()
	b, err := readSized(rc, opened)
	if err != nil {
		return 0, "", err
	}
	m := fsm.NewMachine(fsm.Options{})
	if err := m.RestoreAt(b, pick.Index); err != nil {
		return 0, "", err
	}
	_, h, err := m.StateHash()
	return pick.Index, h, err
}
