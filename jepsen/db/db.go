package db

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/node"
)

// Ports every node uses on its own address.
const (
	HTTPPort  = 8080
	RaftPort  = 7080
	AdminPort = 9080
)

// BaseUID is the uid of node 1 of the default range when nodes run under
// their own uids; node i at 127.0.0.x runs as uid 47000+x (BaseUID+i-1 in
// the default range), so clusters on other ranges never share a uid the
// firewall matches on. These uids need no passwd entry.
const BaseUID = 47011

// DefaultIPBase puts node i at 127.0.0.(10+i). Another base (a multiple of
// 10 up to 90) gives a cluster its own addresses, so several run at once
// on one machine: the ports are the same on every address.
const DefaultIPBase = 10

// stopGrace is how long a SIGTERM'd node may take before SIGKILL.
const stopGrace = 10 * time.Second

// Config describes the cluster to run.
type Config struct {
	Bin     string // perpd executable
	Nodes   int    // 3 or 5
	DataDir string // parent of the nodes' data directories
	LogDir  string // where nodeX.log files go
	Token   string // operator admin token (written to each data directory, never on argv)
	// OwnUIDs runs each node as its own uid (Node.UID; root only), so the firewall
	// can rewrite its source address.
	OwnUIDs bool
	// ExtraArgs are appended to every `perpd serve`.
	ExtraArgs []string
	// ArchiveDir, when set, is where each node records what it applies
	// (`perpd serve --apply-archive`, one file per node id); it outlives a
	// wipe of the node's data.
	ArchiveDir string
	// IPBase puts node i at 127.0.0.(IPBase+i) (default DefaultIPBase).
	IPBase int
	// OnExit, when set, is called (on its own goroutine) when a node's
	// process ends without the harness having stopped or killed it: a
	// crash, a node that gave up, or a signal from outside the run.
	// status is how it ended ("exit status 2", "signal: terminated").
	OnExit func(n *Node, status string)
}

// ArchivePath is where node n records what it applies, or "" when the
// cluster does not keep archives.
func (c *Cluster) ArchivePath(n *Node) string {
	if c.cfg.ArchiveDir == "" {
		return ""
	}
	return filepath.Join(c.cfg.ArchiveDir, n.ID+".jsonl")
}

// Node is one perpd process slot. Its process may be running, paused,
// killed or removed from the cluster.
type Node struct {
	ID    string
	IP    string
	HTTP  string
	Raft  string
	Admin string
	Data  string
	Log   string
	UID   int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	started bool // started at least once (never bootstrap again)
	// flags replace the values of Config.ExtraArgs flags (or add them) for
	// this node's next starts (SetFlag).
	flags map[string]string
}

// SetFlag makes n's next starts pass `flag value` instead of the
// cluster's value of flag (ExtraArgs), or in addition when the cluster
// passes none; an empty value goes back to the cluster's. The clock
// nemesis restarts a node with another --clock-offset this way.
func (n *Node) SetFlag(flag, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if value == "" {
		delete(n.flags, flag)
		return
	}
	if n.flags == nil {
		n.flags = map[string]string{}
	}
	n.flags[flag] = value
}

