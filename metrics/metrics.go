// Package metrics exposes one node's operational measurements in the
// Prometheus text format, for GET /metrics on the admin listener.
//
// Two sources feed it. Raft's own instrumentation goes through
// hashicorp/go-metrics (its compat layer, so whichever backend raft was
// built with) into a Prometheus sink; that state is process-global, like
// raft's calls, so a process running several nodes (tests) mixes their
// raft_* series. Everything else is per node, on the node's own registry:
// raft state read from raft.Stats, leader changes seen by an observer,
// apply latency and batch sizes, group commit, HTTP requests by route and
// status, WebSocket connections and dropped frames, oracle staleness per
// feed, the latest ledger conservation check, the leader's scheduled
// replica comparison and the rate-limit bucket table. Series are named perpd_* (raft's are perpd_raft_* as go-metrics
// names them, camelCase after the prefix).
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/node"
)

// Namespace prefixes every series.
const Namespace = "perpd"

var (
	globalOnce sync.Once
	globalReg  *prometheus.Registry
	globalErr  error
)

// raftBlocked are raft's per-call internals that go-metrics would feed a
// Prometheus summary on every replication call and log append: the
// transport's decode, enqueue and respond timings, bolt's per-batch sizes
// and transaction statistics, and the two parts of a follower's append
// (its total stays). Each sample costs a few microseconds (key
// flattening, a map lookup, the summary's quantile streams), and under
// load they made up 5% of a follower's CPU (docs/decisions.md, "raft's
// metrics"). raftAllowedInBlocked keeps the log append's own timing, the
// one an operator reads for disk trouble (a longer prefix wins).
//
// raft.peers is blocked too: a leader's raft sets it at every
// configuration change, and perpd_raft_peers is ours (voters, read per
// node). Two families of one name on a scrape are a gathering error, and
// one of them (ours) was dropped from the leader's.
var (
	raftBlocked = []string{
		Namespace + ".raft.net",
		Namespace + ".raft.boltdb",
		Namespace + ".raft.rpc.appendEntries.storeLogs",
		Namespace + ".raft.rpc.appendEntries.processLogs",
		Namespace + ".raft.peers",
	}
	raftAllowedInBlocked = []string{Namespace + ".raft.boltdb.storeLogs"}
)

// global is the process-wide registry: raft's go-metrics sink and the Go
// runtime and process collectors. It is built once.
func global() (*prometheus.Registry, error) {
	globalOnce.Do(func() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opts := gmprom.DefaultPrometheusOpts
		opts.Registerer = reg
		// A series raft stops updating (a removed peer's replication
		// timings) disappears after this long.
		opts.Expiration = 5 * time.Minute
		sink, err := gmprom.NewPrometheusSinkFrom(opts)
		if err != nil {
			globalErr = err
			return
		}
		conf := gometrics.DefaultConfig(Namespace)
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // the Go collector covers them
		conf.BlockedPrefixes, conf.AllowedPrefixes = raftBlocked, raftAllowedInBlocked
		if _, err := gometrics.NewGlobal(conf, sink); err != nil {
			globalErr = err
			return
		}
		globalReg = reg
	})
	return globalReg, globalErr
}

// Registry holds one node's series.
type Registry struct {
	n   *node.Node
	reg *prometheus.Registry

	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	applySeconds  prometheus.Histogram
	applyEntries  prometheus.Histogram
	groupCommands prometheus.Histogram
	leaderChanges prometheus.Counter
}

