// Command testnet rehearses docs/deploy.md on one Linux machine: three
// network namespaces (perpd-tn1..3) joined by a bridge on 192.0.2.0/24,
// each running `perpd serve` with the variables of deploy/env/nodeN.env
// (paths moved under -dir, certificates from deploy/make-certs.sh, mutual
// TLS), and wide-area delay between the hosts: `tc netem` where the kernel
// has it, else a transparent delaying relay in each namespace (iptables
// REDIRECT of the namespace's outgoing connections to the other hosts).
//
// It checks that the cluster forms, that a write through every node
// applies on every node, that killing the leader's namespace elects a new
// leader and writes go on (and the old leader catches up when it is back),
// and that a partitioned host catches up after the partition heals; and it
// reports write latency p50/p99 under the delay. Needs root, iproute2,
// iptables and openssl. `make testnet` runs it; `make testnet-short` with
// fewer writes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/node"
)

const (
	nodes  = 3
	bridge = "perpd-tnbr"
	// clientIP is the checker's own namespace (perpd-tn0) on the bridge.
	// The root namespace gets no address on the bridge: the host's own
	// network may use the same range.
	clientIP   = "192.0.2.100"
	relayPort  = 15000
	relayMark  = 1
	nsPrefix   = "perpd-tn"
	vethPrefix = "ptn"
)

func nsName(i int) string { return nsPrefix + strconv.Itoa(i) }
func hostIP(i int) string { return "192.0.2." + strconv.Itoa(i) }
func nodeID(i int) string { return "node" + strconv.Itoa(i) }

var (
	perpdBin = flag.String("perpd", "bin/perpd", "perpd binary")
	repo     = flag.String("repo", ".", "repository root (deploy/env, deploy/make-certs.sh)")
	dir      = flag.String("dir", "/tmp/perpd-testnet", "scratch directory (wiped at start)")
	writes   = flag.Int("writes", 300, "writes for the latency measurement")
	delay    = flag.Duration("delay", 25*time.Millisecond, "one-way delay between hosts")
	jitter   = flag.Duration("jitter", 5*time.Millisecond, "delay jitter")
	out      = flag.String("out", "testnet-result.json", "where to write the result")
	keep     = flag.Bool("keep", false, "leave the namespaces and nodes running after the checks (until Ctrl-C)")

	relay       = flag.Bool("relay", false, "internal: run the delaying relay in this namespace")
	relayListen = flag.String("relay-listen", "127.0.0.1:15000", "internal: relay address")
)

func main() {
	flag.Parse()
	if *relay {
		err := runRelay(*relayListen, *delay, *jitter) // returns only on failure
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
	if reason := preflight(); reason != "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "testnet: cannot run:", reason)
			os.Exit(1)
		}
		fmt.Println("testnet: skipped:", reason)
		return
	}
	t := &testnet{procs: map[string]*exec.Cmd{}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := t.run(ctx)
	if *keep && err == nil {
		fmt.Println("testnet: running; Ctrl-C tears it down")
		<-ctx.Done()
	}
	t.teardown()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testnet: FAIL:", err)
		for i := 1; i <= nodes; i++ {
			tailLog(filepath.Join(*dir, nodeID(i), "perpd.log"), 15)
		}
		os.Exit(1)
	}
}

// preflight says why the testnet cannot run here ("" when it can).
func preflight() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces, iptables)"
	}
	for _, tool := range []string{"ip", "iptables", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found (apt-get install iproute2 iptables openssl)"
		}
	}
	probe := nsPrefix + "-probe"
	_ = exec.Command("ip", "netns", "del", probe).Run()
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		return "cannot create a network namespace: " + strings.TrimSpace(string(out))
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
	return ""
}

type testnet struct {
	procs    map[string]*exec.Cmd // perpd, relays and Prometheus, by name
	prom     string               // Prometheus' API base URL in the checker's namespace ("" without it)
	mode     string               // netem or relay
	token    string
	adminTLS *tls.Config
	http     *http.Client
	result   result
}

