package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// runDrivers is the leader-side loop: while this node leads it proposes a
// clock tick every TickInterval, seeds genesis on a new cluster, and keeps
// its own advertised addresses current. Every node also makes sure its own
// addresses are recorded, so the leader's admin endpoint can be found.
func (n *Node) runDrivers() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.TickInterval)
	defer tick.Stop()
	meta := time.NewTicker(min(metaCheckInterval, n.cfg.TickInterval))
	defer meta.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-meta.C:
			n.ensureMeta()
			n.clock.observe(n.stateNowMs())
			continue
		case <-tick.C:
		}
		n.ensureMeta()
		if n.Raft.State() != raft.Leader {
			continue
		}
		n.ensureGenesis()
		n.proposeInternal(fsm.CmdTick, nil)
		for _, d := range n.leaderDrivers {
			d(n)
		}
	}
}

// metaCheckInterval is how often a node checks that its addresses are
// recorded, independently of the tick: until they are, nobody can forward
// to it, so a node that just joined (and may be elected at once) announces
// itself within this time rather than a whole TickInterval. The check is a
// map lookup; it proposes only when the record is missing or stale.
const metaCheckInterval = 100 * time.Millisecond

// leaderDrivers run once per tick on the leader (oracle, rail, ...).
// Registered before Start by the owning packages' wiring.

// AddLeaderDriver registers a function run on every leader tick.
func (n *Node) AddLeaderDriver(d func(*Node)) { n.leaderDrivers = append(n.leaderDrivers, d) }

func (n *Node) proposeInternal(t fsm.CmdType, payload any) (*fsm.Result, error) {
	cmd, err := fsm.NewCommand(t, payload)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ProposeTimeout)
	defer cancel()
	// Shutdown waits for the drivers: without a quorum a propose would
	// otherwise hold it for the whole ProposeTimeout.
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := n.Propose(ctx, cmd)
	if err != nil {
		n.cfg.Logger.Debug("internal propose failed", "type", t, "err", err)
	}
	return res, err
}

// ProposeInternal proposes a command that carries no client identity.
func (n *Node) ProposeInternal(t fsm.CmdType, payload any) (*fsm.Result, error) {
	return n.proposeInternal(t, payload)
}

func (n *Node) ensureGenesis() {
	var has bool
	n.machine.Read(func(st *fsm.State, _ uint64) { has = st.Genesis != nil })
	if has {
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	level := fsm.FeatureLevel
	if n.cfg.GenesisAtLevelZero {
		level = 0
	}
	n.proposeInternal(fsm.CmdGenesis, fsm.GenesisPayload{Seed: binary.BigEndian.Uint64(b[:]), Deployment: n.cfg.Deployment, FeatureLevel: level,
		FaucetGrantMsat: n.cfg.FaucetGrantMsat, FaucetGrantsPerHour: n.cfg.FaucetGrantsPerHour,
		SignupsPerHour: n.cfg.SignupsPerHour})
}

func (n *Node) ensureMeta() {
	want := fsm.NodeMeta{ID: n.cfg.ID, Raft: string(n.trans.LocalAddr()), HTTP: n.cfg.HTTPAddr, Admin: n.cfg.AdminAddr}
	var ok bool
	n.machine.Read(func(st *fsm.State, _ uint64) {
		if m, found := st.Nodes[want.ID]; found && *m == want {
			ok = true
		}
	})
	if ok {
		return
	}
	if _, id := n.Raft.LeaderWithID(); id == "" {
		return
	}
	if !n.metaInFlight.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.metaInFlight.Store(false)
		_, _ = n.proposeInternal(fsm.CmdNodeMeta, want)
	}()
}