// Flag is the value of flag n's next start passes ("" when none).
func (c *Cluster) Flag(n *Node, flag string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	args := withFlags(c.cfg.ExtraArgs, n.flags)
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// withFlags is args (flag value pairs and lone flags) with the values of
// the flags in over replaced, and those args lacks appended in name order.
func withFlags(args []string, over map[string]string) []string {
	out := append([]string(nil), args...)
	done := map[string]bool{}
	for i := 0; i+1 < len(out); i++ {
		if v, ok := over[out[i]]; ok {
			out[i+1] = v
			done[out[i]] = true
		}
	}
	var rest []string
	for f := range over {
		if !done[f] {
			rest = append(rest, f)
		}
	}
	sort.Strings(rest)
	for _, f := range rest {
		out = append(out, f, over[f])
	}
	return out
}

// Cluster is the set of nodes. Raft and the admin listeners run over
// mutual TLS with a throwaway CA made by New.
type Cluster struct {
	cfg      Config
	Nodes    []*Node
	admin    *client.Client
	ca       *node.CA
	secret   string         // the cluster secret, in every data directory
	operator node.CertFiles // the harness's operator certificate
}

// New lays out the nodes without starting them.
func New(cfg Config) (*Cluster, error) {
	if cfg.Nodes < 1 || cfg.Nodes > 9 {
		return nil, fmt.Errorf("nodes must be 1..9, not %d", cfg.Nodes)
	}
	if cfg.IPBase == 0 {
		cfg.IPBase = DefaultIPBase
	}
	if err := CheckIPBase(cfg.IPBase); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, admin: client.New(3 * time.Second), secret: node.NewClusterSecret()}
	// The parent must be traversable by the nodes' own uids.
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.ArchiveDir != "" {
		// Written by the nodes' own uids.
		if err := os.MkdirAll(cfg.ArchiveDir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chmod(cfg.ArchiveDir, 0o777); err != nil {
			return nil, err
		}
	}
	var err error
	if c.ca, err = node.NewCA("perpd jepsen CA"); err != nil {
		return nil, err
	}
	if c.operator, err = c.ca.WriteFiles(filepath.Join(cfg.DataDir, "operator"), "operator", false); err != nil {
		return nil, err
	}
	pt, err := node.LoadPeerTLS(c.operator.Cert, c.operator.Key, c.operator.CA)
	if err != nil {
		return nil, err
	}
	c.admin.UseTLS(pt.ClientConfig())
	for i := 1; i <= cfg.Nodes; i++ {
		ip := fmt.Sprintf("127.0.0.%d", cfg.IPBase+i)
		n := &Node{
			ID:    fmt.Sprintf("n%d", i),
			IP:    ip,
			HTTP:  ip + ":" + strconv.Itoa(HTTPPort),
			Raft:  ip + ":" + strconv.Itoa(RaftPort),
			Admin: ip + ":" + strconv.Itoa(AdminPort),
			Data:  filepath.Join(cfg.DataDir, fmt.Sprintf("n%d", i)),
			Log:   filepath.Join(cfg.LogDir, fmt.Sprintf("n%d.log", i)),
			UID:   BaseUID + (cfg.IPBase - DefaultIPBase) + i - 1,
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// CheckIPBase refuses a base whose range could overlap another's: ranges
// are the tens from 127.0.0.11-19 to 127.0.0.91-99.
func CheckIPBase(base int) error {
	if base < 10 || base > 90 || base%10 != 0 {
		return fmt.Errorf("ip base must be a multiple of 10 from 10 to 90, not %d", base)
	}
	return nil
}

// Token is the admin token.
func (c *Cluster) Token() string { return c.cfg.Token }

// AdminArgs are the flags `perpd admin` needs besides the token (given in
// PERPD_ADMIN_TOKEN): the operator certificate files.
func (c *Cluster) AdminArgs() []string { return c.operator.Args() }

// provision writes n's secrets and certificate into its data directory
// (again after a wipe), so its command line names files only.
func (c *Cluster) provision(n *Node) ([]string, error) {
	if err := node.WriteSecretFile(filepath.Join(n.Data, "admin-token"), c.cfg.Token); err != nil {
		return nil, err
	}
	if err := node.WriteSecretFile(filepath.Join(n.Data, "cluster-secret"), c.secret); err != nil {
		return nil, err
	}
	files, err := c.ca.WriteFiles(filepath.Join(n.Data, "tls"), n.ID, true)
	if err != nil {
		return nil, err
	}
	return files.Args(), nil
}

// Node finds a node by id.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// StartAll starts node 1 (bootstrapping), waits for it to lead, then starts
// and joins the others, and waits until every node sees the full cluster.
func (c *Cluster) StartAll(ctx context.Context) error {
	if err := c.Start(c.Nodes[0], ""); err != nil {
		return err
	}
	if err := c.WaitMembers(ctx, c.Nodes[:1], 1, 60*time.Second); err != nil {
		return err
	}
	for _, n := range c.Nodes[1:] {
		if err := c.Start(n, c.Nodes[0].Admin); err != nil {
			return err
		}
		// One at a time: a configuration change must commit before the next.
		if err := c.WaitMembers(ctx, []*Node{c.Nodes[0]}, indexOf(c.Nodes, n)+1, 60*time.Second); err != nil {
			return err
		}
	}
	return c.WaitMembers(ctx, c.Nodes, len(c.Nodes), 60*time.Second)
}

func indexOf(nodes []*Node, n *Node) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// Start launches n's process. The very first start of node 1 bootstraps;
// every other start joins through joinVia (ignored by perpd when the data
// directory already holds raft state, so a restart after a kill resumes).
func (c *Cluster) Start(n *Node, joinVia string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.exited:
			// Ended on its own (Config.OnExit said so): start it again.
			n.cmd = nil
		default:
			return fmt.Errorf("%s is already running", n.ID)
		}
	}
	// The parent must be traversable by the node's own uid.
	if err := os.MkdirAll(filepath.Dir(n.Data), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(n.Data, 0o700); err != nil {
		return err
	}
	tlsArgs, err := c.provision(n)
	if err != nil {
		return err
	}
	args := []string{"serve", "--id", n.ID, "--data", n.Data, "--http", n.HTTP, "--raft", n.Raft,
		"--admin", n.Admin}
	args = append(args, tlsArgs...)
	switch {
	case !n.started && n == c.Nodes[0]:
		args = append(args, "--bootstrap")
	case joinVia != "":
		args = append(args, "--join", joinVia)
	}
	if p := c.ArchivePath(n); p != "" {
		args = append(args, "--apply-archive", p)
	}
	args = append(args, withFlags(c.cfg.ExtraArgs, n.flags)...)
	logf, err := os.OpenFile(n.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "\n==== jepsen: %s start %v\n", time.Now().Format(time.RFC3339Nano), args)
	cmd := exec.Command(c.cfg.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if c.cfg.OwnUIDs {
		if err := chownTree(n.Data, n.UID); err != nil {
			_ = logf.Close()
			return err
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(n.UID), Gid: uint32(n.UID)}
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		status := exitStatus(cmd, err)
		// Stop and Kill let go of the process before they signal it, so
		// a process still held here ended without the harness asking.
		n.mu.Lock()
		unexpected := n.cmd == cmd
		n.mu.Unlock()
		how := "stopped by the harness"
		if unexpected {
			how = "NOT stopped by the harness"
		}
		fmt.Fprintf(logf, "\n==== jepsen: %s exited (%s): %s\n", time.Now().Format(time.RFC3339Nano), how, status)
		_ = logf.Close()
		close(exited)
		if unexpected && c.cfg.OnExit != nil {
			c.cfg.OnExit(n, status)
		}
	}()
	n.cmd, n.exited, n.paused, n.started = cmd, exited, false, true
	return nil
}

// exitStatus says how cmd ended: "exit status 1", "signal: terminated".
func exitStatus(cmd *exec.Cmd, err error) string {
	if cmd.ProcessState != nil {
		return cmd.ProcessState.String()
	}
	if err != nil {
		return err.Error()
	}
	return "ended"
}

func chownTree(dir string, uid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// Running reports whether n's process is alive (paused counts as alive).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Paused reports whether n is stopped with SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Kill sends SIGKILL and waits for the process to be gone.
func (c *Cluster) Kill(n *Node) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-time.After(stopGrace):
		return fmt.Errorf("%s did not die after SIGKILL", n.ID)
	}
}

// Stop sends SIGTERM (after SIGCONT, should it be paused) and SIGKILL after
// a grace period.
func (c *Cluster) Stop(n *Node) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopGrace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// Pause freezes n with SIGSTOP.
func (c *Cluster) Pause(n *Node) error { return c.signal(n, syscall.SIGSTOP, true) }

// Resume thaws n with SIGCONT.
func (c *Cluster) Resume(n *Node) error { return c.signal(n, syscall.SIGCONT, false) }

func (c *Cluster) signal(n *Node, sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is not running", n.ID)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return err
	}
	n.paused = paused
	return nil
}

// Wipe deletes n's data directory (the process must be stopped).
func (c *Cluster) Wipe(n *Node) error {
	if n.Running() {
		return fmt.Errorf("%s is running; stop it before wiping", n.ID)
	}
	return os.RemoveAll(n.Data)
}

// StopAll resumes and stops every node. Safe on every exit path.
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func(n *Node) {
			defer wg.Done()
			c.Stop(n)
		}(n)
	}
	wg.Wait()
	c.admin.Close()
}

