package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// Node is one running member of a perpd cluster.
type Node struct {
	cfg     Config
	Raft    *raft.Raft
	machine *fsm.Machine
	fsm     *raftFSM
	// hashes runs state hashes on the shadow, one at a time, and
	// remembers recent ones (statehash.go).
	hashes *stateHasher
	// porBuilds builds Proof of Reserves snapshots beside apply, on the
	// snapshot shadow (porbuild.go).
	porBuilds *porBuilder
	store     *watchedStore
	snaps     *raft.FileSnapshotStore
	trans     *snapshotGuard
	// dialRaft opens a connection to a peer's raft listener the way raft
	// does (with TLS, a handshake as a member of this cluster).
	dialRaft func(raft.ServerAddress, time.Duration) (net.Conn, error)
	Events   *Bus
	// freshDataDir is set when this start found no member mark and no
	// raft state in the data directory (FreshDataDir).
	freshDataDir bool
	// admit hands raft its requests (Config.AwaitJoin); nil once done or
	// when raft was never held.
	admitMu sync.Mutex
	admit   func() error

	forwarder     *forwarder
	keys          *keys
	leaderDrivers []func(*Node)
	metaInFlight  atomic.Bool

	clock *logClock

	// committer groups the leader's writes into raft entries (group.go).
	committer *committer
	// appliedTerm is the raft term in which this node, leading, has
	// applied every entry it inherited (awaitInheritedLog).
	appliedTerm atomic.Uint64
	// forwards batches this node's forwarded writes (forward_batch.go).
	forwards *forwardBatcher

	// meter is the rate-budget keeper drawn at the leader (SetMeter);
	// draws remembers admitted draws so retries are not charged twice.
	meter atomic.Pointer[Meter]
	draws draws

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// New opens (or creates) the node's data directory and starts raft. With
// cfg.Bootstrap and no existing raft state it forms a one-voter cluster.
// On failure everything it opened is closed again, so a caller may retry
// (a held bolt file lock would make the retry wait forever).
func New(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if cfg.ID == "" || cfg.DataDir == "" || cfg.RaftAddr == "" {
		return nil, errors.New("node: id, data dir and raft address are required")
	}
	if cfg.NoTrailingLogs && cfg.TrailingLogs != 0 {
		return nil, fmt.Errorf("node: NoTrailingLogs with TrailingLogs %d: set one or the other", cfg.TrailingLogs)
	}
	if cfg.TLS == nil {
		if err := RequireLoopback("raft address", cfg.RaftAddr); err != nil {
			return nil, err
		}
		if cfg.AdminAddr != "" {
			if err := RequireLoopback("admin address", cfg.AdminAddr); err != nil {
				return nil, err
			}
		}
	}
	if cfg.ClusterSecret == "" {
		cfg.ClusterSecret = NewClusterSecret()
	}
	ks, err := deriveKeys(cfg.ClusterSecret)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	// MkdirAll keeps the mode of a directory that exists, and raft writes
	// its snapshots (the whole state) 0644 in a 0755 directory: only the
	// directory's own mode keeps other users out.
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s must be private to this node's user (0700): %w", cfg.DataDir, err)
	}
	if err := checkVoterDataLost(cfg.DataDir); err != nil {
		return nil, err
	}
	marked, err := checkNodeIDFile(cfg.DataDir, cfg.ID)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, keys: ks, Events: NewBus(), stop: make(chan struct{}), clock: newLogClock(cfg.Clock)}
	n.porBuilds = newPoRBuilder()
	n.porBuilds.minAccounts.Store(int64(cfg.PoRBesideApplyFrom))
	n.machine = fsm.NewMachine(fsm.Options{CheckInvariants: cfg.CheckInvariants, PoRBuilds: n.porBuilds})
	n.fsm = newRaftFSM(n.machine, n.Events.Publish)
	n.fsm.gap = n.Events.Gap
	n.fsm.halted = n.onHalt
	n.leaderDrivers = append(n.leaderDrivers, newNodeRecordReconciler())
	var peerTLS *tls.Config
	if cfg.TLS != nil {
		peerTLS = cfg.TLS.ClientConfig()
	}
	n.forwarder = newForwarder(peerTLS)

	boltStore, err := openLogStore(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		return nil, fmt.Errorf("open raft store: %w", err)
	}
	store := &watchedStore{BoltStore: boltStore}
	n.store = store
	started := false
	defer func() {
		if started {
			return
		}
		if n.Raft != nil {
			_ = n.Raft.Shutdown().Error()
		}
		if n.trans != nil {
			_ = n.trans.Close()
		}
		_ = store.Close()
	}()
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 3, cfg.Logger.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	n.snaps = snaps
	netTrans, dial, err := newTransport(cfg, ks)
	if err != nil {
		return nil, fmt.Errorf("raft transport: %w", err)
	}
	n.dialRaft = dial
	trans := newSnapshotGuard(netTrans, cfg.Logger.Named("transport"))
	trans.store = store
	n.trans = trans

	rc := raftConfig(cfg)
	has, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, err
	}
	n.fsm.shadow = &shadow{logs: logs, snaps: snaps}
	n.porBuilds.shadow = n.fsm.shadow
	n.fsm.porBuilds = n.porBuilds
	n.hashes = &stateHasher{hashAt: n.fsm.shadow.hashAt}
	if cfg.ApplyArchive != "" {
		if n.fsm.archive, err = openApplyArchive(cfg.ApplyArchive); err != nil {
			return nil, err
		}
	}
	r, err := newRaft(rc, n.fsm, logs, store, metaSnapshots{snaps}, trans, cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.Raft = r
	// Checked before the transport hands raft any request: a refused
	// node takes no part in the cluster, not even for a moment.
	n.freshDataDir = !marked && !has
	holdRaft := cfg.AwaitJoin && n.freshDataDir && !cfg.Bootstrap
	if !marked {
		if has {
			if err := checkStoredConfiguration(r, cfg.DataDir, cfg.ID, trans.LocalAddr()); err != nil {
				return nil, err
			}
		}
		// A held node is marked when admitted: stopped before that, it
		// starts fresh again and asks again.
		if !holdRaft {
			if err := writeNodeIDFile(cfg.DataDir, cfg.ID); err != nil {
				return nil, fmt.Errorf("mark the data directory: %w", err)
			}
		}
	}
	// A stop between raft's install of a leader's snapshot and the guard's
	// clean-up after it (follower.installed) leaves the entries that
	// snapshot replaced in the log; they go before the transport hands
	// raft any request, judged against the snapshot raft restored (an
	// older one when the newest would not open). A snapshot of the node's
	// own keeps its trailing entries (the log holds its index at its term,
	// or starts after it); one of raft's user restores (RestoreSnapshot)
	// sits in a hole after the log, whose entries before it go as
	// hashicorp/raft drops them for monotonic log stores.
	if idx, term, ok := lastSnapshotOf(r); ok {
		if from, to, point, err := dropUnvouched(logs, idx, term); err != nil {
			return nil, fmt.Errorf("check the log below snapshot %d: %w", idx, err)
		} else if from != 0 {
			cfg.Logger.Warn("dropped log entries the restored snapshot replaced",
				"from", from, "to", to, "snapshot-index", idx, "snapshot-term", term, "point-stored", point)
		}
	}
	held := follower{r: r, logs: logs, snaps: snaps, log: cfg.Logger.Named("transport")}
	if holdRaft {
		// Requests wait in the transport until the join's check has
		// passed (AdmitRaft).
		n.admit = func() error {
			if err := writeNodeIDFile(cfg.DataDir, cfg.ID); err != nil {
				return fmt.Errorf("mark the data directory: %w", err)
			}
			trans.start(held)
			return nil
		}
	} else {
		trans.start(held)
	}
	if cfg.Bootstrap && !has {
		f := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
			ID: raft.ServerID(cfg.ID), Address: trans.LocalAddr(), Suffrage: raft.Voter,
		}}})
		switch err := f.Error(); {
		case err == nil:
			campaignNow(r)
		case !errors.Is(err, raft.ErrCantBootstrap):
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	n.committer = newCommitter(n)
	n.forwards = newForwardBatcher(n)
	n.wg.Add(2)
	go n.committer.run()
	go n.forwards.run()
	started = true
	return n, nil
}

