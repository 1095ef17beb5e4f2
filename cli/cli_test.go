package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// These tests run the real perpd binary as separate processes: slow, so
// `go test -short` skips them; `make test` runs them.

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// perpdBinary builds the binary once per test run.
func perpdBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test; skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("process checks read /proc")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "perpd-cli-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "perpd")
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go tool is not on PATH: %v", err)
			return
		}
		out, err := exec.Command(goTool, "build", "-o", binPath, "github.com/perpd/perpd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// run runs the binary to completion and returns stdout, stderr, exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, perpdBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("perpd %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// runJSON runs an admin command that must succeed and decodes its JSON.
func runJSON(t *testing.T, out any, args ...string) {
	t.Helper()
	stdout, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("perpd %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("perpd %s printed non-JSON %q: %v", strings.Join(args, " "), stdout, err)
	}
}

// procsMatching lists live processes whose argv contains every needle as a
// whole argument sequence (arguments joined by NULs, as /proc shows them).
func procsMatching(needle ...string) []int {
	want := []byte("\x00" + strings.Join(needle, "\x00") + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie
		}
		if bytes.Contains(append([]byte{0}, b...), want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procsMentioning lists live processes with s anywhere in their argv.
func procsMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// freePortBase finds b such that b-1000+i, b+i and b+1000+i (i < n) are
// all free: devnet's raft, HTTP and admin ports. It stays below the
// ephemeral range so outgoing connections do not take them meanwhile.
func freePortBase(t *testing.T, n int) int {
	t.Helper()
	for range 200 {
		base := 21000 + rand.IntN(9000)
		ok := true
		var lns []net.Listener
		for _, off := range []int{-1000, 0, 1000} {
			for i := range n {
				ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+off+i))
				if err != nil {
					ok = false
					break
				}
				lns = append(lns, ln)
			}
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// process is a long-running perpd child with its output collected.
type process struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer
	lines chan string
	done  chan struct{}
	err   error
}

func start(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{lines: make(chan string, 256), done: make(chan struct{})}
	p.cmd = exec.Command(perpdBinary(t), args...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		p.err = p.cmd.Wait()
		_ = pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of perpd %s:\n%s", strings.Join(args, " "), p.output())
		}
	})
	return p
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine waits for a line containing s.
func (p *process) waitLine(t *testing.T, s string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, s) {
				return l
			}
		case <-p.done:
			t.Fatalf("process exited (%v) before printing %q", p.err, s)
		case <-deadline:
			t.Fatalf("no %q within %v", s, timeout)
		}
	}
}

// stop sends sig and waits for the exit; it returns the exit code.
func (p *process) stop(t *testing.T, sig syscall.Signal, timeout time.Duration) int {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("no exit within %v of %v", timeout, sig)
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	return 0
}

func pollStatus(t *testing.T, addr, token string, timeout time.Duration, cond func(*node.Status) bool) *node.Status {
	t.Helper()
	return pollClient(t, cluster.NewAdminClient(addr, token), timeout, cond)
}

