// Package clustertest runs a real perpd cluster inside a test process:
// every member is a node.Node with its raft transport, admin listener and
// public API on loopback TCP, in its own data directory. Tests of any
// package start one with Start and crash, restart, remove and add members
// the way an operator or a failing machine would.
//
// A test reads:
//
//	c := clustertest.Start(t, 3, clustertest.TickInterval(50*time.Millisecond))
//	f := c.Followers()[0]
//	res, err := f.Node.Propose(ctx, cmd) // forwarded to the leader
//	c.Kill(c.Leader().ID)                // a crash, as peers see it
//	leader, err := c.WaitLeader(10 * time.Second)
//	err = c.WaitConverged(10 * time.Second) // same index, same state hash
//
// Pass Assemble(cli.Assemble) to run every domain's wiring exactly as
// `perpd serve` does; the default is the replicated core alone.
//
// What it must never do: reach into a node's internals (tests see what an
// operator or a client sees, plus the node's exported API), or sleep for
// correctness (every wait polls a condition under a deadline).
package clustertest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/httpapi"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

// Bounds of the harness's own waits.
const (
	// FormTimeout bounds forming the cluster and each join.
	FormTimeout = 30 * time.Second
	// LeaderTimeout is how long Leader waits for an agreed leader.
	LeaderTimeout = 15 * time.Second
	// pollEvery is the interval of every polling wait.
	pollEvery = 10 * time.Millisecond
	// startAttempts bounds retries of a start that lost a port race.
	startAttempts = 40
)

// Cluster is a running test cluster. Its methods must be called from the
// test's goroutine (they fail the test on error); Member fields change on
// Kill, Restart and Add.
type Cluster struct {
	t     testing.TB
	cfg   config
	base  string
	logs  *logSink
	Token string // operator admin token, the same on every member
	// Secret is the cluster secret every member shares.
	Secret string
	// CA signs every certificate when the cluster runs TLS (else nil).
	CA       *node.CA
	adminTLS *node.PeerTLS

	mu      sync.Mutex
	members []*Member
	stopped bool
}

// Member is one node of the cluster. Node is nil while it is down.
type Member struct {
	ID        string
	DataDir   string
	RaftAddr  string
	HTTPAddr  string
	AdminAddr string
	Node      *node.Node
	Admin     *cluster.AdminServer

	bootstrap bool
	servers   []*http.Server
}

// Start forms an n-node cluster: node1 bootstraps, the others join through
// node1's admin listener. It returns once a leader is agreed, every member
// is a voter, and every node knows every member's addresses and the
// genesis. Stop is registered with t.Cleanup.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatal("clustertest: need at least one node")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	// TempDir first: its removal is then registered before Stop, and
	// cleanups run last-in first-out, so nodes stop before it is removed.
	base := t.TempDir()
	c := &Cluster{t: t, cfg: cfg, base: base, logs: newLogSink(cfg.logOutput), Token: randomHex(24), Secret: node.NewClusterSecret()}
	if cfg.tls {
		var err error
		if c.CA, err = node.NewCA("clustertest CA"); err == nil {
			c.adminTLS, err = c.CA.PeerTLS("operator", false)
		}
		if err != nil {
			t.Fatalf("clustertest: CA: %v", err)
		}
	}
	t.Cleanup(c.Stop)
	if c.cfg.assemble == nil {
		c.cfg.assemble = coreOnly
	}
	for i := 1; i <= n; i++ {
		m := &Member{ID: fmt.Sprintf("node%d", i), bootstrap: i == 1}
		m.DataDir = filepath.Join(base, m.ID)
		if len(cfg.prepareData) > 0 {
			if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
				t.Fatalf("clustertest: %v", err)
			}
			for _, fn := range cfg.prepareData {
				fn(m.ID, m.DataDir)
			}
		}
		c.mu.Lock()
		c.members = append(c.members, m)
		c.mu.Unlock()
		if err := c.start(m); err != nil {
			t.Fatalf("clustertest: start %s: %v", m.ID, err)
		}
		if i == 1 {
			if !poll(FormTimeout, func() bool { return m.Node.IsLeader() }) {
				t.Fatal("clustertest: node1 did not elect itself")
			}
			continue
		}
		if err := c.join(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitReady(FormTimeout); err != nil {
		t.Fatalf("clustertest: cluster did not form: %v", err)
	}
	return c
}