// newRaft is raft.NewRaft, refusing with an error where raft panics: when
// the newest snapshot does not open (a damaged file fails its CRC) raft
// restores an older one, and when the log was compacted past that one it
// panics on the first missing entry ("log not found"), naming neither the
// snapshot nor the way out.
func newRaft(rc *raft.Config, machine raft.FSM, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore,
	trans raft.Transport, dataDir string) (r *raft.Raft, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if e, ok := p.(error); !ok || !errors.Is(e, raft.ErrLogNotFound) {
			panic(p)
		}
		r, err = nil, fmt.Errorf("the raft log does not continue from the newest snapshot that opens: a newer one in %s is damaged "+
			"(the log names the one that failed to open); this node cannot rebuild its state: remove it from the cluster, "+
			"move its data directory aside and add it back with an empty one (it receives the leader's snapshot), "+
			"or restore a backup", filepath.Join(dataDir, "snapshots"))
	}()
	return raft.NewRaft(rc, machine, logs, stable, snaps, trans)
}

// campaignNow makes a freshly bootstrapped lone voter campaign at once:
// it has no leader to hear from, so the heartbeat timeout (up to twice
// raftConfig's, 1.4 s) is pure waiting for every new cluster and every
// test that starts one. Lowering the timeout wakes raft's follower loop,
// which finds that no leader ever made contact and campaigns; the timeout
// is put back at once (raft reads it afresh for each timer).
func campaignNow(r *raft.Raft) {
	rc := r.ReloadableConfig()
	shorter := rc
	shorter.HeartbeatTimeout -= time.Millisecond // still above LeaderLeaseTimeout
	if r.ReloadConfig(shorter) == nil {
		_ = r.ReloadConfig(rc)
	}
}

