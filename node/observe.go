package node

import (
	"sync/atomic"
	"time"
)

// Observer receives the node's operational measurements (the metrics
// package turns them into Prometheus series). Every method is called on a
// hot path and must not block.
type Observer interface {
	// Applied is one batch raft handed the state machine: how many log
	// entries it held and how long applying them took.
	Applied(entries int, d time.Duration)
	// Grouped is one raft entry the leader's group commit built, and how
	// many client commands it carries.
	Grouped(commands int)
}

// SetObserver installs o (nil removes it). Set it before Start.
func (n *Node) SetObserver(o Observer) {
	if o == nil {
		n.fsm.obs.Store(nil)
		return
	}
	n.fsm.obs.Store(&o)
}

func (n *Node) observer() Observer {
	if p := n.fsm.obs.Load(); p != nil {
		return *p
	}
	return nil
}

// ConservationCheck is the outcome of the latest ledger conservation check
// this node ran: every snapshot (raft's own, a backup, an operator's
// download) checks the whole ledger before encoding it, and a failure halts
// the replica.
type ConservationCheck struct {
	Index uint64    // the applied index the checked state was at
	At    time.Time // when the check finished
	OK    bool
}

// LastConservationCheck returns the latest check, or ok false when this
// process has not run one yet.
func (n *Node) LastConservationCheck() (ConservationCheck, bool) {
	p := n.fsm.lastCheck.Load()
	if p == nil {
		return ConservationCheck{}, false
	}
	return *p, true
}

// checkRecorder is embedded in raftFSM.
type checkRecorder struct {
	obs       atomic.Pointer[Observer]
	lastCheck atomic.Pointer[ConservationCheck]
}

func (c *checkRecorder) recordCheck(index uint64, ok bool) {
	c.lastCheck.Store(&ConservationCheck{Index: index, At: time.Now(), OK: ok})
}
