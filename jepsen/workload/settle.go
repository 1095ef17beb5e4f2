package workload

import (
	"context"
	"time"

	"github.com/perpd/perpd/jepsen/history"
)

// An unknown outcome is settled while the clients run: the process that
// replaces the crashed one resends the same request, under the same
// idempotency key, to the other nodes in turn, up to settleRounds times
// each, until one acknowledges it. The state machine stores a success
// under its key and answers every later copy with it, so an acknowledgement
// means the write took effect exactly once, between the original's
// invocation and that answer: the checkers place it there (checker.Writes),
// as one operation, instead of leaving it possibly pending until the end of
// the run (which made the linearizability search blow up). A refusal
// settles nothing while the clients run (history.Op.InRun): what is still
// unsettled after the attempts goes back to Env's pending writes, for the
// harness to settle after the faults heal.
const (
	settleRounds = 2
	settlePause  = 250 * time.Millisecond
)

// newPID draws a fresh process id.
func (e *Env) newPID() int { return int(e.nextPID.Add(1)) - 1 }

// takePendingOf removes and returns the unknown-outcome writes invoked by
// process pid.
func (e *Env) takePendingOf(pid int) []Pending {
	e.mu.Lock()
	defer e.mu.Unlock()
	var mine []Pending
	keep := e.pending[:0]
	for _, p := range e.pending {
		if p.Op.Process == pid {
			mine = append(mine, p)
		} else {
			keep = append(keep, p)
		}
	}
	clear(e.pending[len(keep):])
	e.pending = keep
	return mine
}

// settleNow retries pend, which an earlier process left with an unknown
// outcome on pend.Op.Node, on the other nodes as process p (which takes a
// new id after any attempt that itself ends unknown). It reports whether
// an attempt was acknowledged; if none was, pend goes back to the pending
// writes.
func settleNow(ctx context.Context, e *Env, p *Process, pend Pending) bool {
	others := otherNodes(e.Nodes, pend.Op.Node)
	for a := 0; a < settleRounds*len(others) && ctx.Err() == nil; a++ {
		if a > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(settlePause):
			}
			if ctx.Err() != nil {
				break
			}
		}
		done := retry(ctx, e, p.ID, retryNode(others, p.ID, a), pend, true)
		if done.Type == history.Info {
			p.ID = e.newPID()
		}
		if done.Type == history.OK {
			return true
		}
	}
	e.AddPending(pend)
	return false
}

// otherNodes is nodes without failed (all of them if failed is not one).
func otherNodes(nodes []string, failed string) []string {
	var out []string
	for _, n := range nodes {
		if n != failed {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nodes
	}
	return out
}

// retryNode is the node of attempt a by process pid: the other nodes in
// turn, starting at one the process id picks, so processes that failed on
// the same node at once spread their retries over the others instead of
// all landing on the same one.
func retryNode(others []string, pid, a int) string {
	return others[(pid+a)%len(others)]
}