// newTransport is raft over mutual TLS when cfg.TLS is set, otherwise
// over plain TCP (loopback only, checked in New) with each connection
// authenticated by the cluster secret (secretStream). The fingerprint
// names the cluster in either handshake.
func newTransport(cfg Config, ks *keys) (*raft.NetworkTransport, func(raft.ServerAddress, time.Duration) (net.Conn, error), error) {
	log := cfg.Logger.Named("transport")
	tc := transportConfig(log)
	if cfg.TLS != nil {
		stream, err := newTLSStream(cfg.RaftAddr, cfg.TLS, ks.fingerprint, log)
		if err != nil {
			return nil, nil, err
		}
		tc.Stream = stream
		return raft.NewNetworkTransportWithConfig(tc), stream.Dial, nil
	}
	stream, err := newSecretStream(cfg.RaftAddr, ks.raftStream, ks.fingerprint, log)
	if err != nil {
		return nil, nil, err
	}
	tc.Stream = stream
	return raft.NewNetworkTransportWithConfig(tc), stream.Dial, nil
}

// transportConfig is the raft transport's settings but its stream: a pool
// of 3 connections a peer, a 10 s I/O deadline, and no pipelining
// (MaxRPCsInFlight 1). A pipelined follower that answers one append
// Success=false (its log store failed the append, say a full disk) can
// park the leader's replication to it for good: the decoder stops at the
// refusal while the sender races one more append into the pipeline, and
// each then waits on the other's unbuffered channel (hashicorp/raft#612;
// reproduced here with a full disk, 1 run in about 14). The follower still
// gets heartbeats, so nothing times out; it just never gets another entry
// until the leader restarts. Without pipelining each append waits for its
// answer, which with one group commit in flight (group.go) is what
// happened anyway (docs/decisions.md, "No pipelined replication").
func transportConfig(log hclog.Logger) *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{MaxPool: 3, Timeout: 10 * time.Second, Logger: log, MaxRPCsInFlight: 1}
}