// New builds n's registry, installs it as n's observer and starts watching
// raft's leader changes until n stops. Call it before n.Start.
func New(n *node.Node) (*Registry, error) {
	if _, err := global(); err != nil {
		return nil, err
	}
	r := &Registry{n: n, reg: prometheus.NewRegistry()}
	r.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "http_requests_total",
		Help: "Public API requests answered, by route template, method and status.",
	}, []string{"route", "method", "status"})
	r.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "http_request_duration_seconds",
		Help:    "Public API request latency, by route template and method.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"route", "method"})
	r.applySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "fsm_apply_batch_seconds",
		Help:    "Time the state machine took to apply one batch of log entries.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	})
	r.applyEntries = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "fsm_apply_batch_entries",
		Help:    "Log entries per batch raft handed the state machine.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
	})
	r.groupCommands = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "group_commit_commands",
		Help:    "Client commands per raft entry built by the leader's group commit.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})
	r.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "raft_leader_changes_total",
		Help: "Times this node saw a new leader of the cluster (the elections it learnt of).",
	})
	r.reg.MustRegister(r.httpRequests, r.httpDuration, r.applySeconds, r.applyEntries, r.groupCommands,
		r.leaderChanges, &nodeCollector{n: n})
	n.SetObserver(r)
	r.watchLeader()
	r.Counter("por_beside_apply_builds_total", "Proof of Reserves trees this node built on its snapshot shadow, beside apply.",
		func() float64 { return float64(n.PoRBuildStats().Built) })
	r.Counter("por_beside_apply_waits_total", "Times this node's apply (or an encoding of its state) waited for a Proof of Reserves tree its shadow had not built yet.",
		func() float64 { return float64(n.PoRBuildStats().Waits) })
	r.Counter("por_beside_apply_wait_seconds_total", "Time this node's apply (or an encoding of its state) spent waiting for Proof of Reserves trees from its shadow.",
		func() float64 { return n.PoRBuildStats().Waited.Seconds() })
	return r, nil
}

// Applied implements node.Observer.
func (r *Registry) Applied(entries int, d time.Duration) {
	r.applySeconds.Observe(d.Seconds())
	r.applyEntries.Observe(float64(entries))
}

// Grouped implements node.Observer.
func (r *Registry) Grouped(commands int) { r.groupCommands.Observe(float64(commands)) }

// ObserveHTTP counts one answered request. route is the route template
// (bounded), never the raw path.
func (r *Registry) ObserveHTTP(method, route string, status int, d time.Duration) {
	method = boundedMethod(method)
	r.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	if route != webSocketRoute { // its "duration" is the connection's life
		r.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
	}
}

// webSocketRoute is the upgrade route; its connections are counted by
// perpd_ws_connections, not timed as requests.
const webSocketRoute = "/v1/ws"

func boundedMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, http.MethodOptions:
		return m
	}
	return "other"
}

// Gauge registers a gauge read at scrape time (the WebSocket hub, the rate
// limiter: parts the node does not own).
func (r *Registry) Gauge(name, help string, f func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, f))
}

// Counter registers a counter read at scrape time from a monotonic source.
func (r *Registry) Counter(name, help string, f func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, f))
}

// ReplicaCheck is the outcome of one scheduled comparison of the
// replicas' state hashes (cluster.ReplicaWatch), as exported.
type ReplicaCheck struct {
	At    time.Time
	Index uint64 // the log index compared; 0 when no member answered
	// Agree is 1 when every member answered with one hash, 0 when two
	// answered different hashes, -1 when a member could not be asked.
	Agree int
}

// WatchReplicas exports the leader's scheduled replica comparison. last
// returns the latest comparison this node ran as the current leader: on a
// follower, and on a leader before its first run, it returns false and the
// three gauges are absent, so only the leader's count in an alert.
// disagreements is a count of runs that found two hashes differing.
func (r *Registry) WatchReplicas(last func() (ReplicaCheck, bool), disagreements func() uint64) {
	r.reg.MustRegister(&replicaCollector{last: last})
	r.Counter("replicas_check_disagreements_total",
		"Scheduled replica comparisons this node ran as leader that found two members' state hashes differing at one index.",
		func() float64 { return float64(disagreements()) })
}

var (
	descReplicasAgree = desc("replicas_check_agree",
		"The leader's latest replica comparison: 1 every member has one state hash at one index, 0 two differ, -1 a member could not be asked.")
	descReplicasTime  = desc("replicas_check_timestamp_seconds", "Unix time the leader's latest replica comparison ended.")
	descReplicasIndex = desc("replicas_check_index", "Log index the leader's latest replica comparison compared the members at (0: none answered).")
)

// replicaCollector reads the latest comparison at scrape time.
type replicaCollector struct {
	last func() (ReplicaCheck, bool)
}

func (c *replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descReplicasAgree
	ch <- descReplicasTime
	ch <- descReplicasIndex
}

