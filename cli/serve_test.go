package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// serveWith runs `perpd serve ARGS` in process with an already cancelled
// context: a start that passes every check serves and stops at once (nil),
// a refused one returns its reason.
func serveWith(t *testing.T, args ...string) error {
	t.Helper()
	return executeServe(t, serveCmd(), nil, args)
}

// executeServe runs cmd (serve, or a root holding it when prefix is
// {"serve"}) with prefix, a fresh bootstrapping loopback node's flags and
// args, in a context already cancelled: the flags are checked, the node
// starts and stops at once.
func executeServe(t *testing.T, cmd *cobra.Command, prefix, args []string) error {
	t.Helper()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	base := append(prefix, "--data", t.TempDir(), "--bootstrap", "--http", clustertest.FreeAddr(t), "--raft", clustertest.FreeAddr(t),
		"--admin", clustertest.FreeAddr(t), "--log-level", "error")
	cmd.SetArgs(append(base, args...))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return cmd.ExecuteContext(ctx)
}

func TestServeChecksItsFlagsBeforeStarting(t *testing.T) {
	if err := serveWith(t); err != nil {
		t.Fatalf("a plain loopback start: %v", err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"prod on the simulated rail", []string{"--deployment", "prod"}, "real payment rail"},
		{"an unknown deployment", []string{"--deployment", "staging"}, "bench, local, testnet or prod"},
		{"raft on every interface without TLS", []string{"--raft", "0.0.0.0:0"}, "--tls-cert"},
		{"admin on a non-loopback address without TLS", []string{"--admin", "[::]:0"}, "--tls-cert"},
		{"admin token on argv", []string{"--admin-token", "s3cret"}, "--admin-token-file"},
		{"bad trusted proxy", []string{"--trusted-proxies", "10.0.0.0/8,not-an-ip"}, "--trusted-proxies"},
		{"half the TLS flags", []string{"--tls-cert", "x.pem"}, "go together"},
		{"a group linger past its bound", []string{"--group-linger", "1s"}, "--group-linger"},
		{"an apply archive on prod", []string{"--deployment", "prod", "--apply-archive", "a.jsonl"}, "--apply-archive"},
		{"a faucet grant past a bitcoin", []string{"--faucet-grant-sats", "100000001"}, "--faucet-grant-sats"},
		{"a negative faucet grant", []string{"--faucet-grant-sats", "-1"}, "--faucet-grant-sats"},
		{"a shifted clock on prod", []string{"--deployment", "prod", "--clock-offset", "1m"}, "--clock-offset"},
		{"a clock shifted past a day", []string{"--clock-offset", "25h"}, "--clock-offset"},
	}
	for _, tc := range cases {
		if err := serveWith(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	if err := serveWith(t, "--deployment", "bench"); err != nil {
		t.Fatalf("the bench profile: %v", err)
	}
	if err := serveWith(t, "--clock-offset", "-30m"); err != nil {
		t.Fatalf("a shifted clock: %v", err)
	}
	if err := serveWith(t, "--group-linger", "-1ms"); err != nil {
		t.Fatalf("group linger off: %v", err)
	}
	if err := serveWith(t, "--trusted-proxies", "10.0.0.0/8, 192.168.1.7"); err != nil {
		t.Fatalf("valid trusted proxies: %v", err)
	}
}

func TestServeNeedsTheClusterSecretToJoin(t *testing.T) {
	err := serveWith(t, "--bootstrap=false", "--join", clustertest.FreeAddr(t))
	if err == nil || !strings.Contains(err.Error(), "cluster-secret") {
		t.Fatalf("join without a cluster secret: %v", err)
	}
}

func TestPayInvoiceRouteOnlyOffProd(t *testing.T) {
	for _, dep := range []string{"testnet", "local", "bench", "prod"} {
		n, err := node.New(node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: clustertest.FreeAddr(t), AdminAddr: "127.0.0.1:1",
			Bootstrap: true, Deployment: dep, AdminToken: "tok", Logger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		p := &Parts{Node: n, Admin: cluster.NewAdminServer(n)}
		if err := wireRail(p); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://x"+PayInvoicePath, strings.NewReader(`{`))
		req.Header.Set("Authorization", "Bearer tok")
		rec := &recorder{header: http.Header{}}
		p.Admin.ServeHTTP(rec, req)
		_ = n.Shutdown()
		if found := rec.code != http.StatusNotFound; found != (dep != "prod") {
			t.Errorf("%s: POST %s answered %d", dep, PayInvoicePath, rec.code)
		}
	}
}

type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// startServers serves h on loopback with the timeouts t, as serve does.
func startServers(t *testing.T, h http.Handler, to cluster.Timeouts) string {
	t.Helper()
	addr := clustertest.FreeAddr(t)
	servers, err := listen(hclog.NewNullLogger(), to, endpoint{addr: addr, h: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = servers[0].Close() })
	return addr
}

func TestSlowHeadersAreCutOff(t *testing.T) {
	addr := startServers(t, http.NotFoundHandler(), cluster.DefaultTimeouts)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan time.Duration, 1)
	began := time.Now()
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes
		closed <- time.Since(began)
	}()
	header := "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 60) + "\r\n\r\n"
	limit := 2 * cluster.DefaultTimeouts.ReadHeader
	for i := 0; i < len(header); i++ {
		select {
		case d := <-closed:
			t.Logf("closed after %v and %d bytes", d, i)
			return
		case <-time.After(time.Second): // the attack: a byte a second
		}
		if time.Since(began) > limit {
			t.Fatalf("a slow-headers client still connected after %v", time.Since(began))
		}
		_, _ = conn.Write([]byte{header[i]})
	}
	t.Fatal("the whole header was accepted a byte a second")
}

func TestSlowBodyIsCutOff(t *testing.T) {
	to := cluster.Timeouts{ReadHeader: time.Second, Read: 2 * time.Second, Write: 2 * time.Second, Idle: time.Second}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	conn, err := net.Dial("tcp", startServers(t, h, to))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"))
	began := time.Now()
	for time.Since(began) < 10*to.Read {
		if _, err := conn.Write([]byte("a")); err != nil {
			return // closed by the server
		}
		_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := conn.Read(make([]byte, 1)); err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
			return // the server answered or closed
		}
	}
	t.Fatalf("a slow-body client still connected after %v", time.Since(began))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestWebSocketOutlivesTheServerTimeouts(t *testing.T) {
	n, err := node.New(node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: clustertest.FreeAddr(t), AdminAddr: "127.0.0.1:1",
		HTTPAddr: "127.0.0.1:2", Bootstrap: true, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	asm, err := Build(n, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	asm.Run(ctx)
	to := cluster.Timeouts{ReadHeader: 500 * time.Millisecond, Read: 500 * time.Millisecond, Write: 500 * time.Millisecond, Idle: 500 * time.Millisecond}
	addr := startServers(t, asm.API, to)
	// The API serves nothing from the state before the genesis applies.
	if !clustertest.Poll(10*time.Second, func() bool {
		var ok bool
		n.Machine().Read(func(st *fsm.State, _ uint64) { ok = st.Genesis != nil })
		return ok
	}) {
		t.Fatal("no genesis")
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// The scenario is the passing of time: every server timeout elapses
	// several times over while the socket is quiet.
	time.Sleep(4 * to.Read)
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"no-such-op"}`)); err != nil {
		t.Fatalf("write after the timeouts: %v", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read after the timeouts: %v", err)
		}
		var f map[string]any
		_ = json.Unmarshal(b, &f)
		if f["op"] == "error" {
			return
		}
	}
}

// TestServeRefusesADeploymentOtherThanTheClustersGenesis: the rate budgets
// are the leader's (a follower forwards its draws there), sized by the
// leader's own --deployment profile. A member of a testnet cluster started
// with --deployment bench (an environment file left from a load test)
// served 1000x budgets to the whole cluster whenever it led. A node whose
// profile is not the one its cluster's genesis records stops, naming both.
func TestServeRefusesADeploymentOtherThanTheClustersGenesis(t *testing.T) {
	data := t.TempDir()
	run := func(d time.Duration, deployment string) error {
		cmd := serveCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"--data", data, "--bootstrap", "--http", clustertest.FreeAddr(t), "--raft", clustertest.FreeAddr(t),
			"--admin", clustertest.FreeAddr(t), "--log-level", "error", "--deployment", deployment})
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return cmd.ExecuteContext(ctx)
	}
	// Long enough for the first tick to propose genesis.
	if err := run(3*time.Second, "testnet"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := run(10*time.Second, "bench")
	if err == nil || !strings.Contains(err.Error(), `"testnet"`) || !strings.Contains(err.Error(), `"bench"`) {
		t.Fatalf("a testnet cluster's node started as bench: %v", err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("the refusal took %v", took)
	}
	if err := run(2*time.Second, "testnet"); err != nil {
		t.Fatalf("its own deployment again: %v", err)
	}
}

// TestServeRefusesATakenListenerBeforeTouchingRaft: the REST and admin
// listeners were bound only after raft had started, so `serve --bootstrap`
// on a taken --http port formed a cluster (and its leader proposed the
// genesis with this start's --deployment and budgets) before it refused.
// A taken or malformed listener address is now refused first, leaving no
// raft state behind.
func TestServeRefusesATakenListenerBeforeTouchingRaft(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct{ flag, addr string }{
		{"--http", taken.Addr().String()},
		{"--admin", taken.Addr().String()},
		{"--http", "127.0.0.1:70000"},
	} {
		data := t.TempDir()
		cmd := serveCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		args := []string{"--data", data, "--bootstrap", "--http", clustertest.FreeAddr(t), "--raft", clustertest.FreeAddr(t),
			"--admin", clustertest.FreeAddr(t), "--log-level", "error", tc.flag, tc.addr}
		cmd.SetArgs(args)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), tc.addr) {
			t.Errorf("%s %s: %v, want an error naming the address", tc.flag, tc.addr, err)
		}
		for _, name := range []string{"raft.db", "node-id"} {
			if _, err := os.Stat(filepath.Join(data, name)); err == nil {
				t.Errorf("%s %s: refused after raft wrote %s", tc.flag, tc.addr, name)
			}
		}
	}
}

// tlsFiles writes a new test CA's files for node id and returns them.
func tlsFiles(t *testing.T, id string) node.CertFiles {
	t.Helper()
	ca, err := node.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.WriteFiles(t.TempDir(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestServeWithTLSRefusesAnUnspecifiedAdminAddress: --admin is advertised
// to the other members (their forwarded writes and read-index calls, and
// admin commands relayed to the leader, go to it), and with TLS a node
// accepted --admin 0.0.0.0:9080: every follower then dialled 0.0.0.0,
// which is itself, instead of the leader. The raft transport already
// refuses such an address; the admin listener now does too.
func TestServeWithTLSRefusesAnUnspecifiedAdminAddress(t *testing.T) {
	files := tlsFiles(t, "node1")
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		args := append(files.Args(), "--admin", addr)
		if err := serveWith(t, args...); err == nil || !strings.Contains(err.Error(), "--admin") {
			t.Errorf("--admin %s with TLS: %v, want an error naming --admin", addr, err)
		}
	}
	if err := serveWith(t, files.Args()...); err != nil {
		t.Fatalf("TLS on loopback: %v", err)
	}
}

// TestServeWithTLSRefusesAMalformedJoinAddress: with TLS a --join without
// a port ("node1") or with one past 65535 passed the start-up checks; the
// node started outside any cluster and only its log said, every few
// seconds for two minutes, that the join failed.
func TestServeWithTLSRefusesAMalformedJoinAddress(t *testing.T) {
	files := tlsFiles(t, "node2")
	secret := filepath.Join(t.TempDir(), "cluster-secret")
	if err := node.WriteSecretFile(secret, node.NewClusterSecret()); err != nil {
		t.Fatal(err)
	}
	for _, join := range []string{"node1", "127.0.0.1:70000", ":9080"} {
		args := append(files.Args(), "--bootstrap=false", "--cluster-secret-file", secret, "--join", join)
		if err := serveWith(t, args...); err == nil || !strings.Contains(err.Error(), "--join") {
			t.Errorf("--join %s: %v, want an error naming --join", join, err)
		}
	}
}