// Start runs the background drivers. Register leader drivers before it.
func (n *Node) Start() {
	n.wg.Add(1)
	go n.runDrivers()
}

// raftConfig sets timeouts for loopback and LAN clusters: a leader failure
// is detected in well under two seconds, while a loaded two-core CI machine
// still does not flap.
func raftConfig(cfg Config) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = cfg.Logger.Named("raft")
	rc.HeartbeatTimeout = 700 * time.Millisecond
	rc.ElectionTimeout = 700 * time.Millisecond
	rc.LeaderLeaseTimeout = 350 * time.Millisecond
	// Followers learn the commit index within CommitTimeout even when the
	// leader is idle, which bounds how long X-Min-Index waits on them.
	rc.CommitTimeout = 20 * time.Millisecond
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	// A member that removes itself (the leader, removed through any node)
	// stays a follower outside the configuration instead of shutting raft
	// down, so joining it back works without restarting its process. It
	// does not campaign: raft aborts an election where the stable
	// configuration gives it no vote.
	rc.ShutdownOnRemove = false
	return rc
}

// RaftAddr is the raft transport's advertised address.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Config returns the node's configuration.
func (n *Node) Config() Config { return n.cfg }

// Machine is the node's state machine, for reads.
func (n *Node) Machine() *fsm.Machine { return n.machine }

// IsLeader reports whether this node currently leads.
func (n *Node) IsLeader() bool { return n.Raft.State() == raft.Leader }

// RaftHeld reports whether raft is handed no request yet: a fresh data
// directory started to join (Config.AwaitJoin), before AdmitRaft.
func (n *Node) RaftHeld() bool {
	n.admitMu.Lock()
	defer n.admitMu.Unlock()
	return n.admit != nil
}

// AdmitRaft marks a held node's data directory as this member's and hands
// raft the requests its transport kept waiting, and every later one; it
// does nothing on a node not held.
func (n *Node) AdmitRaft() error {
	n.admitMu.Lock()
	defer n.admitMu.Unlock()
	if n.admit == nil {
		return nil
	}
	if err := n.admit(); err != nil {
		return err
	}
	n.admit = nil
	return nil
}

// FreshDataDir reports whether this start found the data directory new:
// no member mark (node-id) and no raft state. A node that joined and then
// stopped before it was sent any entry has its mark; one whose directory
// was wiped has not.
func (n *Node) FreshDataDir() bool { return n.freshDataDir }

// StoreHealthy reports whether the raft log store answers and its last
// write succeeded (StoreProblem says what is wrong).
func (n *Node) StoreHealthy() bool { return n.StoreProblem() == "" }

// Done is closed when the node shuts down.
func (n *Node) Done() <-chan struct{} { return n.stop }

// Shutdown stops drivers, raft, the transport and the store.
func (n *Node) Shutdown() error {
	var err error
	n.stopOnce.Do(func() {
		close(n.stop)
		n.wg.Wait()
		err = n.Raft.Shutdown().Error()
		_ = n.trans.Close()
		_ = n.store.Close()
		// The archive keeps its first write error to here: a harness
		// comparing replicas must learn that this one's is incomplete.
		if n.fsm.archive != nil {
			if aerr := n.fsm.archive.close(); aerr != nil {
				err = errors.Join(err, fmt.Errorf("apply archive %s: %w", n.cfg.ApplyArchive, aerr))
			}
		}
		n.Events.Close()
	})
	return err
}
