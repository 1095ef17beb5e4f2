package clustertest

import (
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/httpapi"
	"github.com/perpd/perpd/node"
)

// Option tunes a test cluster.
type Option func(*config)

type config struct {
	snapshotThreshold uint64
	groupMax          int
	trailingLogs      uint64
	snapshotInterval  time.Duration
	tickInterval      time.Duration
	proposeTimeout    time.Duration
	checkInvariants   bool
	deployment        string
	levelZero         bool
	logLevel          hclog.Level
	logOutput         io.Writer
	onNode            []func(*node.Node)
	prepareData       []func(id, dir string)
	assemble          Assembler
	tls               bool
	metricsToken      string
	replicaCheck      time.Duration
	logJSON           bool
	clock             node.Clock
}

// Assembler builds a node's admin server and public API before the node
// starts, wiring its domains in. cli.Assemble is one: passing it gives each
// member exactly what `perpd serve` runs.
type Assembler func(n *node.Node, log hclog.Logger) (*cluster.AdminServer, *httpapi.Server, error)

// Defaults keep a cluster quick to form and quick to notice change on a
// loaded two-core machine: a tick every 100ms records every node's
// addresses within a few ticks, and the raft timeouts are node's own.
func defaultConfig() config {
	return config{
		tickInterval:    100 * time.Millisecond,
		checkInvariants: true,
		deployment:      "testnet",
		logLevel:        hclog.Info,
	}
}

// SnapshotThreshold sets how many new entries trigger a snapshot; with
// SnapshotInterval and TrailingLogs small it forces log compaction.
func SnapshotThreshold(n uint64) Option { return func(c *config) { c.snapshotThreshold = n } }

// GroupMax bounds the writes of one raft entry (node.Config.GroupMax).
func GroupMax(n int) Option { return func(c *config) { c.groupMax = n } }

// TrailingLogs sets how many entries survive a compaction.
func TrailingLogs(n uint64) Option { return func(c *config) { c.trailingLogs = n } }

// SnapshotInterval sets how often raft checks the snapshot threshold.
func SnapshotInterval(d time.Duration) Option { return func(c *config) { c.snapshotInterval = d } }

// TickInterval sets how often the leader proposes a clock tick (and every
// node checks that its addresses are recorded).
func TickInterval(d time.Duration) Option { return func(c *config) { c.tickInterval = d } }

// ProposeTimeout bounds a write's wait for a leader and a commit.
func ProposeTimeout(d time.Duration) Option { return func(c *config) { c.proposeTimeout = d } }

// CheckInvariants turns the ledger check after every entry on or off (on
// by default: a broken invariant panics the applying node).
func CheckInvariants(on bool) Option { return func(c *config) { c.checkInvariants = on } }

// GenesisAtLevelZero starts the cluster at feature level 0, like a
// cluster formed by a build from before feature levels.
func GenesisAtLevelZero() Option { return func(c *config) { c.levelZero = true } }

// Deployment sets the deployment profile of every node.
func Deployment(name string) Option { return func(c *config) { c.deployment = name } }

// LogLevel sets the level of the nodes' logs. They are kept in memory and
// printed only when the test fails, unless LogOutput says otherwise.
func LogLevel(l hclog.Level) Option { return func(c *config) { c.logLevel = l } }

// LogOutput sends the nodes' logs to w as they are written.
func LogOutput(w io.Writer) Option { return func(c *config) { c.logOutput = w } }

// OnNode runs fn on every node after it is created and before it starts,
// on first start and on every restart (after the Assembler).
func OnNode(fn func(*node.Node)) Option {
	return func(c *config) { c.onNode = append(c.onNode, fn) }
}

// PrepareData runs fn on each member's data directory (created, empty)
// before the member first starts: a test can mount a small filesystem
// there, to fill its disk later.
func PrepareData(fn func(id, dir string)) Option {
	return func(c *config) { c.prepareData = append(c.prepareData, fn) }
}

// Assemble replaces how each member's admin server and public API are
// built. The default is the replicated core alone: cluster.NewAdminServer
// and httpapi.New over the simulated rail keyed from the admin token, with
// no domain drivers.
func Assemble(a Assembler) Option { return func(c *config) { c.assemble = a } }

// TLS runs raft and the admin listeners over mutual TLS, with certificates
// from a throwaway CA made for the cluster (Cluster.CA), as `perpd devnet`
// does. Cluster.Admin then presents an operator certificate.
func TLS() Option { return func(c *config) { c.tls = true } }

// MetricsToken gives every member a read-only metrics token.
func MetricsToken(tok string) Option { return func(c *config) { c.metricsToken = tok } }

// ReplicaCheckInterval makes the leader compare the replicas this often
// (node.Config.ReplicaCheckInterval); only assemblers that wire the watch
// (cli.Assemble) run it.
func ReplicaCheckInterval(d time.Duration) Option { return func(c *config) { c.replicaCheck = d } }

// Clock makes every member read time from clk: one clock a test moves
// forward moves log time on whichever member leads.
func Clock(clk node.Clock) Option { return func(c *config) { c.clock = clk } }

// LogJSON makes every member log in hclog's JSON format (serve --log-format json).
func LogJSON() Option { return func(c *config) { c.logJSON = true } }