type result struct {
	Mode         string   `json:"delayMode"`
	DelayMs      float64  `json:"delayMsEachWay"`
	JitterMs     float64  `json:"jitterMs"`
	Writes       int      `json:"writes"`
	P50Ms        float64  `json:"writeP50Ms"`
	P99Ms        float64  `json:"writeP99Ms"`
	MaxMs        float64  `json:"writeMaxMs"`
	FormationMs  int64    `json:"formationMs"`
	FailoverMs   int64    `json:"failoverMs"`
	CatchUpMs    int64    `json:"partitionCatchUpMs"`
	RestartMs    int64    `json:"killedLeaderCatchUpMs"`
	Checks       []string `json:"checks"`
	LeaderKilled string   `json:"leaderKilled"`
	Partitioned  string   `json:"partitioned"`
	Prometheus   bool     `json:"prometheus"`
}

func (t *testnet) check(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	t.result.Checks = append(t.result.Checks, s)
	fmt.Println("ok:", s)
}

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func inNS(i int, args ...string) error {
	return sh(append([]string{"ip", "netns", "exec", nsName(i)}, args...)...)
}

func (t *testnet) run(ctx context.Context) error {
	t.teardownNetwork() // leftovers of an interrupted run
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	bin, err := filepath.Abs(*perpdBin)
	if err != nil {
		return err
	}
	*perpdBin = bin
	if err := t.network(); err != nil {
		return err
	}
	if err := t.delays(); err != nil {
		return err
	}
	if err := t.secrets(); err != nil {
		return err
	}
	start := time.Now()
	for i := 1; i <= nodes; i++ {
		if err := t.startNode(i); err != nil {
			return err
		}
		if i == 1 {
			if _, err := t.waitLeader(ctx, []int{1}, 1, 60*time.Second); err != nil {
				return fmt.Errorf("node1 did not form the cluster: %w", err)
			}
		}
	}
	leader, err := t.waitLeader(ctx, []int{1, 2, 3}, 3, 90*time.Second)
	if err != nil {
		return fmt.Errorf("the cluster did not form: %w", err)
	}
	t.result.FormationMs = time.Since(start).Milliseconds()
	t.check("cluster formed over mutual TLS in %v: leader %s, 3 voters, every node agrees", time.Since(start).Round(time.Millisecond), leader)
	if err := t.waitGenesis(ctx); err != nil {
		return err
	}
	if err := t.startPrometheus(); err != nil {
		return err
	}
	if err := t.writeEverywhere(ctx, []int{1, 2, 3}, "all"); err != nil {
		return err
	}
	if err := t.latency(ctx); err != nil {
		return err
	}
	if err := t.killLeader(ctx); err != nil {
		return err
	}
	if err := t.partition(ctx); err != nil {
		return err
	}
	if err := t.watchedInPrometheus(ctx); err != nil {
		return err
	}
	return t.report()
}