func pollClient(t *testing.T, c *cluster.AdminClient, timeout time.Duration, cond func(*node.Status) bool) *node.Status {
	t.Helper()
	addr := c.Addr
	c.HTTP.Timeout = 2 * time.Second
	deadline := time.Now().Add(timeout)
	var last *node.Status
	var lastErr error
	for time.Now().Before(deadline) {
		st, err := c.Status(context.Background())
		if err == nil && cond(st) {
			return st
		}
		last, lastErr = st, err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("status of %s never matched: %+v %v", addr, last, lastErr)
	return nil
}

func TestDevnetAdminCommandsFailoverAndCleanShutdown(t *testing.T) {
	perpdBinary(t)
	dir := t.TempDir()
	base := freePortBase(t, 3)
	devnet := start(t, "devnet", "--nodes", "3", "--dir", dir, "--http-base", strconv.Itoa(base))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i := 1; i <= 3; i++ {
			b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i)))
			if len(b) > 16<<10 {
				b = b[len(b)-16<<10:]
			}
			t.Logf("node%d.log:\n%s", i, b)
		}
	})
	devnet.waitLine(t, "devnet: 3 nodes up", 90*time.Second)
	try := devnet.waitLine(t, "try: perpd admin status", 5*time.Second)
	token, err := node.ReadSecretFile(filepath.Join(dir, "node1", "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := node.ReadSecretFile(filepath.Join(dir, "node1", "cluster-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(devnet.output(), token) || strings.Contains(devnet.output(), secret) {
		t.Fatalf("devnet printed a secret:\n%s", devnet.output())
	}
	tlsDir := filepath.Join(dir, "tls")
	tlsArgs := []string{"--tls-cert", filepath.Join(tlsDir, "admin.pem"), "--tls-key", filepath.Join(tlsDir, "admin-key.pem"), "--tls-ca", filepath.Join(tlsDir, "ca.pem")}
	if !strings.Contains(try, strings.Join(tlsArgs, " ")) || !strings.Contains(try, "--data "+filepath.Join(dir, "node1")) {
		t.Fatalf("devnet's admin command lacks the certificate or data flags: %q", try)
	}
	admin := func(i int) string { return "127.0.0.1:" + strconv.Itoa(base+1000+i) }
	raftAddr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(base-1000+i) }
	adm := func(i int, args ...string) []string {
		return append(append(append([]string{"admin"}, args...), "--addr", admin(i), "--data", filepath.Join(dir, "node1")), tlsArgs...)
	}
	operator, err := node.LoadPeerTLS(tlsArgs[1], tlsArgs[3], tlsArgs[5])
	if err != nil {
		t.Fatal(err)
	}
	client := func(i int) *cluster.AdminClient {
		return cluster.NewAdminClient(admin(i), token).UseTLS(operator.ClientConfig())
	}
	pids := procsMentioning(dir)
	if len(pids) != 4 {
		t.Fatalf("%d processes mention the devnet dir, want devnet and 3 nodes", len(pids))
	}
	// No secret on any command line (every user of the machine reads
	// them), and every node runs with its certificate.
	withCert := 0
	for _, pid := range pids {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(secret)) {
			t.Fatalf("process %d's command line holds a secret: %q", pid, b)
		}
		if bytes.Contains(b, []byte("\x00--tls-cert\x00")) {
			withCert++
		}
	}
	if withCert != 3 {
		t.Fatalf("%d nodes run with --tls-cert, want 3", withCert)
	}
	// Without the operator certificate the admin listener is closed.
	if _, stderr, code := run(t, "admin", "status", "--addr", admin(0), "--data", filepath.Join(dir, "node1")); code == 0 {
		t.Fatalf("admin without a client certificate must fail: %q", stderr)
	}
	// A token on the command line is refused before anything is sent.
	if _, stderr, code := run(t, append(adm(0, "status"), "--admin-token", token)...); code == 0 || !strings.Contains(stderr, "--admin-token-file") {
		t.Fatalf("--admin-token on argv: exit %d, %q", code, stderr)
	}

	var st node.Status
	runJSON(t, &st, adm(0, "status")...)
	if st.ID != "node1" || st.Leader.ID == "" || len(st.Members) != 3 || st.StateHash == "" {
		t.Fatalf("status %+v", st)
	}
	var sv cluster.StateView
	runJSON(t, &sv, adm(1, "state")...)
	if sv.AppliedIndex == "" || len(sv.StateHash) != 64 {
		t.Fatalf("state %+v", sv)
	}
	// The three processes' replicas compared at one index (TLS between them).
	var rv cluster.ReplicasView
	runJSON(t, &rv, adm(2, "replicas")...)
	if !rv.Agree || len(rv.Members) != 3 || len(rv.Members[0].StateHash) != 64 {
		t.Fatalf("replicas %+v", rv)
	}
	wrong := filepath.Join(t.TempDir(), "wrong-token")
	if err := node.WriteSecretFile(wrong, "wrong"); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, append(adm(0, "status"), "--admin-token-file", wrong)...); code == 0 || !strings.Contains(stderr, "401") {
		t.Fatalf("a wrong token must fail: exit %d, %q", code, stderr)
	}

	// Leadership to a named follower, asked on node1 whoever leads.
	target := "node2"
	if st.Leader.ID == "node2" {
		target = "node3"
	}
	runJSON(t, &st, adm(0, "transfer-leadership", "--to", target)...)
	if st.Leader.ID != target {
		t.Fatalf("after transfer to %s the leader is %q", target, st.Leader.ID)
	}

	// Snapshot to a file, then restore it (relayed to the leader by node1).
	file := filepath.Join(t.TempDir(), "backup.snap")
	var snap map[string]string
	runJSON(t, &snap, adm(0, "snapshot", "--out", file)...)
	if snap["file"] != file || snap["index"] == "" || snap["bytes"] == "" {
		t.Fatalf("snapshot answer %v", snap)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.HasPrefix(b, []byte("perpd-snapshot v1\n")) {
		t.Fatalf("snapshot file: %v", err)
	}
	if n, err := strconv.ParseInt(snap["bytes"], 10, 64); err != nil || n <= 0 {
		t.Fatalf("snapshot of %q bytes", snap["bytes"])
	}
	if snap["stateHash"] == "" || snap["manifest"] != filepath.Join(filepath.Dir(file), "backup.json") {
		t.Fatalf("snapshot answer %v", snap)
	}
	// A copy that changed since it was taken is refused before the cluster
	// sees it (by its checksum, so also where it would still decode: a
	// digit of a stored answer); so is a file without its manifest, unless
	// --unverified.
	data, _ := os.ReadFile(file)
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	badFile := filepath.Join(filepath.Dir(file), "bad.snap")
	for _, f := range []string{".snap", ".json", ".snap.sha256"} {
		src, _ := os.ReadFile(strings.TrimSuffix(file, ".snap") + f)
		if f == ".snap" {
			src = bad
		}
		if err := os.WriteFile(strings.TrimSuffix(badFile, ".snap")+f, src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := run(t, adm(0, "restore", "--in", badFile)...); code == 0 || !strings.Contains(stderr, "SHA-256") {
		t.Fatalf("a changed snapshot: exit %d, %q", code, stderr)
	}
	bare := filepath.Join(t.TempDir(), "bare.snap")
	if err := os.WriteFile(bare, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, adm(0, "restore", "--in", bare)...); code == 0 || !strings.Contains(stderr, "no manifest") {
		t.Fatalf("a snapshot without its manifest: exit %d, %q", code, stderr)
	}
	runJSON(t, &sv, adm(0, "restore", "--in", bare, "--unverified")...)
	runJSON(t, &sv, adm(0, "restore", "--in", file)...)
	if len(sv.StateHash) != 64 || sv.RestoredStateHash != snap["stateHash"] {
		t.Fatalf("restore answer %+v, snapshot %v", sv, snap)
	}

	// Remove a follower and join it back.
	st = *pollClient(t, client(0), 10*time.Second, func(s *node.Status) bool { return s.Leader.ID != "" })
	victim := 2 // node3, unless it leads
	if st.Leader.ID == "node3" {
		victim = 1
	}
	victimID := fmt.Sprintf("node%d", victim+1)
	var members struct {
		Members []node.Member `json:"members"`
	}
	runJSON(t, &members, adm(0, "remove", "--id", victimID)...)
	if len(members.Members) != 2 {
		t.Fatalf("members after remove: %+v", members.Members)
	}
	runJSON(t, &members, adm(0, "join", "--id", victimID, "--raft", raftAddr(victim))...)
	if len(members.Members) != 3 {
		t.Fatalf("members after join: %+v", members.Members)
	}
	pollClient(t, client(victim), 30*time.Second, func(s *node.Status) bool {
		return s.Leader.ID != "" && s.Leader.ID != victimID && len(s.Members) == 3
	})

	// SIGKILL the leader's process: the others elect a new one.
	st = *pollClient(t, client(0), 10*time.Second, func(s *node.Status) bool { return s.Leader.ID != "" })
	killed := st.Leader.ID
	pids = procsMatching("--data", filepath.Join(dir, killed))
	if len(pids) != 1 {
		t.Fatalf("found %d processes for %s", len(pids), killed)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	survivor := 0
	if killed == "node1" {
		survivor = 1
	}
	killedAt := time.Now()
	st = *pollClient(t, client(survivor), 15*time.Second, func(s *node.Status) bool {
		return s.Leader.ID != "" && s.Leader.ID != killed && s.State != "Candidate"
	})
	t.Logf("%s killed; %s leads after %v", killed, st.Leader.ID, time.Since(killedAt))

	// SIGTERM to devnet stops every child: nothing is left behind.
	if code := devnet.stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("devnet exited %d", code)
	}
	if pids := procsMentioning(dir); len(pids) != 0 {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("devnet left %d processes running: %v", len(pids), pids)
	}
}

// genesisOf downloads a snapshot through the admin listener and returns
// the genesis it holds and its applied index, waiting for the first leader
// to have proposed the genesis.
func genesisOf(t *testing.T, addr, token string) (fsm.Genesis, uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var buf bytes.Buffer
		if _, err := cluster.NewAdminClient(addr, token).Snapshot(context.Background(), &buf, nil); err != nil {
			t.Fatal(err)
		}
		_, rest, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
		_, data, _ := bytes.Cut(rest, []byte("\n"))
		m := fsm.NewMachine(fsm.Options{})
		if err := m.Restore(data); err != nil {
			t.Fatal(err)
		}
		var g *fsm.Genesis
		var idx uint64
		m.Read(func(st *fsm.State, i uint64) { g, idx = st.Genesis, i })
		if g != nil {
			return *g, idx
		}
		if time.Now().After(deadline) {
			t.Fatal("no genesis in the node's snapshots")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestServeRestartedOnItsDataResumesWithoutBootstrappingAgain(t *testing.T) {
	perpdBinary(t)
	data := t.TempDir()
	httpAddr, raftAddr, adminAddr := freePort(t), freePort(t), freePort(t)
	args := []string{"serve", "--bootstrap", "--id", "solo", "--data", data,
		"--http", httpAddr, "--raft", raftAddr, "--admin", adminAddr, "--log-level", "warn"}

	// First start: no token given, so one is generated into the data dir.
	p := start(t, args...)
	tokenFile := filepath.Join(data, "admin-token")
	var token string
	deadline := time.Now().Add(30 * time.Second)
	for token == "" {
		if time.Now().After(deadline) {
			t.Fatal("no admin token written to the data directory")
		}
		b, _ := os.ReadFile(tokenFile)
		token = strings.TrimSpace(string(b))
		time.Sleep(50 * time.Millisecond)
	}
	pollStatus(t, adminAddr, token, 30*time.Second, func(s *node.Status) bool {
		return s.State == "Leader" && s.Leader.HTTP == httpAddr
	})
	g1, idx1 := genesisOf(t, adminAddr, token)
	var before node.Status
	runJSON(t, &before, "admin", "status", "--addr", adminAddr, "--data", data)
	if code := p.stop(t, syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("serve exited %d on SIGTERM", code)
	}

	// Same command again, --bootstrap included.
	start(t, args...)
	after := pollStatus(t, adminAddr, token, 30*time.Second, func(s *node.Status) bool { return s.State == "Leader" })
	g2, idx2 := genesisOf(t, adminAddr, token)
	if g2 != g1 {
		t.Fatalf("genesis changed across a restart: %+v then %+v", g1, g2)
	}
	a0, _ := strconv.ParseUint(before.AppliedIndex, 10, 64)
	a1, _ := strconv.ParseUint(after.AppliedIndex, 10, 64)
	if a1 < a0 || idx2 < idx1 {
		t.Fatalf("applied index went from %d to %d (snapshots %d, %d)", a0, a1, idx1, idx2)
	}
	if len(after.Members) != 1 || after.Members[0].ID != "solo" {
		t.Fatalf("members %+v", after.Members)
	}
}

// The in-process harness with exactly the wiring `serve` runs: every
// domain's drivers propose on the leader, and the replicas still agree.
func TestServeWiringReplicatesToEqualStateHashes(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble))
	for _, m := range c.Live() {
		res, err := m.Node.Propose(context.Background(), &fsm.Command{Type: fsm.CmdNoop, IdemKey: "acct:" + m.ID, ReqHash: []byte{1}})
		if err != nil || !res.OK() {
			t.Fatalf("write through %s: %+v %v", m.ID, res, err)
		}
	}
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