// coreOnly is the default Assembler: the replicated core without domain
// drivers. The rail's node key comes from the cluster secret, as in `serve`.
func coreOnly(n *node.Node, log hclog.Logger) (*cluster.AdminServer, *httpapi.Server, error) {
	r, err := rail.NewSimRail(rail.SimConfig{Network: httpapi.RailNetwork(n.Config().Deployment), NodeKey: n.RailNodeKey()})
	if err != nil {
		return nil, nil, err
	}
	return cluster.NewAdminServer(n), httpapi.New(n, log.Named("http"), httpapi.WithRail(r)), nil
}

// start launches m's node and listeners. A member without addresses gets
// fresh loopback ports; a restarted one binds its old ones again.
func (c *Cluster) start(m *Member) error {
	fresh := m.RaftAddr == ""
	var err error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err = c.tryStart(m, fresh); err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
		// Another socket took the port between picking and binding it
		// (fresh), or the old one is not released yet (restart).
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

func (c *Cluster) tryStart(m *Member, fresh bool) error {
	var adminLn, httpLn net.Listener
	var err error
	closeAll := func() {
		for _, l := range []net.Listener{adminLn, httpLn} {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	raftAddr := m.RaftAddr
	if fresh {
		// The admin and HTTP listeners are kept open from the pick on; the
		// raft transport binds its own, so its port is picked and released,
		// and a lost race shows as EADDRINUSE and is retried.
		if adminLn, err = listenLoopback(); err == nil {
			if httpLn, err = listenLoopback(); err == nil {
				raftAddr, err = freeAddr()
			}
		}
	} else {
		if adminLn, err = net.Listen("tcp", m.AdminAddr); err == nil {
			httpLn, err = net.Listen("tcp", m.HTTPAddr)
		}
	}
	if err != nil {
		closeAll()
		return err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "perpd", Level: c.cfg.logLevel, Output: c.logs, JSONFormat: c.cfg.logJSON}).With("node", m.ID)
	var peer *node.PeerTLS
	if c.CA != nil {
		if peer, err = c.CA.PeerTLS(m.ID, true); err != nil {
			closeAll()
			return err
		}
	}
	n, err := node.New(node.Config{
		ID:                 m.ID,
		DataDir:            m.DataDir,
		RaftAddr:           raftAddr,
		HTTPAddr:           httpLn.Addr().String(),
		AdminAddr:          adminLn.Addr().String(),
		Bootstrap:          m.bootstrap,
		AwaitJoin:          !m.bootstrap, // every other member joins (Cluster.join)
		Deployment:         c.cfg.deployment,
		GenesisAtLevelZero: c.cfg.levelZero,
		AdminToken:         c.Token,
		MetricsToken:       c.cfg.metricsToken,
		ClusterSecret:      c.Secret,
		TLS:                peer,
		SnapshotThreshold:  c.cfg.snapshotThreshold,
		GroupMax:           c.cfg.groupMax,
		TrailingLogs:       c.cfg.trailingLogs,
		SnapshotInterval:   c.cfg.snapshotInterval,
		TickInterval:       c.cfg.tickInterval,
		ProposeTimeout:     c.cfg.proposeTimeout,
		CheckInvariants:    c.cfg.checkInvariants,
		Logger:             log,
		Clock:              c.cfg.clock,

		ReplicaCheckInterval: c.cfg.replicaCheck,
	})
	if err != nil {
		closeAll()
		return err
	}
	admin, api, err := c.cfg.assemble(n, log)
	if err != nil {
		_ = n.Shutdown()
		closeAll()
		return err
	}
	for _, f := range c.cfg.onNode {
		f(n)
	}
	n.Start()
	adminAddr := adminLn.Addr().String()
	servers := []*http.Server{
		cluster.NewHTTPServer(admin, cluster.DefaultTimeouts, nil),
		cluster.NewHTTPServer(api, cluster.DefaultTimeouts, nil),
	}
	if peer != nil {
		servers[0].TLSConfig = peer.ServerConfig()
		adminLn = tls.NewListener(adminLn, servers[0].TLSConfig)
	}
	for i, ln := range []net.Listener{adminLn, httpLn} {
		go func(s *http.Server, ln net.Listener) { _ = s.Serve(ln) }(servers[i], ln)
	}
	c.mu.Lock()
	m.RaftAddr, m.AdminAddr, m.HTTPAddr = raftAddr, adminAddr, httpLn.Addr().String()
	m.Node, m.Admin, m.servers = n, admin, servers
	c.mu.Unlock()
	return nil
}

// FreeAddr returns a loopback address with a port free right now, for a
// test that starts a listener of its own.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// PortRangeEnv names an optional "lo-hi" range of loopback ports that
// freeAddr takes ports from instead of the kernel's ephemeral ones, for a
// machine where each user of the tests is given a range of its own.
const PortRangeEnv = "PERPD_TEST_PORT_RANGE"

var nextRangePort atomic.Int64

func freeAddr() (string, error) {
	if r := os.Getenv(PortRangeEnv); r != "" {
		return freeAddrIn(r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// listenLoopback listens on a loopback port: one of PortRangeEnv's when
// it is set, else one the kernel picks.
func listenLoopback() (net.Listener, error) {
	r := os.Getenv(PortRangeEnv)
	if r == "" {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	for i := 0; i < 32; i++ {
		addr, err := freeAddrIn(r)
		if err != nil {
			return nil, err
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("no free port in %s=%s", PortRangeEnv, r)
}

// freeAddrIn returns a free loopback port of the range "lo-hi", going
// round it from where the last call stopped, so that ports a stopped
// member held are not handed out again at once.
func freeAddrIn(r string) (string, error) {
	los, his, ok := strings.Cut(r, "-")
	lo, err1 := strconv.Atoi(los)
	hi, err2 := strconv.Atoi(his)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return "", fmt.Errorf("%s=%q: want lo-hi", PortRangeEnv, r)
	}
	span := int64(hi - lo + 1)
	for i := int64(0); i < span; i++ {
		port := lo + int((nextRangePort.Add(1)-1)%span)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		return addr, ln.Close()
	}
	return "", fmt.Errorf("no free port in %s=%s", PortRangeEnv, r)
}

// join asks a live member (the leader when there is one) to add m, the
// way a starting node does: with the cluster's peer credential.
func (c *Cluster) join(m *Member) error {
	via := c.contact(m.ID)
	if via == nil {
		return fmt.Errorf("clustertest: no live member to join %s through", m.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), FormTimeout)
	defer cancel()
	if err := cluster.JoinNode(ctx, m.Node, via.AdminAddr); err != nil {
		return fmt.Errorf("clustertest: join %s: %w", m.ID, err)
	}
	return nil
}

// contact is a live member other than except, the leader if it is live.
func (c *Cluster) contact(except string) *Member {
	var any *Member
	for _, m := range c.Live() {
		if m.ID == except {
			continue
		}
		if m.Node.IsLeader() {
			return m
		}
		if any == nil {
			any = m
		}
	}
	return any
}

// waitReady waits for an agreed leader whose configuration holds every live
// member as a voter, and for every live node to know the genesis and every
// live member's addresses.
func (c *Cluster) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	leader, err := c.WaitLeader(timeout)
	if err != nil {
		return err
	}
	var why string
	ok := poll(time.Until(deadline), func() bool {
		why = c.readiness(leader)
		return why == ""
	})
	if !ok {
		return errors.New(why)
	}
	return nil
}

func (c *Cluster) readiness(leader *Member) string {
	live := c.Live()
	members, err := leader.Node.Members()
	if err != nil {
		return err.Error()
	}
	voters := map[string]bool{}
	for _, m := range members {
		voters[m.ID] = m.Suffrage == "Voter"
	}
	for _, m := range live {
		if !voters[m.ID] {
			return m.ID + " is not a voter yet"
		}
		var why string
		m.Node.Machine().Read(func(st *fsm.State, _ uint64) {
			if st.Genesis == nil {
				why = m.ID + " has no genesis yet"
				return
			}
			for _, o := range live {
				if nm := st.Nodes[o.ID]; nm == nil || nm.Admin != o.AdminAddr || nm.HTTP != o.HTTPAddr {
					why = m.ID + " does not know " + o.ID + "'s addresses yet"
					return
				}
			}
		})
		if why != "" {
			return why
		}
	}
	return ""
}

// Member returns the member named id; it fails the test if there is none.
func (c *Cluster) Member(id string) *Member {
	c.t.Helper()
	if m := c.find(id); m != nil {
		return m
	}
	c.t.Fatalf("clustertest: no member %q", id)
	return nil
}

func (c *Cluster) find(id string) *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// Members returns every member, running or not, in the order they were made.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// Live returns the running members.
func (c *Cluster) Live() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Member
	for _, m := range c.members {
		if m.Node != nil {
			out = append(out, m)
		}
	}
	return out
}

// WaitLeader waits until exactly one running member leads, every running
// member names it as leader, and every running member knows its admin
// address (so followers can forward writes to it).
func (c *Cluster) WaitLeader(timeout time.Duration) (*Member, error) {
	var leader *Member
	var why string
	ok := poll(timeout, func() bool {
		leader, why = c.agreedLeader()
		return leader != nil
	})
	if !ok {
		return nil, fmt.Errorf("no agreed leader within %v: %s", timeout, why)
	}
	return leader, nil
}

func (c *Cluster) agreedLeader() (*Member, string) {
	live := c.Live()
	if len(live) == 0 {
		return nil, "no member is running"
	}
	var leaders []*Member
	for _, m := range live {
		if m.Node.IsLeader() {
			leaders = append(leaders, m)
		}
	}
	if len(leaders) != 1 {
		return nil, fmt.Sprintf("%d members lead", len(leaders))
	}
	l := leaders[0]
	for _, m := range live {
		id, _, _, admin := m.Node.LeaderInfo()
		if id != l.ID {
			return nil, fmt.Sprintf("%s follows %q, not %s", m.ID, id, l.ID)
		}
		if admin != l.AdminAddr {
			return nil, fmt.Sprintf("%s does not know %s's admin address yet", m.ID, l.ID)
		}
	}
	return l, ""
}

// Leader waits (up to LeaderTimeout) for an agreed leader and returns it.
func (c *Cluster) Leader() *Member {
	c.t.Helper()
	l, err := c.WaitLeader(LeaderTimeout)
	if err != nil {
		c.t.Fatalf("clustertest: %v", err)
	}
	return l
}

// Followers returns the running members other than the agreed leader.
func (c *Cluster) Followers() []*Member {
	c.t.Helper()
	l := c.Leader()
	var out []*Member
	for _, m := range c.Live() {
		if m != l {
			out = append(out, m)
		}
	}
	return out
}

// Kill stops member id the way a crash looks to its peers: its listeners
// and open connections close and raft stops, with no goodbye. Its data
// directory is kept for Restart.
func (c *Cluster) Kill(id string) {
	c.t.Helper()
	m := c.Member(id)
	c.mu.Lock()
	n, servers := m.Node, m.servers
	m.Node, m.Admin, m.servers = nil, nil, nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	c.halt(m.ID, n, servers)
}

func (c *Cluster) halt(id string, n *node.Node, servers []*http.Server) {
	for _, s := range servers {
		_ = s.Close()
	}
	if err := n.Shutdown(); err != nil {
		c.logs.printf("clustertest: shutdown %s: %v\n", id, err)
	}
}

// Restart starts a killed member again on its data directory and ports.
func (c *Cluster) Restart(id string) {
	c.t.Helper()
	m := c.Member(id)
	if m.Node != nil {
		c.t.Fatalf("clustertest: %s is running", id)
	}
	if err := c.start(m); err != nil {
		c.t.Fatalf("clustertest: restart %s: %v", id, err)
	}
}

// Remove takes member id out of the raft configuration through another
// member's admin listener (relayed to the leader), then stops it.
func (c *Cluster) Remove(id string) {
	c.t.Helper()
	m := c.Member(id)
	via := c.contact(id)
	if via == nil {
		c.t.Fatalf("clustertest: no member to remove %s through", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), FormTimeout)
	defer cancel()
	if _, err := c.Admin(via.ID).Remove(ctx, id); err != nil {
		c.t.Fatalf("clustertest: remove %s: %v", id, err)
	}
	c.Kill(m.ID)
}

// Add starts member id on an empty data directory and joins it to the
// cluster. An existing (stopped) member is wiped and keeps its ports; a new
// id gets new ones. The new node never bootstraps.
func (c *Cluster) Add(id string) *Member {
	c.t.Helper()
	m := c.find(id)
	if m == nil {
		m = &Member{ID: id, DataDir: filepath.Join(c.base, id)}
		c.mu.Lock()
		c.members = append(c.members, m)
		c.mu.Unlock()
	} else if m.Node != nil {
		c.t.Fatalf("clustertest: %s is running; Remove it first", id)
	}
	if err := os.RemoveAll(m.DataDir); err != nil {
		c.t.Fatal(err)
	}
	m.bootstrap = false
	if err := c.start(m); err != nil {
		c.t.Fatalf("clustertest: add %s: %v", id, err)
	}
	if err := c.join(m); err != nil {
		c.t.Fatal(err)
	}
	return m
}

// WaitConverged waits until every running member has applied the highest
// index any of them reported and has the same state hash there. Replicas
// at the same index with different hashes have diverged: that is reported
// at once. Members are asked one after the other while ticks keep coming,
// so a member behind the highest index is asked again for its hash at
// that index (StateHashAt) once it has applied it: waiting for a moment
// when all report the same index never came under the race detector,
// where each hash takes long enough for the next tick to land.
func (c *Cluster) WaitConverged(timeout time.Duration) error {
	var last string
	var diverged error
	ok := poll(timeout, func() bool {
		live := c.Live()
		if len(live) == 0 {
			last = "no member is running"
			return false
		}
		idx := make([]uint64, len(live))
		hash := make([]string, len(live))
		for i, m := range live {
			var err error
			if idx[i], hash[i], err = m.Node.StateHash(context.Background()); err != nil {
				last = err.Error()
				return false
			}
		}
		var parts []string
		for i, m := range live {
			parts = append(parts, fmt.Sprintf("%s@%d:%.12s", m.ID, idx[i], hash[i]))
		}
		last = strings.Join(parts, " ")
		target := slices.Max(idx)
		for i, m := range live {
			if idx[i] == target {
				continue
			}
			if m.Node.Machine().Applied() < target {
				return false
			}
			h, err := m.Node.StateHashAt(context.Background(), target)
			if err != nil {
				last += "; " + m.ID + ": " + err.Error()
				return false
			}
			idx[i], hash[i] = target, h
		}
		for i := range live {
			if hash[i] != hash[0] {
				var at []string
				for j, m := range live {
					at = append(at, fmt.Sprintf("%s:%.12s", m.ID, hash[j]))
				}
				diverged = fmt.Errorf("replicas diverged at index %d: %s (as first reported: %s)", target, strings.Join(at, " "), last)
				return true
			}
		}
		return true
	})
	if diverged != nil {
		return diverged
	}
	if !ok {
		return fmt.Errorf("not converged within %v: %s", timeout, last)
	}
	return nil
}

// HTTP returns the base URL of member id's public API.
func (c *Cluster) HTTP(id string) string {
	c.t.Helper()
	return "http://" + c.Member(id).HTTPAddr
}

// Admin returns an operator's client of member id's admin listener (with
// an operator certificate when the cluster runs TLS).
func (c *Cluster) Admin(id string) *cluster.AdminClient {
	c.t.Helper()
	cl := cluster.NewAdminClient(c.Member(id).AdminAddr, c.Token)
	if c.adminTLS != nil {
		cl.UseTLS(c.adminTLS.ClientConfig())
	}
	return cl
}

// OperatorTLS is the operator certificate of a TLS cluster (nil without
// TLS), for clients the test builds itself.
func (c *Cluster) OperatorTLS() *node.PeerTLS { return c.adminTLS }

// Stop stops every running member. It is registered with t.Cleanup by
// Start; when the test failed it prints the nodes' logs.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	type running struct {
		id      string
		n       *node.Node
		servers []*http.Server
	}
	var rs []running
	for _, m := range c.members {
		if m.Node != nil {
			rs = append(rs, running{m.ID, m.Node, m.servers})
			m.Node, m.Admin, m.servers = nil, nil, nil
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.halt(r.id, r.n, r.servers)
		}()
	}
	wg.Wait()
	if c.t.Failed() && c.cfg.logOutput == nil {
		c.t.Logf("clustertest: node logs (last %d KiB):\n%s", maxLogDump>>10, c.logs.tail(maxLogDump))
	}
}

// poll calls cond every pollEvery until it holds or timeout passes.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// Poll is the harness's wait for tests: it calls cond until it holds or
// timeout passes, and reports whether it held.
func Poll(timeout time.Duration, cond func() bool) bool { return poll(timeout, cond) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
