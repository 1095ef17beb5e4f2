package cluster_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// strangerAppend sends an AppendEntries to raftAddr the way anyone who can
// reach the port could, with no credential. It is well formed: raft's main
// loop, which handles heartbeats too (node/heartbeat.go), answers one
// without a protocol version with an error, not a refusal of the peer.
func strangerAppend(t *testing.T, raftAddr string) error {
	t.Helper()
	tr, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 1, 2*time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var resp raft.AppendEntriesResponse
	return tr.AppendEntries("x", raft.ServerAddress(raftAddr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte("127.0.0.1:1")}, Term: 1}, &resp)
}

// TestPlainRaftRefusesAStranger: without TLS, raft still speaks only to
// holders of the cluster secret (node/secret_stream.go); loopback is
// reachable by every user of the host.
func TestPlainRaftRefusesAStranger(t *testing.T) {
	c := clustertest.Start(t, 1)
	if err := strangerAppend(t, c.Leader().RaftAddr); err == nil {
		t.Fatal("plain raft answered a stranger")
	}
}

func TestTLSClusterReplicatesAndRefusesStrangers(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.TLS())
	leader := c.Leader()
	f := c.Followers()[0]
	before, _, _ := leader.Node.StateHash(context.Background())
	propose(t, f.Node, "through-a-follower") // forwarded over mutual TLS
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Admin(f.ID).Status(ctx(t)); err != nil || len(st.Members) != 3 {
		t.Fatalf("operator status over TLS: %+v %v", st, err)
	}

	// Raft: a plain TCP peer gets no answer at all.
	if err := strangerAppend(t, leader.RaftAddr); err == nil {
		t.Fatal("TLS raft answered a plain TCP AppendEntries")
	}
	// Raft: TLS without a client certificate, with an operator's (no
	// serverAuth usage), or with a node certificate of another CA fails.
	other, err := node.NewCA("another cluster")
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.PeerTLS("node9", true)
	operator, _ := c.CA.PeerTLS("op", false)
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	member, _ := c.CA.PeerTLS("node9", true)
	if err := tlsExchange(leader.RaftAddr, member.ClientConfig()); err != nil {
		t.Fatalf("raft refused a node certificate of its own CA: %v", err)
	}
	for name, cfg := range map[string]*tls.Config{"no certificate": noCert, "operator certificate": operator.ClientConfig(), "foreign CA": foreign.ClientConfig()} {
		if err := tlsExchange(leader.RaftAddr, cfg); err == nil {
			t.Errorf("raft accepted a TLS peer with %s", name)
		}
	}
	// Admin listener: plain HTTP and TLS without a certificate fail.
	if resp, err := http.Get("http://" + leader.AdminAddr + "/admin/status"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("admin listener answered plain HTTP")
		}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}}
	if resp, err := hc.Get("https://" + leader.AdminAddr + "/admin/status"); err == nil {
		resp.Body.Close()
		t.Fatalf("admin listener answered a client without certificate: %d", resp.StatusCode)
	}
	if after, _, _ := leader.Node.StateHash(context.Background()); after <= before {
		t.Fatalf("applied index %d did not move past %d", after, before)
	}
}

// dialStream is a raft stream layer that dials with a given TLS config, to
// send real raft RPCs as a peer holding that certificate would.
type dialStream struct {
	net.Listener
	cfg *tls.Config
}

func (d dialStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), d.cfg)
}

// tlsExchange sends an AppendEntries over TLS with cfg; nil means the node
// answered it.
func tlsExchange(addr string, cfg *tls.Config) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	tr := raft.NewNetworkTransportWithLogger(dialStream{ln, cfg}, 1, 2*time.Second, hclog.NewNullLogger())
	defer tr.Close()
	var resp raft.AppendEntriesResponse
	return tr.AppendEntries("x", raft.ServerAddress(addr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte("127.0.0.1:1")}, Term: 1}, &resp)
}

func TestForwardRefusesLeaderOnlyCommands(t *testing.T) {
	c := clustertest.Start(t, 2)
	leader, f := c.Leader(), c.Followers()[0]
	leaderOnly := []fsm.CmdType{fsm.CmdDepositSettled, fsm.CmdWithdrawalResult, fsm.CmdOraclePrint,
		fsm.CmdGenesis, fsm.CmdMarketsGenesis, fsm.CmdTick}
	for _, typ := range leaderOnly {
		cmd := &fsm.Command{Type: typ, IdemKey: "forged", ReqHash: []byte{1}, Payload: []byte{0xa0}}
		body, err := fsm.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		// A member's own credential: the refusal is by type, not identity.
		req, _ := http.NewRequest(http.MethodPost, f.Node.PeerURL(leader.AdminAddr, node.ForwardPath), bytes.NewReader(body))
		f.Node.SetPeerAuth(req)
		resp, err := f.Node.PeerClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "may not be forwarded") {
			t.Fatalf("forwarded command type %d: %d %q, want 403", typ, resp.StatusCode, b)
		}
		// And a follower's own Propose fails at once instead of forwarding.
		start := time.Now()
		if _, err := f.Node.Propose(ctx(t), cmd); !errors.Is(err, node.ErrLeaderOnly) {
			t.Fatalf("follower proposing type %d: %v", typ, err)
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("a leader-only propose on a follower waited %v", time.Since(start))
		}
	}
	propose(t, f.Node, "client-writes-still-forward")
}