// Status asks n's admin listener for its view.
func (c *Cluster) Status(ctx context.Context, n *Node) (*client.Status, error) {
	return c.admin.AdminStatus(ctx, n.Admin, c.cfg.Token)
}

// State asks n's admin listener for its applied index and state hash.
func (c *Cluster) State(ctx context.Context, n *Node) (*client.State, error) {
	return c.admin.AdminState(ctx, n.Admin, c.cfg.Token)
}

// Snapshot forces a snapshot on n.
func (c *Cluster) Snapshot(ctx context.Context, n *Node) error {
	return c.admin.AdminSnapshot(ctx, n.Admin, c.cfg.Token)
}

// OracleScript makes feedID play points through n's admin listener (any
// member: the command is forwarded to the leader).
func (c *Cluster) OracleScript(ctx context.Context, n *Node, feedID string, points []client.ScriptPoint) error {
	return c.admin.AdminOracleScript(ctx, n.Admin, c.cfg.Token, feedID, points)
}

// OraclePin holds feedID at midQ8 through n's admin listener.
func (c *Cluster) OraclePin(ctx context.Context, n *Node, feedID string, midQ8 int64) error {
	return c.admin.AdminOraclePin(ctx, n.Admin, c.cfg.Token, feedID, midQ8)
}

// Ledger reads n's books and conservation check (GET /admin/ledger).
func (c *Cluster) Ledger(ctx context.Context, n *Node) (*client.Ledger, error) {
	return c.admin.AdminLedger(ctx, n.Admin, c.cfg.Token)
}