func (c *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	chk, ok := c.last()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(descReplicasAgree, prometheus.GaugeValue, float64(chk.Agree))
	ch <- prometheus.MustNewConstMetric(descReplicasTime, prometheus.GaugeValue, float64(chk.At.UnixMilli())/1000)
	ch <- prometheus.MustNewConstMetric(descReplicasIndex, prometheus.GaugeValue, float64(chk.Index))
}

// Handler serves the node's series and the process-wide ones, in the
// Prometheus text format (or OpenMetrics when the scraper asks for it).
func (r *Registry) Handler() http.Handler {
	g, _ := global()
	return promhttp.HandlerFor(prometheus.Gatherers{g, r.reg}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// watchLeader counts the new leaders raft reports. Raft also reports the
// loss of a leader (to none) before each election: counting those made one
// handover two changes, and PerpdLeaderFlapping (more than 3 in 10
// minutes) fired on two elections.
func (r *Registry) watchLeader() {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		l, ok := o.Data.(raft.LeaderObservation)
		return ok && l.LeaderID != ""
	})
	r.n.Raft.RegisterObserver(obs)
	go func() {
		defer r.n.Raft.DeregisterObserver(obs)
		for {
			select {
			case <-r.n.Done():
				return
			case <-ch:
				r.leaderChanges.Inc()
			}
		}
	}()
}

// nodeCollector reads the node's state at scrape time.
type nodeCollector struct{ n *node.Node }

var (
	descRaftState   = desc("raft_state", "This node's raft role: 1 on the series of its current state.", "state")
	descIsLeader    = desc("raft_is_leader", "1 when this node leads the cluster.")
	descTerm        = desc("raft_term", "Current raft term.")
	descCommitIdx   = desc("raft_commit_index", "Highest log index known committed.")
	descAppliedIdx  = desc("raft_applied_index", "Highest log index the state machine applied.")
	descLastLogIdx  = desc("raft_last_log_index", "Last index in this node's log.")
	descFSMPending  = desc("raft_fsm_pending", "Committed batches waiting for the state machine.")
	descLastContact = desc("raft_last_contact_seconds", "Seconds since this follower last heard from the leader (0 on the leader).")
	descPeers       = desc("raft_peers", "Voters in the latest configuration, this node included.")
	descHalted      = desc("halted", "1 when this replica has halted (fail-stop) and serves nothing.")
	descStoreFault  = desc("raft_store_failing", "1 when the raft log store does not answer or its last write failed (a full disk) and none has succeeded since.")
	descStaleness   = desc("oracle_staleness_seconds", "Log time since the feed's last print (how old the price the venue uses is).", "feed")
	descCheckTime   = desc("conservation_check_timestamp_seconds", "Unix time of this node's latest ledger conservation check (run at every snapshot).")
	descCheckIndex  = desc("conservation_check_index", "Applied index of the state the latest conservation check covered.")
	descCheckOK     = desc("conservation_check_ok", "1 when the latest conservation check passed, 0 when it failed (the replica halts).")
	descLogTime     = desc("log_time_seconds", "The node's estimate of the log's clock now, as Unix seconds.")
	// Payouts waiting on a rail, from the replicated state (every member
	// shows the same figures for its applied index).
	descPayoutsOpen    = desc("withdrawals_open", "Sats withdrawals not yet paid or returned, by state (requested: not yet answered by the rail; queued: the rail holds them).", "state")
	descPayoutsOpenAmt = desc("withdrawals_open_msat", "What the open sats withdrawals pay out, by state, in msat.", "state")
	descPayoutsOldest  = desc("withdrawals_oldest_open_age_seconds", "Log time since the oldest open sats withdrawal was requested (0 when none is open).")
	descTokenOpen      = desc("usdx_withdrawals_in_flight", "USDx withdrawals requested and not yet transferred by the token rail.")
	descTokenOldest    = desc("usdx_withdrawals_oldest_in_flight_age_seconds", "Log time since the oldest USDx withdrawal in flight was requested (0 when none is).")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descIsLeader, descTerm, descCommitIdx, descAppliedIdx,
		descLastLogIdx, descFSMPending, descLastContact, descPeers, descHalted, descStoreFault, descStaleness, descCheckTime,
		descCheckIndex, descCheckOK, descLogTime, descPayoutsOpen, descPayoutsOpenAmt, descPayoutsOldest,
		descTokenOpen, descTokenOldest} {
		ch <- d
	}
}

