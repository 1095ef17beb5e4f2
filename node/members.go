package node

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// membershipTimeout bounds a configuration change.
const membershipTimeout = 10 * time.Second

// Member is one server of the raft configuration.
type Member struct {
	ID       string `json:"id"`
	Raft     string `json:"raft"`
	Suffrage string `json:"suffrage"`
}

// Members lists the current raft configuration.
func (n *Node) Members() ([]Member, error) {
	f := n.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{ID: string(s.ID), Raft: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	return out, nil
}

// InConfiguration reports whether this node appears in its own view of the
// raft configuration (false for a fresh node that has not joined yet).
func (n *Node) InConfiguration() bool {
	members, err := n.Members()
	if err != nil {
		return false
	}
	for _, m := range members {
		if m.ID == n.cfg.ID {
			return true
		}
	}
	return false
}

// ErrNotLeaderAdmin is returned by membership calls made on a follower.
var ErrNotLeaderAdmin = errors.New("membership changes must be made on the leader")

// AddVoter adds (or re-adds) a voting member. Leader only.
func (n *Node) AddVoter(id, raftAddr string) error {
	if !n.IsLeader() {
		return ErrNotLeaderAdmin
	}
	return n.Raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, membershipTimeout).Error()
}

// RemoveServer removes a member. Leader only.
func (n *Node) RemoveServer(id string) error {
	if !n.IsLeader() {
		return ErrNotLeaderAdmin
	}
	members, err := n.Members()
	if err != nil {
		return err
	}
	found := false
	for _, m := range members {
		found = found || m.ID == id
	}
	if !found {
		return fmt.Errorf("no member %q", id)
	}
	if err := n.Raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout).Error(); err != nil {
		return err
	}
	// The member is gone; its addresses go too. If this propose fails the
	// leader's reconciliation drops the record later.
	if _, err := n.proposeInternal(fsm.CmdNodeGone, fsm.NodeGonePayload{ID: id}); err != nil {
		n.cfg.Logger.Warn("remove: dropping the node record failed; reconciliation will retry", "id", id, "err", err)
	}
	return nil
}

// NodeRecordGrace is how long the leader lets a node record stand for an
// id outside the raft configuration before it drops it: a node that is
// joining may announce itself just before (or as) it is added, and a
// removed node may re-announce itself once before it learns it left.
var NodeRecordGrace = time.Minute

// newNodeRecordReconciler returns a leader driver that drops records of
// ids that have been absent from the raft configuration for longer than
// NodeRecordGrace. It remembers when it first saw each id absent; after a
// pause in its runs (leadership lost and regained) it starts afresh, so a
// stale observation never shortens the grace.
func newNodeRecordReconciler() func(*Node) {
	absentSince := map[string]time.Time{}
	var lastRun time.Time
	return func(n *Node) {
		now := time.Now()
		if now.Sub(lastRun) > 10*n.cfg.TickInterval {
			clear(absentSince)
		}
		lastRun = now
		members, err := n.Members()
		if err != nil {
			return
		}
		inConfig := map[string]bool{}
		for _, m := range members {
			inConfig[m.ID] = true
		}
		var recorded []string
		n.machine.Read(func(st *fsm.State, _ uint64) {
			for id := range st.Nodes {
				recorded = append(recorded, id)
			}
		})
		sort.Strings(recorded)
		seen := map[string]bool{}
		for _, id := range recorded {
			if inConfig[id] {
				continue
			}
			seen[id] = true
			first, ok := absentSince[id]
			if !ok {
				absentSince[id] = now
				continue
			}
			if now.Sub(first) < NodeRecordGrace {
				continue
			}
			if _, err := n.proposeInternal(fsm.CmdNodeGone, fsm.NodeGonePayload{ID: id}); err == nil {
				n.cfg.Logger.Info("dropped the record of a node outside the raft configuration", "id", id)
				delete(absentSince, id)
			}
		}
		for id := range absentSince {
			if !seen[id] {
				delete(absentSince, id)
			}
		}
	}
}

// TransferLeadership hands leadership to member to, or to any up-to-date
// follower when to is empty. Leader only.
func (n *Node) TransferLeadership(to string) error {
	if !n.IsLeader() {
		return ErrNotLeaderAdmin
	}
	if to == "" {
		return n.Raft.LeadershipTransfer().Error()
	}
	members, err := n.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.ID == to {
			return n.Raft.LeadershipTransferToServer(raft.ServerID(m.ID), raft.ServerAddress(m.Raft)).Error()
		}
	}
	return fmt.Errorf("no member %q", to)
}

// Status is the admin view of this node.
type Status struct {
	ID                string   `json:"id"`
	State             string   `json:"state"`
	Leader            Leader   `json:"leader"`
	Members           []Member `json:"members"`
	AppliedIndex      string   `json:"appliedIndex"`
	CommitIndex       string   `json:"commitIndex"`
	LastSnapshotIndex string   `json:"lastSnapshotIndex"`
	StateHash         string   `json:"stateHash"`
}

// Leader names the current leader.
type Leader struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	HTTP string `json:"http"`
}

// Status reports this node's view of the cluster.
func (n *Node) Status() (*Status, error) {
	members, err := n.Members()
	if err != nil {
		return nil, err
	}
	idx, hash, err := n.StateHash()
	if err != nil {
		return nil, err
	}
	id, raftAddr, httpAddr, _ := n.LeaderInfo()
	stats := n.Raft.Stats()
	return &Status{
		ID:                n.cfg.ID,
		State:             n.Raft.State().String(),
		Leader:            Leader{ID: id, Raft: raftAddr, HTTP: httpAddr},
		Members:           members,
		AppliedIndex:      strconv.FormatUint(idx, 10),
		CommitIndex:       strconv.FormatUint(n.Raft.CommitIndex(), 10),
		LastSnapshotIndex: stats["last_snapshot_index"],
		StateHash:         hash,
	}, nil
}

// StateHashAt returns the state hash at index, which this node has
// applied: computed on the snapshot shadow, which replays the log up to it
// (from a stored snapshot at or below it, when the shadow is past it). An
// index the log no longer holds, since a snapshot compacted it, is an
// error. Replicas compare themselves at one index this way.
func (n *Node) StateHashAt(index uint64) (string, error) {
	if applied := n.machine.Applied(); index > applied {
		return "", fmt.Errorf("index %d is past this node's applied index %d", index, applied)
	}
	if sh := n.fsm.shadow; sh != nil {
		return sh.hashAt(index)
	}
	at, h, err := n.machine.StateHash()
	if err == nil && at != index {
		err = fmt.Errorf("this node can hash only its applied index %d", at)
	}
	return h, err
}

// StateHash returns an applied index and the state hash there. It is
// computed on the snapshot shadow (shadow.go), which replays the log up to
// the index, so the live machine keeps applying while the state is
// encoded; if the shadow cannot reach the index (a halted replica), the
// live state is hashed under its read lock as before.
func (n *Node) StateHash() (uint64, string, error) {
	if sh := n.fsm.shadow; sh != nil {
		idx := n.machine.Applied()
		if h, err := sh.hashAt(idx); err == nil {
			return idx, h, nil
		}
	}
	return n.machine.StateHash()
}
