package node

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// Config is one node's identity, addresses and raft tuning.
type Config struct {
	ID        string
	DataDir   string
	RaftAddr  string // bind and advertise address of the raft transport
	HTTPAddr  string // public REST and WebSocket listener (advertised to peers)
	AdminAddr string // admin and node-to-node listener
	// Bootstrap forms a new single-voter cluster when the data directory
	// holds no raft state yet. A node with existing state never bootstraps.
	Bootstrap bool
	// AwaitJoin says the node will ask to join (cluster.JoinNode). On a
	// fresh data directory (FreshDataDir) raft is then handed no request
	// until AdmitRaft: a voter whose directory was wiped must not vote or
	// acknowledge entries before the leader has refused it.
	AwaitJoin  bool
	Deployment string
	// GenesisAtLevelZero makes a new cluster's genesis start at feature
	// level 0, as the builds before feature levels did (tests of the
	// raise); a new cluster otherwise starts at fsm.FeatureLevel.
	GenesisAtLevelZero bool
	// AdminToken authenticates operators on the admin listener, and
	// nothing else: members need not share it.
	AdminToken string
	// MetricsToken, when set, is a second bearer token accepted only by
	// GET /metrics on the admin listener (a read-only scrape credential).
	MetricsToken string
	// ReplicaCheckInterval, when positive, is how often the leader
	// compares every member's state hash at one index (cluster.ReplicaWatch)
	// and reports the outcome as metrics; zero never does.
	ReplicaCheckInterval time.Duration
	// ClusterSecret is shared by every member and never reaches operators.
	// The peer credential of node-to-node calls, the simulated rail's node
	// key and the confirm-token MAC key are derived from it (HKDF, one
	// label each). Empty draws a random one: right for a lone node only.
	ClusterSecret string
	// TLS, when set, runs raft and the admin listener's peer calls over
	// mutual TLS. Without it raft and admin must bind to loopback.
	TLS *PeerTLS

	// SnapshotThreshold is how many new log entries trigger a snapshot;
	// 0 is DefaultSnapshotThreshold.
	SnapshotThreshold uint64
	// PoRBesideApplyFrom is the number of accounts from which the node
	// builds its Proof of Reserves trees on its snapshot shadow, beside
	// apply (porbuild.go); 0 is PoRBesideApplyFrom. Where a tree is
	// built never changes what is published.
	PoRBesideApplyFrom int
	// TrailingLogs is how many entries are kept after a snapshot, so a
	// briefly absent follower catches up from the log, not a snapshot; 0
	// is DefaultTrailingLogs unless NoTrailingLogs is set.
	TrailingLogs uint64
	// NoTrailingLogs keeps no entries after a snapshot (raft's TrailingLogs
	// 0, legal there): every follower that falls behind one then catches
	// up from a snapshot. It is how `serve --trailing-logs 0` reaches raft
	// as asked, where a zero TrailingLogs alone means the default.
	NoTrailingLogs bool
	// SnapshotInterval is how often raft checks the threshold.
	SnapshotInterval time.Duration
	// TickInterval is how often the leader proposes a clock tick.
	TickInterval time.Duration
	// ProposeTimeout bounds a write's wait for a leader and a commit.
	ProposeTimeout time.Duration
	// GroupMax bounds how many writes share one raft entry (group commit,
	// group.go); 0 is DefaultGroupMax, 1 turns grouping off.
	GroupMax int
	// GroupLinger bounds how long the committer waits, after a large group
	// finishes, for its callers' next writes (group.go); 0 is
	// DefaultGroupLinger, negative turns the wait off.
	GroupLinger time.Duration
	// Faucet sizing proposed at genesis (zero keeps the defaults).
	FaucetGrantsPerHour int
	// SimRailDir, when set, is where the simulated rail records payouts,
	// shared by every node process on the machine that names it (devnet).
	SimRailDir string
	// SignupsPerHour caps signups cluster-wide, proposed at genesis (zero
	// keeps the default).
	SignupsPerHour  int
	FaucetGrantMsat int64
	// CheckInvariants runs the full conservation check after every entry.
	CheckInvariants bool
	// ApplyArchive, when set, is a file where the node records every entry
	// its live machine applies and the state hash every few entries
	// (archive.go): for fault-injection tests, never production.
	ApplyArchive string

	Logger hclog.Logger
	// Clock is where the node reads time (the system clock by default).
	Clock Clock
}

// Defaults chosen for a 3-5 node cluster on a LAN or loopback. The log sees
// about three entries a second when idle (a tick and two oracle prints), so
// a threshold of 16384 snapshots roughly every ninety idle minutes, and
// 10240 trailing entries let a follower that was down for up to about an
// hour of idle traffic catch up from the log instead of a full snapshot.
const (
	DefaultSnapshotThreshold = 16384
	DefaultTrailingLogs      = 10240
	DefaultSnapshotInterval  = 60 * time.Second
	DefaultTickInterval      = time.Second
	DefaultProposeTimeout    = 5 * time.Second
)

func (c *Config) setDefaults() {
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.PoRBesideApplyFrom == 0 {
		c.PoRBesideApplyFrom = PoRBesideApplyFrom
	}
	if c.TrailingLogs == 0 && !c.NoTrailingLogs {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.GroupLinger == 0 {
		c.GroupLinger = DefaultGroupLinger
	}
	c.GroupLinger = min(c.GroupLinger, MaxGroupLinger)
	if c.ProposeTimeout == 0 {
		c.ProposeTimeout = DefaultProposeTimeout
	}
	if c.Deployment == "" {
		c.Deployment = "testnet"
	}
	if c.Clock == nil {
		c.Clock = NewSystemClock()
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "perpd", Level: hclog.Info})
	}
}
