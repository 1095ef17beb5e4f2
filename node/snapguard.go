package node

import (
	"io"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A leader can re-send a snapshot that a follower's log already covers: its
// replication to that follower fell back past the start of its own log (seen
// after a member was removed, wiped and re-joined). hashicorp/raft v1.7
// installs such a snapshot anyway:
//   - the follower's state machine goes back to the snapshot's index and
//     re-applies the entries after it only as the commit index moves on, so
//     reads on that follower go back in time meanwhile;
//   - its latest configuration becomes the snapshot's, and the newer
//     configuration entries it holds in its log are forgotten: a re-joined
//     member stops counting itself as a voter until the next change.
//
// Raft's paper says a follower that receives a snapshot describing a prefix
// of its log keeps the entries that follow. snapshotGuard does that: it sits
// between the transport and raft and answers such a request itself.

// guardedTransport is what raft gets from the network transport: the base
// interface plus the optional ones raft looks for.
type guardedTransport interface {
	raft.Transport
	raft.WithClose
	raft.WithPreVote
}

// snapshotGuard passes every RPC to raft except an InstallSnapshot that
// covered says the follower already holds; those it drains and answers with
// success, which moves the leader's replication on past the snapshot.
// covered runs on the pump: it must not wait on raft's main loop.
type snapshotGuard struct {
	guardedTransport
	in      <-chan raft.RPC
	out     chan raft.RPC
	covered func(*raft.InstallSnapshotRequest) bool
	log     hclog.Logger
	stop    chan struct{}
	once    sync.Once
}

func newSnapshotGuard(inner guardedTransport, log hclog.Logger) *snapshotGuard {
	return &snapshotGuard{
		guardedTransport: inner,
		in:               inner.Consumer(),
		out:              make(chan raft.RPC),
		log:              log,
		stop:             make(chan struct{}),
	}
}

// start begins passing RPCs on; covered decides which snapshots are answered
// here. Requests wait in the transport until then.
func (g *snapshotGuard) start(covered func(*raft.InstallSnapshotRequest) bool) {
	g.covered = covered
	go g.pump()
}

// Consumer is what raft reads its RPCs from.
func (g *snapshotGuard) Consumer() <-chan raft.RPC { return g.out }

// Close stops the pump and closes the transport; it may be called twice
// (raft's shutdown closes its transport, and so does the node's).
func (g *snapshotGuard) Close() error {
	g.once.Do(func() { close(g.stop) })
	return g.guardedTransport.Close()
}

func (g *snapshotGuard) pump() {
	for {
		var rpc raft.RPC
		select {
		case rpc = <-g.in:
		case <-g.stop:
			return
		}
		if req, ok := rpc.Command.(*raft.InstallSnapshotRequest); ok && g.covered(req) {
			// The data must be read off the stream before the answer, as
			// raft itself does, or the connection is left mid-message.
			n, _ := io.Copy(io.Discard, rpc.Reader)
			g.log.Info("snapshot not installed: the log already holds its last entry and the state machine has applied it",
				"index", req.LastLogIndex, "term", req.LastLogTerm, "bytes", n)
			rpc.Respond(&raft.InstallSnapshotResponse{Term: req.Term, Success: true}, nil)
			continue
		}
		if _, ok := rpc.Command.(*raft.InstallSnapshotRequest); ok {
			g.installThenWait(rpc)
			continue
		}
		select {
		case g.out <- rpc:
		case <-g.stop:
			return
		}
	}
}

// installThenWait hands a snapshot to raft and holds the next request until
// raft has answered, so that a copy of the same snapshot arriving on another
// connection meanwhile (the leader's old replication to a re-added member
// can send one) is judged against the state the first one left. Raft's main
// loop is busy with the install all that time anyway.
func (g *snapshotGuard) installThenWait(rpc raft.RPC) {
	reply := rpc.RespChan
	done := make(chan raft.RPCResponse, 1)
	rpc.RespChan = done
	select {
	case g.out <- rpc:
	case <-g.stop:
		return
	}
	select {
	case resp := <-done:
		reply <- resp
	case <-g.stop:
	}
}

// alreadyHeld reports whether a snapshot request describes a prefix of what
// this follower already has: the request is of the current term, the state
// machine has applied the snapshot's last index, and that entry is known
// here with the same term, either in the log (so, by raft's log matching,
// every entry before it too) or as the point of a stored snapshot (a
// follower that installed this very snapshot keeps only the log after it).
// Any doubt (an entry compacted away, a read error, another term) leaves the
// request to raft.
func alreadyHeld(r *raft.Raft, logs raft.LogStore, snaps raft.SnapshotStore) func(*raft.InstallSnapshotRequest) bool {
	return func(req *raft.InstallSnapshotRequest) bool {
		if req.Term != r.CurrentTerm() || r.AppliedIndex() < req.LastLogIndex {
			return false
		}
		var entry raft.Log
		if err := logs.GetLog(req.LastLogIndex, &entry); err == nil {
			return entry.Term == req.LastLogTerm
		}
		list, err := snaps.List()
		if err != nil {
			return false
		}
		for _, m := range list {
			if m.Index == req.LastLogIndex && m.Term == req.LastLogTerm {
				return true
			}
		}
		return false
	}
}
