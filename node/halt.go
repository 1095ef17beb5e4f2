package node

import (
	"time"

	"github.com/perpd/perpd/fsm"
)

// haltLeaveDelay is how long a halted node stays in raft before it leaves.
// The machine applies nothing in that time, but a halted leader keeps
// replicating: its followers learn (within raft's CommitTimeout) that the
// entry that broke it is committed, and apply it themselves. Leaving at
// once would leave them unsure of it until a new leader commits it, and if
// the last quorum halts on a deterministic bug nobody would: the remaining
// replica would sit leaderless instead of saying why.
const haltLeaveDelay = 300 * time.Millisecond

// Halted returns why this replica's state machine stopped applying, or nil.
// A halted node serves nothing: its state may hold part of an entry.
func (n *Node) Halted() *fsm.Halt { return n.machine.Halted() }

// onHalt runs once, when the machine halts (a panic inside apply, or a
// broken ledger at a snapshot). The node says why, then leaves raft: it
// stops voting and acknowledging, so the others carry on without it (a
// halted leader is replaced by an election), and it can never send its
// state to anyone. Its HTTP listeners stay up to answer /healthz with the
// reason. It is replaced by removing it, wiping its data directory and
// rejoining, which rebuilds it from a healthy member's snapshot.
func (n *Node) onHalt(h *fsm.Halt) {
	n.cfg.Logger.Error("replica halted: stopped applying and left raft; replace this node (remove, wipe its data directory, rejoin)",
		"index", h.Index, "command_type", uint16(h.Type), "reason", h.Reason, "stack", h.Stack)
	// Not on raft's FSM goroutine: Shutdown waits for it.
	go func() {
		select {
		case <-time.After(haltLeaveDelay):
		case <-n.stop:
		}
		if err := n.Raft.Shutdown().Error(); err != nil {
			n.cfg.Logger.Error("halt: raft shutdown", "err", err)
		}
		// Subscribers (WebSocket clients) must not go on reading from this
		// replica; closing the bus ends their streams.
		n.Events.Close()
	}()
}
