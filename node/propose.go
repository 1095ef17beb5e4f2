package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	deadline := time.Now().Add(n.cfg.ProposeTimeout)
	// The usual case, a write on the leader, waits with a pooled timer
	// instead of a derived context (a timer, a cancel registration and a
	// channel per write); anything else takes the loop below.
	var res *fsm.Result
	var err error
	first := n.IsLeader()
	if first {
		if res, err = n.applyLocalUntil(ctx, cmd, deadline); err == nil || finalProposeErr(err) {
			return res, err
		}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := 20 * time.Millisecond
	for {
		if !first {
			res, err = n.proposeOnce(ctx, cmd)
		}
		first = false
		if err == nil {
			return res, nil
		}
		if finalProposeErr(err) {
			return nil, err // a retry would be refused again
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

// finalProposeErr reports whether a retry of the write would be refused
// again.
func finalProposeErr(err error) bool {
	var limited *RateLimitedError
	return errors.Is(err, ErrLeaderOnly) || errors.Is(err, errForwardRefused) || errors.As(err, &limited)
}

func (n *Node) proposeOnce(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	if n.IsLeader() {
		deadline, _ := ctx.Deadline() // Propose's loop always sets one
		return n.applyLocalUntil(ctx, cmd, deadline)
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

// applyLocalUntil draws the rate budget ctx carries, if any, then has the
// committer stamp cmd with the leader's clock and apply it through raft,
// waiting until deadline at most. A refused draw returns a
// *RateLimitedError and nothing reaches the log.
func (n *Node) applyLocalUntil(ctx context.Context, cmd *fsm.Command, deadline time.Time) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, errNotLeader
	}
	if err := n.gate(ctx); err != nil {
		return nil, err
	}
	return n.enqueue(ctx, cmd, deadline)
}

// enqueue hands cmd to the committer, which stamps it and sends it to
// raft, alone or grouped with the writes that arrived meanwhile
// (group.go), and waits for its answer until ctx ends or deadline passes
// (a zero deadline: until ctx ends).
func (n *Node) enqueue(ctx context.Context, cmd *fsm.Command, deadline time.Time) (*fsm.Result, error) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := waitTimers.Get().(*time.Timer)
		t.Reset(time.Until(deadline))
		defer func() {
			t.Stop()
			waitTimers.Put(t)
		}()
		expired = t.C
	}
	// Both cases of the select below may be ready at once, and select
	// picks at random: a caller already gone or past its deadline must
	// not be queued.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return nil, context.DeadlineExceeded
	}
	q := &queued{cmd: cmd, done: make(chan queuedAnswer, 1)}
	select {
	case n.committer.in <- q:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-expired:
		return nil, context.DeadlineExceeded
	}
	select {
	case a := <-q.done:
		return a.res, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-expired:
		return nil, context.DeadlineExceeded
	}
}

// waitTimers are stopped timers for enqueue's waits (since Go 1.23 a
// stopped or reset timer never delivers a stale tick).
var waitTimers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// stamp is the leader's time for a new entry: log time carried forward
// by the monotonic clock (see logClock), so a stepped wall clock can
// neither drag log time ahead nor freeze it.
func (n *Node) stamp() int64 { return n.clock.next(n.stateNowMs()) }

func (n *Node) stateNowMs() int64 {
	var now int64
	n.machine.Read(func(st *fsm.State, _ uint64) { now = st.NowMs })
	return now
}

// LogNowMs estimates the log's time now: the state's time plus the real
// time since this node saw it advance. On a node cut off from the leader,
// or when nothing is proposed, it keeps moving, so staleness shows.
func (n *Node) LogNowMs() int64 { return n.clock.estimate(n.stateNowMs()) }

// AppliedQuiet is how long this node has applied no entry that moves log
// time. The leader proposes a tick every TickInterval, so on a node that
// keeps up with its leader it stays below a few ticks; measured on this
// node's monotonic clock, so no clock skew between nodes enters it.
// It reads the state's time as last published by the applier, not under
// the machine's lock, so /healthz never waits on a batch or a restore.
func (n *Node) AppliedQuiet() time.Duration {
	return n.clock.quietFor(n.fsm.figures.Load().NowMs)
}

// StateHealth is what /healthz needs of the replicated state, read
// without the machine's lock: the figures the applier last published,
// whether a snapshot is being restored, and for how long the batch being
// applied has held (or waited for) the lock (0 when none is).
type StateHealth struct {
	StateFigures
	Restoring bool
	Busy      time.Duration
}

// StateHealth returns the state's health figures at once.
func (n *Node) StateHealth() StateHealth {
	h := StateHealth{StateFigures: *n.fsm.figures.Load(), Restoring: n.fsm.restoring.Load()}
	if since := n.fsm.busySince.Load(); since != 0 {
		h.Busy = time.Duration(max(monoNow()-since, 0))
	}
	return h
}

// ClockMs is the time a leader-side driver should put in a payload it is
// about to propose (an oracle print's time): never ahead of the stamp the
// entry will get.
func (n *Node) ClockMs() int64 {
	// A leader that has not applied its inherited log yet does not know
	// the log's time (awaitInheritedLog): it answers as a follower would.
	if n.IsLeader() && n.appliedTerm.Load() == n.Raft.CurrentTerm() {
		return n.clock.peek(n.stateNowMs())
	}
	return n.LogNowMs()
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