// network makes the bridge and the three namespaces.
func (t *testnet) network() error {
	steps := [][]string{
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "link", "set", bridge, "up"},
	}
	for i := 0; i <= nodes; i++ { // 0: the checker's namespace
		ns, v, ip := nsName(i), vethPrefix+strconv.Itoa(i), hostIP(i)
		if i == 0 {
			ip = clientIP
		}
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "link", "add", v, "type", "veth", "peer", "name", v + "p"},
			[]string{"ip", "link", "set", v, "master", bridge},
			[]string{"ip", "link", "set", v, "up"},
			[]string{"ip", "link", "set", v + "p", "netns", ns},
			[]string{"ip", "netns", "exec", ns, "ip", "link", "set", v + "p", "name", "eth0"},
			[]string{"ip", "netns", "exec", ns, "ip", "addr", "add", ip + "/24", "dev", "eth0"},
			[]string{"ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up"},
			[]string{"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"},
		)
	}
	for k, s := range steps {
		if err := sh(s...); err != nil {
			return err
		}
		if k == 0 {
			// The root namespace must not answer ARP on the bridge for its
			// own addresses: the host's network may be 192.0.2.0/24 too.
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+bridge+"/arp_ignore", []byte("8"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// delays adds the wide-area delay: netem on each namespace's interface,
// or, without netem, a delaying relay per namespace.
func (t *testnet) delays() error {
	netem := []string{"tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", delay.String(), jitter.String()}
	if err := inNS(1, netem...); err == nil {
		for i := 2; i <= nodes; i++ {
			if err := inNS(i, netem...); err != nil {
				return err
			}
		}
		t.mode = "tc netem"
	} else {
		fmt.Println("testnet: no tc netem in this kernel; delaying through a relay in each namespace")
		self, err := os.Executable()
		if err != nil {
			return err
		}
		for i := 1; i <= nodes; i++ {
			cmd := exec.Command("ip", "netns", "exec", nsName(i), self, "-relay",
				"-relay-listen", "127.0.0.1:"+strconv.Itoa(relayPort), "-delay", delay.String(), "-jitter", jitter.String())
			logf, err := os.Create(filepath.Join(*dir, fmt.Sprintf("relay%d.log", i)))
			if err != nil {
				return err
			}
			cmd.Stdout, cmd.Stderr = logf, logf
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				return err
			}
			t.procs["relay"+strconv.Itoa(i)] = cmd
			// New outgoing TCP connections to the other hosts go through the
			// relay, which connects on with a mark this rule skips.
			if err := inNS(i, "iptables", "-t", "nat", "-A", "OUTPUT", "-d", hostIP(i), "-j", "RETURN"); err != nil {
				return err
			}
			if err := inNS(i, "iptables", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", "192.0.2.0/24",
				"-m", "mark", "!", "--mark", strconv.Itoa(relayMark), "-j", "REDIRECT", "--to-ports", strconv.Itoa(relayPort)); err != nil {
				return err
			}
		}
		t.mode = "relay"
	}
	t.result.Mode = t.mode
	t.result.DelayMs = float64(delay.Microseconds()) / 1000
	t.result.JitterMs = float64(jitter.Microseconds()) / 1000
	return nil
}

// secrets makes what an operator makes: certificates, the cluster secret,
// the admin and metrics tokens.
func (t *testnet) secrets() error {
	tlsDir := filepath.Join(*dir, "tls")
	args := []string{filepath.Join(*repo, "deploy", "make-certs.sh"), tlsDir}
	for i := 1; i <= nodes; i++ {
		args = append(args, nodeID(i)+"="+hostIP(i))
	}
	args = append(args, "--", "admin", "prometheus")
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("make-certs.sh: %v\n%s", err, out)
	}
	t.token = node.NewClusterSecret()[:48]
	for name, v := range map[string]string{"cluster-secret": node.NewClusterSecret(), "admin-token": t.token, "metrics-token": node.NewClusterSecret()[:48]} {
		if err := node.WriteSecretFile(filepath.Join(*dir, name), v); err != nil {
			return err
		}
	}
	pt, err := node.LoadPeerTLS(filepath.Join(tlsDir, "admin.pem"), filepath.Join(tlsDir, "admin-key.pem"), filepath.Join(tlsDir, "ca.pem"))
	if err != nil {
		return err
	}
	t.adminTLS = pt.ClientConfig()
	t.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8, DialContext: dialIn(nsName(0))}}
	return nil
}

