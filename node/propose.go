package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// ErrUnavailable means no leader accepted the write in time. The command
// may or may not have been applied: a retry with the same idempotency key
// finds out without applying it twice.
var ErrUnavailable = errors.New("no leader available")

// errNotLeader is what a node answers to a forwarded write it cannot lead.
var errNotLeader = errors.New("not the leader")

// Propose applies cmd through the log and returns the state machine's
// answer. On the leader it is raft.Apply; on a follower the command is
// forwarded to the leader. Leadership changes and lost connections are
// retried with the same command (so the same idempotency key) until
// cfg.ProposeTimeout passes.
func (n *Node) Propose(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ProposeTimeout)
	defer cancel()
	backoff := 20 * time.Millisecond
	for {
		res, err := n.proposeOnce(ctx, cmd)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, ErrLeaderOnly) || errors.Is(err, errForwardRefused) {
			return nil, err // final: a retry would be refused again
		}
		n.cfg.Logger.Debug("propose retry", "type", cmd.Type, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		case <-time.After(backoff):
		}
		if backoff < 200*time.Millisecond {
			backoff *= 2
		}
	}
}

func (n *Node) proposeOnce(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if n.IsLeader() {
		return n.applyLocal(ctx, cmd)
	}
	if !Forwardable(cmd.Type) {
		return nil, ErrLeaderOnly
	}
	meta := n.leaderMeta()
	if meta == nil || meta.Admin == "" {
		return nil, errors.New("leader unknown")
	}
	return n.forward(ctx, meta.Admin, cmd)
}

// applyLocal stamps cmd with the leader's clock and applies it through raft.
func (n *Node) applyLocal(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, errNotLeader
	}
	stamped := *cmd
	stamped.TsMs = n.stamp()
	data, err := stamped.Encode()
	if err != nil {
		return nil, err
	}
	f := n.Raft.Apply(data, time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrEnqueueTimeout) {
			return nil, fmt.Errorf("%w: %v", errNotLeader, err)
		}
		return nil, err
	}
	res, ok := f.Response().(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("unexpected apply response %T", f.Response())
	}
	return res, nil
}

// stamp is the leader's clock for a new entry, never behind the previous
// stamp nor the state's time (a new leader's clock may lag the old one's).
func (n *Node) stamp() int64 {
	n.stampMu.Lock()
	defer n.stampMu.Unlock()
	now := time.Now().UnixMilli()
	var stateNow int64
	n.machine.Read(func(st *fsm.State, _ uint64) { stateNow = st.NowMs })
	if now < stateNow {
		now = stateNow
	}
	if now < n.lastStamp {
		now = n.lastStamp
	}
	n.lastStamp = now
	return now
}

// leaderMeta returns the current leader's advertised addresses, as the
// replicated state records them.
func (n *Node) leaderMeta() *fsm.NodeMeta {
	_, id := n.Raft.LeaderWithID()
	if id == "" {
		return nil
	}
	var m *fsm.NodeMeta
	n.machine.Read(func(st *fsm.State, _ uint64) {
		if nm, ok := st.Nodes[string(id)]; ok {
			c := *nm
			m = &c
		}
	})
	return m
}

// LeaderInfo names the leader: id, raft address and advertised HTTP/admin
// addresses (empty when unknown).
func (n *Node) LeaderInfo() (id, raftAddr, httpAddr, adminAddr string) {
	addr, lid := n.Raft.LeaderWithID()
	id, raftAddr = string(lid), string(addr)
	if m := n.leaderMeta(); m != nil {
		httpAddr, adminAddr = m.HTTP, m.Admin
	}
	return
}