// ErrNoLeader means no running node claims to lead.
var ErrNoLeader = errors.New("no leader")

// Leader returns the node most running nodes name as leader, provided it
// claims the role itself.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	votes := map[string]int{}
	claims := map[string]bool{}
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		st, err := c.Status(ctx, n)
		if err != nil {
			continue
		}
		if st.Leader.ID != "" {
			votes[st.Leader.ID]++
		}
		if st.State == "Leader" {
			claims[st.ID] = true
		}
	}
	var ids []string
	for id := range votes {
		if claims[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, ErrNoLeader
	}
	sort.Slice(ids, func(i, j int) bool {
		return votes[ids[i]] > votes[ids[j]] || (votes[ids[i]] == votes[ids[j]] && ids[i] < ids[j])
	})
	return c.Node(ids[0]), nil
}

// WaitLeader polls until a leader is found or d passes.
func (c *Cluster) WaitLeader(ctx context.Context, d time.Duration) (*Node, error) {
	deadline := time.Now().Add(d)
	for {
		l, err := c.Leader(ctx)
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no leader within %v", d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitMembers polls until every node of nodes knows a leader and counts at
// least members voters, or d passes.
func (c *Cluster) WaitMembers(ctx context.Context, nodes []*Node, members int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ok, why := true, ""
		for _, n := range nodes {
			if !n.Running() {
				return fmt.Errorf("%s exited; see %s", n.ID, n.Log)
			}
			st, err := c.Status(ctx, n)
			switch {
			case err != nil:
				ok, why = false, err.Error()
			case st.Leader.ID == "" || st.Leader.HTTP == "":
				ok, why = false, n.ID+" knows no leader"
			case len(st.Members) < members:
				ok, why = false, fmt.Sprintf("%s sees %d members", n.ID, len(st.Members))
			}
			if !ok {
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cluster not formed within %v: %s", d, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Members returns the member ids the leader reports.
func (c *Cluster) Members(ctx context.Context) ([]string, error) {
	l, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	st, err := c.Status(ctx, l)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range st.Members {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