// dialIn dials from inside network namespace ns: a goroutine locks its
// thread, switches the thread into ns, dials (a socket stays in the
// namespace it was made in) and switches back. Should switching back
// fail, the goroutine ends still locked and the runtime retires the
// thread rather than reuse it in the wrong namespace. (Threads must not
// die routinely: a child started with Pdeathsig from a thread that dies
// is killed.)
func dialIn(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type dialed struct {
			c   net.Conn
			err error
		}
		ch := make(chan dialed, 1)
		go func() {
			runtime.LockOSThread()
			home, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				runtime.UnlockOSThread()
				ch <- dialed{nil, err}
				return
			}
			defer home.Close()
			target, err := os.Open("/var/run/netns/" + ns)
			if err != nil {
				runtime.UnlockOSThread()
				ch <- dialed{nil, err}
				return
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				ch <- dialed{nil, fmt.Errorf("setns %s: %v", ns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- dialed{c, err}
			if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// startPrometheus runs Debian's prometheus in the checker's namespace with
// deploy/prometheus.yml (paths moved under -dir, a 1 s scrape interval)
// and deploy/alerts.yml: it scrapes the nodes' /metrics over mutual TLS
// with the prometheus certificate and the metrics token, verifying each
// node certificate's IP. Without the binary the testnet goes on without.
func (t *testnet) startPrometheus() error {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		fmt.Println("testnet: prometheus not installed; not watching the testnet with it")
		return nil
	}
	conf, err := os.ReadFile(filepath.Join(*repo, "deploy", "prometheus.yml"))
	if err != nil {
		return err
	}
	pd := filepath.Join(*dir, "prometheus")
	if err := os.MkdirAll(pd, 0o700); err != nil {
		return err
	}
	alerts, err := filepath.Abs(filepath.Join(*repo, "deploy", "alerts.yml"))
	if err != nil {
		return err
	}
	tlsDir := filepath.Join(*dir, "tls")
	r := strings.NewReplacer(
		"scrape_interval: 15s", "scrape_interval: 1s",
		"scrape_timeout: 10s", "scrape_timeout: 1s",
		"/etc/prometheus/perpd-metrics-token", filepath.Join(*dir, "metrics-token"),
		"/etc/prometheus/perpd/ca.pem", filepath.Join(tlsDir, "ca.pem"),
		"/etc/prometheus/perpd/prometheus.pem", filepath.Join(tlsDir, "prometheus.pem"),
		"/etc/prometheus/perpd/prometheus-key.pem", filepath.Join(tlsDir, "prometheus-key.pem"),
		"/etc/prometheus/perpd-alerts.yml", alerts)
	cf := filepath.Join(pd, "prometheus.yml")
	if err := os.WriteFile(cf, []byte(r.Replace(string(conf))), 0o600); err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", nsName(0), bin, "--config.file="+cf,
		"--storage.tsdb.path="+filepath.Join(pd, "data"), "--web.listen-address=127.0.0.1:9090", "--log.level=warn")
	logf, err := os.Create(filepath.Join(pd, "prometheus.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	t.procs["prometheus"] = cmd
	t.prom = "http://127.0.0.1:9090"
	return nil
}

// promQuery runs an instant query and returns each series' labels and
// value.
func (t *testnet) promQuery(ctx context.Context, q string) ([]promSample, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.prom+"/api/v1/query?query="+url.QueryEscape(q), nil)
	res, err := t.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, _ := strconv.ParseFloat(s, 64)
		out = append(out, promSample{r.Metric, v})
	}
	return out, nil
}

type promSample struct {
	labels map[string]string
	value  float64
}

// watchedInPrometheus checks, through Prometheus' query API, what an
// operator watching the testnet sees after the run: every node up again,
// one leader, the leader change and the writes counted.
func (t *testnet) watchedInPrometheus(ctx context.Context) error {
	if t.prom == "" {
		return nil
	}
	want := []struct {
		what, q string
		ok      func([]promSample) bool
	}{
		{"every node scraped and up", `up{job="perpd"} == 1`, func(s []promSample) bool { return len(s) == nodes }},
		{"exactly one leader", `sum(perpd_raft_is_leader{job="perpd"})`, func(s []promSample) bool { return len(s) == 1 && s[0].value == 1 }},
		{"the leader change seen", `sum(perpd_raft_leader_changes_total{job="perpd"})`, func(s []promSample) bool { return len(s) == 1 && s[0].value >= 2 }},
		{"the writes counted", `sum(perpd_http_requests_total{job="perpd",route="/v1/signup",status="201"})`, func(s []promSample) bool { return len(s) == 1 && s[0].value >= 1 }},
		{"raft's commit time", `count(perpd_raft_commitTime_count{job="perpd"})`, func(s []promSample) bool { return len(s) == 1 && s[0].value >= 1 }},
	}
	for _, w := range want {
		deadline := time.Now().Add(30 * time.Second)
		var last []promSample
		var err error
		for {
			last, err = t.promQuery(ctx, w.q)
			if err == nil && w.ok(last) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("prometheus: %s: %s gave %v %v", w.what, w.q, last, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.result.Prometheus = true
	t.check("Prometheus (deploy/prometheus.yml, mutual TLS, metrics token) sees every node up, one leader, the leader changes, the writes and raft's commit times")
	return nil
}

// readEnv parses a KEY=VALUE file, skipping comments and blank lines.
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env, sc.Err()
}

// startNode runs perpd serve in namespace i with deploy/env/nodeI.env;
// only paths move under -dir (flags win over variables), and the bench
// profile's budgets let the latency run write back to back.
func (t *testnet) startNode(i int) error {
	env, err := readEnv(filepath.Join(*repo, "deploy", "env", nodeID(i)+".env"))
	if err != nil {
		return err
	}
	nd := filepath.Join(*dir, nodeID(i))
	if err := os.MkdirAll(nd, 0o700); err != nil {
		return err
	}
	tlsDir := filepath.Join(*dir, "tls")
	args := []string{"netns", "exec", nsName(i), *perpdBin, "serve",
		"--data", filepath.Join(nd, "data"), "--backup-dir", filepath.Join(nd, "backups"),
		"--admin-token-file", filepath.Join(*dir, "admin-token"),
		"--cluster-secret-file", filepath.Join(*dir, "cluster-secret"),
		"--metrics-token-file", filepath.Join(*dir, "metrics-token"),
		"--tls-cert", filepath.Join(tlsDir, nodeID(i)+".pem"), "--tls-key", filepath.Join(tlsDir, nodeID(i)+"-key.pem"),
		"--tls-ca", filepath.Join(tlsDir, "ca.pem"), "--deployment", "bench"}
	cmd := exec.Command("ip", args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logf, err := os.OpenFile(filepath.Join(nd, "perpd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	t.procs[nodeID(i)] = cmd
	go func() { _ = cmd.Wait(); logf.Close() }()
	return nil
}

func (t *testnet) admin(i int) *cluster.AdminClient {
	c := cluster.NewAdminClient(hostIP(i)+":9080", t.token).UseTLS(t.adminTLS)
	c.HTTP.Timeout = 3 * time.Second
	c.HTTP.Transport = &http.Transport{TLSClientConfig: t.adminTLS, DialContext: dialIn(nsName(0))}
	return c
}

// waitLeader waits until every node of on reports the same leader among
// at least members voters, and returns its id.
func (t *testnet) waitLeader(ctx context.Context, on []int, members int, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		leader, ok := "", true
		for _, i := range on {
			st, err := t.admin(i).Status(ctx)
			if err != nil {
				last, ok = err, false
				break
			}
			if st.Leader.ID == "" || len(st.Members) < members || (leader != "" && st.Leader.ID != leader) {
				last, ok = fmt.Errorf("%s sees leader %q and %d members", nodeID(i), st.Leader.ID, len(st.Members)), false
				break
			}
			leader = st.Leader.ID
		}
		if ok {
			return leader, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no agreed leader in %v: %v", timeout, last)
}

// waitGenesis waits until the markets are listed (writes need them).
func (t *testnet) waitGenesis(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := t.http.Get("http://" + hostIP(1) + ":8080/v1/markets")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 200 && bytes.Contains(b, []byte("BTC-PERP")) {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("the markets were never listed")
}

// signup writes through node i: a new account. It returns the key and the
// raft index the write applied at.
func (t *testnet) signup(ctx context.Context, i int, idem string) (key string, index uint64, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+hostIP(i)+":8080/v1/signup", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("idempotency-key", idem)
	res, err := t.http.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		return "", 0, fmt.Errorf("signup through %s: %d %s", nodeID(i), res.StatusCode, b)
	}
	var body struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return "", 0, err
	}
	index, _ = strconv.ParseUint(res.Header.Get("X-Raft-Index"), 10, 64)
	return body.APIKey, index, nil
}

// seen reports whether node i serves key's account at index (X-Min-Index:
// the node waits up to 3 s to apply it). A node that has not applied the
// signup yet does not know the key: 401 comes before the wait, and counts
// as not yet.
func (t *testnet) seen(ctx context.Context, i int, key string, index uint64) (bool, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostIP(i)+":8080/v1/account", nil)
	req.Header.Set("x-api-key", key)
	req.Header.Set("X-Min-Index", strconv.FormatUint(index, 10))
	res, err := t.http.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	switch res.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusServiceUnavailable, http.StatusUnauthorized:
		return false, nil
	}
	return false, fmt.Errorf("account on %s: %d", nodeID(i), res.StatusCode)
}

// writeEverywhere writes through each node of via and expects every node
// of via to serve each write.
func (t *testnet) writeEverywhere(ctx context.Context, via []int, tag string) error {
	for _, i := range via {
		key, idx, err := t.signup(ctx, i, fmt.Sprintf("everywhere-%s-%d", tag, i))
		if err != nil {
			return err
		}
		for _, j := range via {
			if err := t.caughtUp(ctx, j, key, idx, 10*time.Second); err != nil {
				return fmt.Errorf("a write through %s (index %d) is not on %s: %v", nodeID(i), idx, nodeID(j), err)
			}
		}
	}
	names := make([]string, len(via))
	for k, i := range via {
		names[k] = nodeID(i)
	}
	t.check("a write through each of %v applied on each of them", names)
	return nil
}

// latency writes -writes signups round-robin through the nodes, one at a
// time, and records each write's latency as the client sees it.
func (t *testnet) latency(ctx context.Context) error {
	var ms []float64
	for k := 0; k < *writes; k++ {
		i := k%nodes + 1
		start := time.Now()
		if _, _, err := t.signup(ctx, i, fmt.Sprintf("latency-%d", k)); err != nil {
			return err
		}
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(ms)
	q := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	t.result.Writes, t.result.P50Ms, t.result.P99Ms, t.result.MaxMs = len(ms), q(0.50), q(0.99), ms[len(ms)-1]
	t.check("%d writes round-robin through every node under %v±%v each way (%s): p50 %.1f ms, p99 %.1f ms",
		len(ms), *delay, *jitter, t.mode, t.result.P50Ms, t.result.P99Ms)
	return nil
}

func (t *testnet) leaderIndex(ctx context.Context, on []int) (int, error) {
	id, err := t.waitLeader(ctx, on, 3, 30*time.Second)
	if err != nil {
		return 0, err
	}
	for i := 1; i <= nodes; i++ {
		if nodeID(i) == id {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown leader %q", id)
}

func others(except int) []int {
	var out []int
	for i := 1; i <= nodes; i++ {
		if i != except {
			out = append(out, i)
		}
	}
	return out
}

// killLeader kills the leader's process and cuts its namespace off, waits
// for the others to elect a new leader and write through both, then brings
// the old leader back and waits for it to serve the newest write.
func (t *testnet) killLeader(ctx context.Context) error {
	l, err := t.leaderIndex(ctx, []int{1, 2, 3})
	if err != nil {
		return err
	}
	t.result.LeaderKilled = nodeID(l)
	if p := t.procs[nodeID(l)]; p != nil && p.Process != nil {
		_ = p.Process.Kill()
	}
	if err := sh("ip", "link", "set", vethPrefix+strconv.Itoa(l), "down"); err != nil {
		return err
	}
	start := time.Now()
	survivors := others(l)
	var newLeader string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		id, err := t.waitLeader(ctx, survivors, 2, 2*time.Second)
		if err == nil && id != nodeID(l) {
			newLeader = id
			break
		}
	}
	if newLeader == "" {
		return fmt.Errorf("no new leader after killing %s", nodeID(l))
	}
	t.result.FailoverMs = time.Since(start).Milliseconds()
	t.check("killed the leader %s (process and link): %s leads after %v", nodeID(l), newLeader, time.Since(start).Round(time.Millisecond))
	if err := t.writeEverywhere(ctx, survivors, "after-kill"); err != nil {
		return err
	}
	key, idx, err := t.signup(ctx, survivors[0], "after-kill-last")
	if err != nil {
		return err
	}
	if err := sh("ip", "link", "set", vethPrefix+strconv.Itoa(l), "up"); err != nil {
		return err
	}
	if err := t.startNode(l); err != nil {
		return err
	}
	start = time.Now()
	if err := t.caughtUp(ctx, l, key, idx, 60*time.Second); err != nil {
		return fmt.Errorf("the killed leader %s never caught up: %w", nodeID(l), err)
	}
	t.result.RestartMs = time.Since(start).Milliseconds()
	t.check("%s restarted on its data and served the newest write (index %d) after %v", nodeID(l), idx, time.Since(start).Round(time.Millisecond))
	_, err = t.waitLeader(ctx, []int{1, 2, 3}, 3, 30*time.Second)
	return err
}

func (t *testnet) caughtUp(ctx context.Context, i int, key string, idx uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := t.seen(ctx, i, key, idx)
		if ok {
			return nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("index %d not served within %v: %v", idx, timeout, last)
}

// partition cuts a follower off from the other hosts (iptables in its
// namespace), writes through the majority, checks the follower lacks the
// writes, heals, and waits for it to catch up to the same state hash.
func (t *testnet) partition(ctx context.Context) error {
	l, err := t.leaderIndex(ctx, []int{1, 2, 3})
	if err != nil {
		return err
	}
	f := others(l)[0]
	t.result.Partitioned = nodeID(f)
	for _, o := range others(f) {
		for _, rule := range [][]string{{"INPUT", "-s"}, {"OUTPUT", "-d"}} {
			if err := inNS(f, "iptables", "-A", rule[0], rule[1], hostIP(o), "-j", "DROP"); err != nil {
				return err
			}
		}
	}
	majority := others(f)
	var key string
	var idx uint64
	for k := 0; k < 5; k++ {
		if key, idx, err = t.signup(ctx, majority[k%2], fmt.Sprintf("partitioned-%d", k)); err != nil {
			return fmt.Errorf("the majority could not write during the partition: %w", err)
		}
	}
	if ok, _ := t.seen(ctx, f, key, idx); ok {
		return fmt.Errorf("the partitioned %s served a write made during the partition", nodeID(f))
	}
	t.check("partitioned %s from the others; the majority wrote on (index %d), %s does not have it", nodeID(f), idx, nodeID(f))
	if err := inNS(f, "iptables", "-F", "INPUT"); err != nil {
		return err
	}
	if err := inNS(f, "iptables", "-F", "OUTPUT"); err != nil {
		return err
	}
	start := time.Now()
	if err := t.caughtUp(ctx, f, key, idx, 60*time.Second); err != nil {
		return fmt.Errorf("%s did not catch up after the partition healed: %w", nodeID(f), err)
	}
	t.result.CatchUpMs = time.Since(start).Milliseconds()
	// Same state hash at the same index on every node (ticks keep the
	// index moving: poll until a read of the three agrees).
	deadline := time.Now().Add(30 * time.Second)
	var views []string
	for time.Now().Before(deadline) {
		views = views[:0]
		for i := 1; i <= nodes; i++ {
			st, err := t.admin(i).State(ctx)
			if err != nil {
				views = append(views, err.Error())
				continue
			}
			views = append(views, st.AppliedIndex+" "+st.StateHash)
		}
		if views[0] == views[1] && views[1] == views[2] {
			t.check("partition healed: %s caught up in %v; all three at index and hash %s", nodeID(f), time.Since(start).Round(time.Millisecond), views[0][:min(len(views[0]), 30)])
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the nodes never agreed on one index and state hash: %v", views)
}

func (t *testnet) report() error {
	b, _ := json.MarshalIndent(t.result, "", "  ")
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("testnet: PASS: write latency under %v±%v each way (%s): p50 %.1f ms, p99 %.1f ms over %d writes; result in %s\n",
		*delay, *jitter, t.mode, t.result.P50Ms, t.result.P99Ms, t.result.Writes, *out)
	return nil
}

func (t *testnet) teardown() {
	for name, p := range t.procs {
		if p.Process != nil {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		done := make(chan struct{})
		go func() { _, _ = p.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
		}
		delete(t.procs, name)
	}
	t.teardownNetwork()
}

// teardownNetwork deletes what network() made (and nothing else).
func (t *testnet) teardownNetwork() {
	for i := 0; i <= nodes; i++ {
		_ = exec.Command("ip", "netns", "del", nsName(i)).Run()
		_ = exec.Command("ip", "link", "del", vethPrefix+strconv.Itoa(i)).Run()
	}
	_ = exec.Command("ip", "link", "del", bridge).Run()
}

func tailLog(path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	fmt.Fprintf(os.Stderr, "--- %s (last %d lines)\n%s\n", path, n, strings.Join(lines[max(0, len(lines)-n):], "\n"))
}

// runRelay accepts the connections iptables redirected to it, connects
// to their original destination (marked, so the redirect skips it) and
// copies both ways, holding every chunk for delay±jitter (in order).
func runRelay(listen string, delay, jitter time.Duration) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go relayConn(c.(*net.TCPConn), delay, jitter)
	}
}

func originalDst(c *net.TCPConn) (string, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var addr string
	var serr error
	err = raw.Control(func(fd uintptr) {
		// SO_ORIGINAL_DST (80) fills a sockaddr_in; the IPv6 mreq getter
		// is the stdlib's way to read 16 raw bytes.
		m, e := syscall.GetsockoptIPv6Mreq(int(fd), syscall.SOL_IP, 80)
		if e != nil {
			serr = e
			return
		}
		port := int(m.Multiaddr[2])<<8 | int(m.Multiaddr[3])
		addr = net.JoinHostPort(net.IP(m.Multiaddr[4:8]).String(), strconv.Itoa(port))
	})
	if err == nil {
		err = serr
	}
	return addr, err
}

func relayConn(c *net.TCPConn, delay, jitter time.Duration) {
	defer c.Close()
	dst, err := originalDst(c)
	if err != nil {
		return
	}
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, relayMark)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	up, err := d.Dial("tcp", dst)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { delayedCopy(up.(*net.TCPConn), c, delay, jitter); done <- struct{}{} }()
	go func() { delayedCopy(c, up.(*net.TCPConn), delay, jitter); done <- struct{}{} }()
	<-done
	<-done
}

// delayedCopy copies src to dst, each chunk written delay±jitter after it
// was read, never before the previous one (TCP keeps order).
func delayedCopy(dst, src *net.TCPConn, delay, jitter time.Duration) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 4096)
	go func() {
		defer close(ch)
		var last time.Time
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				d := delay
				if jitter > 0 {
					d += time.Duration(rand.Int64N(int64(2*jitter))) - jitter
				}
				at := time.Now().Add(d)
				if at.Before(last) {
					at = last
				}
				last = at
				ch <- chunk{at, buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			_ = src.Close() // unblocks the reader
			break
		}
	}
	for range ch { // drain so the reader ends
	}
	_ = dst.CloseWrite()
}