// strangerNode is a node with a cluster secret of its own.
func strangerNode(t *testing.T) *node.Node {
	t.Helper()
	n, err := node.New(node.Config{ID: "stranger", DataDir: t.TempDir(), RaftAddr: clustertest.FreeAddr(t),
		AdminAddr: clustertest.FreeAddr(t), ClusterSecret: node.NewClusterSecret(), Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return n
}

func TestJoinWithAnotherClusterSecretIsRefused(t *testing.T) {
	c := clustertest.Start(t, 1)
	stranger := strangerNode(t)
	err := cluster.JoinNode(ctx(t), stranger, c.Leader().AdminAddr)
	if !errors.Is(err, cluster.ErrJoinRefused) || !strings.Contains(err.Error(), "cluster secret mismatch") {
		t.Fatalf("join with another secret: %v", err)
	}
	if ms, _ := c.Leader().Node.Members(); len(ms) != 1 {
		t.Fatalf("members after a refused join: %+v", ms)
	}
}

// TestCheckSameClusterNamesAnotherSecret: a node that restarts with
// --join but already holds raft state does not join again; serve asks
// the --join member instead, and stops on this refusal (its data
// directory is another cluster's). A member of the same cluster passes.
func TestCheckSameClusterNamesAnotherSecret(t *testing.T) {
	c := clustertest.Start(t, 2)
	err := cluster.CheckSameCluster(ctx(t), strangerNode(t), c.Leader().AdminAddr)
	if !errors.Is(err, cluster.ErrJoinRefused) || !strings.Contains(err.Error(), "cluster secret mismatch") {
		t.Fatalf("another secret: %v", err)
	}
	if err := cluster.CheckSameCluster(ctx(t), c.Followers()[0].Node, c.Leader().AdminAddr); err != nil {
		t.Fatalf("a member of the same cluster: %v", err)
	}
}

// TestJoinWithTheWrongTLSIsRefusedAtOnce: a joiner without TLS against a
// TLS cluster, or with a certificate from another CA, could never join,
// yet it retried silently for two minutes and then ran on outside the
// cluster (operator audit, 2026-11-29). Each is now a refusal at the first
// attempt that names the flags to fix.
func TestJoinWithTheWrongTLSIsRefusedAtOnce(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.TLS())
	other, err := node.NewCA("another cluster")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.PeerTLS("node9", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tls  *node.PeerTLS
		want string
	}{
		{"no TLS", nil, "--tls-cert"},
		{"another CA", foreign, "different cluster CAs"},
		{"another CA's certificate, this cluster's CA", mixedTLS(t, other, c.CA), "refused this node's certificate"},
	} {
		n, err := node.New(node.Config{ID: "node9", DataDir: t.TempDir(), RaftAddr: clustertest.FreeAddr(t),
			AdminAddr: clustertest.FreeAddr(t), ClusterSecret: c.Secret, TLS: tc.tls, Logger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		jctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		err = cluster.JoinNode(jctx, n, c.Leader().AdminAddr)
		cancel()
		_ = n.Shutdown()
		if !errors.Is(err, cluster.ErrJoinRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want a refusal naming %q", tc.name, err, tc.want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("%s: refused after %v, not at the first attempt", tc.name, took)
		}
	}
	if ms, _ := c.Leader().Node.Members(); len(ms) != 1 {
		t.Fatalf("members after the refused joins: %+v", ms)
	}
	// And a joiner with TLS against a cluster without it.
	plain := clustertest.Start(t, 1)
	withTLS, err := c.CA.PeerTLS("node9", true)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{ID: "node9", DataDir: t.TempDir(), RaftAddr: clustertest.FreeAddr(t),
		AdminAddr: clustertest.FreeAddr(t), ClusterSecret: plain.Secret, TLS: withTLS, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if err := cluster.JoinNode(ctx(t), n, plain.Leader().AdminAddr); !errors.Is(err, cluster.ErrJoinRefused) || !strings.Contains(err.Error(), "does not speak TLS") {
		t.Fatalf("a TLS joiner of a cluster without TLS: %v", err)
	}
}

// mixedTLS is a node certificate from issuer that trusts the CA trusted:
// the member accepts the joiner's server check but refuses its certificate.
func mixedTLS(t *testing.T, issuer, trusted *node.CA) *node.PeerTLS {
	t.Helper()
	mine, err := issuer.WriteFiles(t.TempDir(), "node9", true)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := trusted.WriteFiles(t.TempDir(), "node8", true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := node.LoadPeerTLS(mine.Cert, mine.Key, theirs.CA)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
