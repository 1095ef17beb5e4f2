package cli

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/httpapi"
	"github.com/perpd/perpd/metrics"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
	"github.com/perpd/perpd/wsapi"
)

// Parts are the pieces of one node that domain wirings plug into.
type Parts struct {
	Node  *node.Node
	Admin *cluster.AdminServer
	Rail  *rail.SimRail
	Log   hclog.Logger
	// HTTPOptions are handed to httpapi.New.
	HTTPOptions []httpapi.Option
}

// wirings connect a domain to a node: leader drivers (node.AddLeaderDriver),
// admin routes (Admin.Handle) and HTTP options. Each domain adds one from an
// init function in its own file (wire_<domain>.go).
var wirings []func(p *Parts) error

// Assembly is a node's served parts.
type Assembly struct {
	Admin *cluster.AdminServer
	API   *httpapi.Server
	Hub   *wsapi.Hub
	// replicas is the scheduled replica comparison (nil: switched off).
	replicas *cluster.ReplicaWatch
	reg      *metrics.Registry
}

// WatchBackups exports what the node's scheduled backups (one every
// every) have done, so an alert can fire when none has succeeded for a
// few intervals.
func (a *Assembly) WatchBackups(s *cluster.BackupStatus, every time.Duration) {
	a.reg.Gauge("backup_last_success_timestamp_seconds",
		"Unix time of this node's newest complete scheduled backup (when there is none, of when scheduling began).",
		func() float64 { return float64(s.LastSuccess().UnixMilli()) / 1000 })
	a.reg.Gauge("backup_interval_seconds", "How often this node writes a scheduled backup.",
		func() float64 { return every.Seconds() })
	a.reg.Counter("backup_failures_total", "Scheduled backups of this node that failed since it started.",
		func() float64 { return float64(s.Failures()) })
}

// Run starts the API's and hub's background loops, and the replica watch,
// until ctx ends.
func (a *Assembly) Run(ctx context.Context) {
	go a.API.RunTouches(ctx)
	go a.Hub.Run(ctx)
	if a.replicas != nil {
		go a.replicas.Run(ctx)
	}
}

// Assemble is Build for harnesses that serve the admin and API handlers
// themselves: the background loops run until the node shuts down.
func Assemble(n *node.Node, log hclog.Logger) (*cluster.AdminServer, *httpapi.Server, error) {
	a, err := Build(n, log)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-n.Done(); cancel() }()
	a.Run(ctx)
	return a.Admin, a.API, nil
}

// Build puts a node together: admin listener, rail, public API and
// WebSocket, with every domain wired in. The caller starts the node
// (Node.Start), serves the handlers and calls Run. `serve` and the test
// harnesses both use it, so tests run exactly what production runs.
// opts are further HTTP options (serve's trusted proxies). The deployment's
// profile scales the rate budgets (bench).
func Build(n *node.Node, log hclog.Logger, opts ...httpapi.Option) (*Assembly, error) {
	rl, err := newRail(n.Config().Deployment, n.RailNodeKey(), n.Config().SimRailDir)
	if err != nil {
		return nil, err
	}
	reg, err := metrics.New(n)
	if err != nil {
		return nil, err
	}
	p := &Parts{Node: n, Admin: cluster.NewAdminServer(n), Rail: rl, Log: log}
	p.HTTPOptions = append(p.HTTPOptions, httpapi.WithRail(rl), httpapi.WithRequestObserver(reg.ObserveHTTP))
	p.HTTPOptions = append(p.HTTPOptions, opts...)
	for _, w := range wirings {
		if err := w(p); err != nil {
			return nil, err
		}
	}
	hub := wsapi.New(n, log.Named("ws"))
	if k := profiles[n.Config().Deployment].wsPerAddress; k > 0 {
		hub.PerAddress = k
	}
	if k := profiles[n.Config().Deployment].wsPerAccount; k > 0 {
		hub.PerAccount = k
	}
	p.HTTPOptions = append(p.HTTPOptions, httpapi.WithWebSocket(hub))
	// The profile's scale applies last, to whatever budgets the options set.
	if k := profiles[n.Config().Deployment].budgetScale; k > 1 {
		p.HTTPOptions = append(p.HTTPOptions, httpapi.WithBudgetScale(k))
	}
	api := httpapi.New(n, log.Named("http"), p.HTTPOptions...)
	watchParts(reg, api, hub)
	p.Admin.ServeMetrics(reg.Handler())
	return &Assembly{Admin: p.Admin, API: api, Hub: hub, replicas: watchReplicas(reg, p.Admin, log), reg: reg}, nil
}

// watchReplicas builds the leader's scheduled replica comparison and
// exports it, when the node's configuration asks for one.
func watchReplicas(reg *metrics.Registry, admin *cluster.AdminServer, log hclog.Logger) *cluster.ReplicaWatch {
	every := admin.Node().Config().ReplicaCheckInterval
	if every <= 0 {
		return nil
	}
	w := cluster.NewReplicaWatch(admin, every, log.Named("replicas"))
	reg.WatchReplicas(func() (metrics.ReplicaCheck, bool) {
		c, ok := w.Last()
		index, _ := strconv.ParseUint(c.View.Index, 10, 64)
		return metrics.ReplicaCheck{At: c.At, Index: index, Agree: int(c.Verdict)}, ok
	}, w.Disagreements)
	return w
}

// watchParts adds the series of the parts the node does not own.
func watchParts(reg *metrics.Registry, api *httpapi.Server, hub *wsapi.Hub) {
	reg.Gauge("ratelimit_buckets", "Token buckets in this node's rate-limit table (one per key, account or address in use).",
		func() float64 { return float64(api.BucketCount()) })
	reg.Gauge("ws_connections", "Open WebSocket connections.", func() float64 { return float64(hub.Connections()) })
	reg.Counter("ws_dropped_frames_total", "WebSocket frames not sent because their connection was closed for resync.",
		func() float64 { return float64(hub.DroppedFrames()) })
	reg.Counter("ws_slow_consumer_closes_total", "WebSocket connections closed for resync because their send buffer was full.",
		func() float64 { return float64(hub.SlowConsumerCloses()) })
	reg.Counter("ws_flood_closes_total", "WebSocket connections closed with 1008 for sending more frames than the raw frame budget.",
		func() float64 { return float64(hub.FloodCloses()) })
	reg.Counter("ws_event_loss_closes_total", "WebSocket connections closed for resync because the node's event stream lost events.",
		func() float64 { return float64(hub.EventLossCloses()) })
}

// newRail builds the simulated rail of testnet and local deployments; its
// node key is derived from the cluster secret, so every member signs and
// recognises the same invoices. A prod deployment never gets it.
func newRail(deployment string, key []byte, bookDir string) (*rail.SimRail, error) {
	if deployment == "prod" {
		return nil, errProdRail
	}
	cfg := rail.SimConfig{Network: httpapi.RailNetwork(deployment), NodeKey: key}
	if bookDir != "" {
		book, err := rail.NewDirSimBook(bookDir)
		if err != nil {
			return nil, err
		}
		cfg.Book = book
	}
	return rail.NewSimRail(cfg)
}