var raftStates = []string{"Follower", "Candidate", "Leader", "Shutdown"}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	stats := n.Raft.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	state := n.Raft.State().String()
	for _, s := range raftStates {
		gauge(descRaftState, b2f(s == state), s)
	}
	gauge(descIsLeader, b2f(state == "Leader"))
	gauge(descTerm, statNum(stats, "term"))
	gauge(descCommitIdx, statNum(stats, "commit_index"))
	gauge(descAppliedIdx, float64(n.Machine().Applied()))
	gauge(descLastLogIdx, statNum(stats, "last_log_index"))
	gauge(descFSMPending, statNum(stats, "fsm_pending"))
	gauge(descPeers, statNum(stats, "num_peers")+1)
	if state != "Leader" {
		gauge(descLastContact, lastContact(n.Raft.LastContact()))
	} else {
		gauge(descLastContact, 0)
	}
	halted := n.Halted() != nil
	gauge(descHalted, b2f(halted))
	gauge(descStoreFault, b2f(!n.StoreHealthy()))
	nowMs := n.LogNowMs()
	gauge(descLogTime, float64(nowMs)/1000)
	if !halted {
		c.collectState(nowMs, gauge)
	}
	if chk, ok := n.LastConservationCheck(); ok {
		gauge(descCheckTime, float64(chk.At.UnixMilli())/1000)
		gauge(descCheckIndex, float64(chk.Index))
		gauge(descCheckOK, b2f(chk.OK))
	}
}

// collectState reports the figures read from the replicated state at the
// log's time. A halted replica has none: its state is frozen (perhaps half
// an entry in) while its log time runs on, so every feed's staleness and
// open withdrawal's age would climb and page for a venue that is fine
// (the alerts take the max over the members); it serves nothing, and
// perpd_halted says why.
func (c *nodeCollector) collectState(nowMs int64, gauge func(*prometheus.Desc, float64, ...string)) {
	c.n.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.Market != nil {
			for _, id := range st.Market.FeedIDs() {
				last, ok := st.Market.FeedLast(id)
				if !ok {
					continue
				}
				gauge(descStaleness, float64(nowMs-last.TsMs)/1000, id)
			}
		}
		collectPayouts(st, nowMs, gauge)
	})
}

// collectPayouts reports the withdrawals waiting on the rails: what an
// operator alerts on when a rail stops paying (deploy/alerts.yml).
func collectPayouts(st *fsm.State, nowMs int64, gauge func(*prometheus.Desc, float64, ...string)) {
	ageSec := func(tsMs int64) float64 { return float64(max(0, nowMs-tsMs)) / 1000 }
	if st.Funds != nil {
		count := map[string]float64{funds.StateRequested: 0, funds.StateQueued: 0}
		amount := map[string]float64{funds.StateRequested: 0, funds.StateQueued: 0}
		oldest, seen := 0.0, false
		for _, seq := range st.Funds.Open { // ascending seq: the first is the oldest
			w := st.Funds.Withdrawals[seq]
			if w == nil {
				continue
			}
			if !seen {
				oldest, seen = ageSec(w.RequestedTsMs), true
			}
			count[w.State]++
			amount[w.State] += float64(w.AmountMsat)
		}
		for _, state := range []string{funds.StateRequested, funds.StateQueued} {
			gauge(descPayoutsOpen, count[state], state)
			gauge(descPayoutsOpenAmt, amount[state], state)
		}
		gauge(descPayoutsOldest, oldest)
	}
	if st.USDx != nil { // below fsm.LevelDomains there is no USDx
		oldest := 0.0
		if len(st.USDx.InFlight) > 0 { // request order: the first is the oldest
			if w := st.USDx.Withdrawals[st.USDx.InFlight[0]]; w != nil {
				oldest = ageSec(w.RequestedTsMs)
			}
		}
		gauge(descTokenOpen, float64(len(st.USDx.InFlight)))
		gauge(descTokenOldest, oldest)
	}
}

func lastContact(t time.Time) float64 {
	if t.IsZero() {
		return -1 // never heard from a leader
	}
	return time.Since(t).Seconds()
}

func statNum(stats map[string]string, k string) float64 {
	v, err := strconv.ParseUint(stats[k], 10, 64)
	if err != nil {
		return 0
	}
	return float64(v)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
