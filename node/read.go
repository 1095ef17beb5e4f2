package node

import (
	"context"
	"errors"
	"time"
)

// MaxReadWait bounds how long a read waits for X-Min-Index or a
// linearizable read index before answering 503.
const MaxReadWait = 3 * time.Second

// ErrReadTimeout means the node did not reach the wanted index in time.
var ErrReadTimeout = errors.New("node has not applied the requested index in time")

// WaitApplied blocks until the node has applied index, the context ends, or
// MaxReadWait passes.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if n.machine.Applied() >= index {
		return nil // the usual case, a write answered on its leader: no timer
	}
	ctx, cancel := context.WithTimeout(ctx, MaxReadWait)
	defer cancel()
	for {
		ch := n.fsm.changed()
		if n.machine.Applied() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ErrReadTimeout
		}
	}
}

// readAheadSlack is how far past the log this node knows of an index may
// lie and still be waited for: more than a loaded cluster appends in
// MaxReadWait (a log append and its fsync take about 0.3 ms,
// docs/performance.md), so an index a write acknowledged elsewhere
// returned, or the next few ticks, is always waited for.
const readAheadSlack = 100_000

// IndexOutOfReach reports whether index lies so far beyond the log this
// node knows of (its own last entry, and the last index a leader's
// request named to it) that no wait of MaxReadWait can reach it: a
// client's mistake or an index of another cluster, refused at once rather
// than after holding the request for the whole wait.
func (n *Node) IndexOutOfReach(index uint64) bool {
	known := max(n.Raft.LastIndex(), n.Raft.CommitIndex(), n.fsm.figures.Load().Applied)
	if n.trans != nil {
		known = max(known, n.trans.seen.Load())
	}
	return index > known && index-known > readAheadSlack
}
