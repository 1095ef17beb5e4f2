package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
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

// ErrQuorumAtRisk refuses a membership change after which fewer than a
// majority of the voters would answer: raft counts the new configuration
// at once, so the cluster would stop taking writes, and no admin command
// could undo the change (it needs a leader).
var ErrQuorumAtRisk = errors.New("the change would leave the cluster without a quorum")

// raftProbeTimeout bounds one reachability check of a voter's raft listener.
const raftProbeTimeout = 2 * time.Second

// AddVoter adds (or re-adds) a voting member. Leader only. Unless force,
// it is refused when a majority of the voters it leaves (the new one
// included) would not answer: one wrong --raft address makes a cluster of
// one a cluster of two that can never elect a leader.
func (n *Node) AddVoter(id, raftAddr string, force bool) error {
	if !n.IsLeader() {
		return ErrNotLeaderAdmin
	}
	// Checked even with force: the quorum check passes with the new voter
	// unreachable in a cluster of three, and raft adds any string.
	if err := checkRaftAddr(raftAddr); err != nil {
		return err
	}
	cfg := n.Raft.GetConfiguration()
	if err := cfg.Error(); err != nil {
		return err
	}
	for _, s := range cfg.Configuration().Servers {
		// One process answering for two voters: its failure alone
		// would count twice against the quorum.
		if string(s.ID) != id && string(s.Address) == raftAddr {
			return fmt.Errorf("raft address %s is member %s's: each member needs its own; "+
				"give %s the raft address its node listens on (its serve --raft)", raftAddr, s.ID, id)
		}
	}
	if !force {
		next := []raft.Server{{ID: raft.ServerID(id), Address: raft.ServerAddress(raftAddr), Suffrage: raft.Voter}}
		for _, s := range cfg.Configuration().Servers {
			if string(s.ID) != id {
				next = append(next, s)
			}
		}
		if err := n.checkQuorum(next, fmt.Sprintf("adding %s at %s", id, raftAddr)); err != nil {
			return err
		}
	}
	return n.Raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, membershipTimeout).Error()
}

// checkRaftAddr refuses a raft address raft could never dial: not
// HOST:PORT, or a port outside 1-65535.
func checkRaftAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("raft address %q is not HOST:PORT (the member's serve --raft)", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("raft address %q: port %q is not a number from 1 to 65535", addr, port)
	}
	return nil
}

// RemoveServer removes a member. Leader only. Unless force, it is refused
// when a majority of the voters left would not answer (a live member
// removed while another is down), and removing the last voter always is.
func (n *Node) RemoveServer(id string, force bool) error {
	if !n.IsLeader() {
		return ErrNotLeaderAdmin
	}
	cfg := n.Raft.GetConfiguration()
	if err := cfg.Error(); err != nil {
		return err
	}
	found := false
	var next []raft.Server
	for _, s := range cfg.Configuration().Servers {
		if string(s.ID) == id {
			found = true
		} else {
			next = append(next, s)
		}
	}
	if !found {
		return fmt.Errorf("no member %q", id)
	}
	if !hasVoter(next) {
		return fmt.Errorf("%w: %s is its last voter; a cluster with no voter can never elect a leader", ErrQuorumAtRisk, id)
	}
	if !force {
		if err := n.checkQuorum(next, "removing "+id); err != nil {
			return err
		}
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

func hasVoter(servers []raft.Server) bool {
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			return true
		}
	}
	return false
}

// checkQuorum refuses a configuration in which fewer than a majority of
// the voters answer: this node counts itself, every other voter's raft
// listener is dialled (with TLS, a handshake as a member of this cluster).
func (n *Node) checkQuorum(next []raft.Server, change string) error {
	var voters []raft.Server
	for _, s := range next {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s)
		}
	}
	down := make([]error, len(voters))
	var wg sync.WaitGroup
	for i, s := range voters {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		wg.Add(1)
		go func(i int, s raft.Server) {
			defer wg.Done()
			c, err := n.dialRaft(s.Address, raftProbeTimeout)
			if err != nil {
				down[i] = fmt.Errorf("%s at %s: %v", s.ID, s.Address, err)
				return
			}
			_ = c.Close()
		}(i, s)
	}
	wg.Wait()
	var why []string
	for _, err := range down {
		if err != nil {
			why = append(why, err.Error())
		}
	}
	if live := len(voters) - len(why); live*2 <= len(voters) {
		return fmt.Errorf("%w: %s leaves %d voters and only %d answer (%s); it needs %d. "+
			"Bring the unreachable members back or remove them first; --force makes the change anyway",
			ErrQuorumAtRisk, change, len(voters), live, strings.Join(why, "; "), len(voters)/2+1)
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
	// Halted, on a replica that stopped itself (halt.go), says why and
	// what to do; its state hash is then of a half-applied entry.
	Halted string `json:"halted,omitempty"`
}

// Leader names the current leader.
type Leader struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	HTTP string `json:"http"`
}

// Status reports this node's view of the cluster.
func (n *Node) Status(ctx context.Context) (*Status, error) {
	members, err := n.Members()
	if err != nil {
		return nil, err
	}
	idx, hash, err := n.StateHash(ctx)
	if err != nil {
		return nil, err
	}
	id, raftAddr, httpAddr, _ := n.LeaderInfo()
	stats := n.Raft.Stats()
	var halted string
	if h := n.Halted(); h != nil {
		halted = h.Error() + ": it applies and serves nothing; keep its data directory for the post-mortem, " +
			"then remove it, wipe it and rejoin it (docs/deploy.md, \"When a node dies\")"
	}
	return &Status{
		Halted:            halted,
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
// (from a stored snapshot at or below it, when the shadow is past it), one
// hash at a time and remembered (statehash.go). An index the log no longer
// holds, since a snapshot compacted it, is an error; so is ctx ending
// first. Replicas compare themselves at one index this way.
func (n *Node) StateHashAt(ctx context.Context, index uint64) (string, error) {
	if applied := n.machine.Applied(); index > applied {
		return "", fmt.Errorf("index %d is past this node's applied index %d", index, applied)
	}
	if n.hashes != nil {
		return n.hashes.at(ctx, index)
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
// encoded. A hash already running is joined rather than queued behind
// (its index may then be a little behind the applied one; the pair is
// still exact). If the shadow cannot reach the index (a halted replica),
// the live state is hashed under its read lock as before.
func (n *Node) StateHash(ctx context.Context) (uint64, string, error) {
	if n.hashes != nil {
		idx, h, err := n.hashes.recentOrAt(ctx, n.machine.Applied())
		if err == nil || ctx.Err() != nil {
			return idx, h, err
		}
	}
	return n.machine.StateHash()
}
