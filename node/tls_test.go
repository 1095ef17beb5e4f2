package node

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node/rail"
)

func TestRequireLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:7080": true, "127.0.0.12:7080": true, "[::1]:7080": true, "localhost:7080": true,
		"0.0.0.0:7080": false, "[::]:7080": false, ":7080": false, "192.168.1.10:7080": false, "10.0.0.1:0": false,
	} {
		err := RequireLoopback("raft address", addr)
		if (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--tls-cert") {
			t.Errorf("%s: the refusal does not name the flag: %v", addr, err)
		}
	}
}

func TestNewRefusesNonLoopbackWithoutTLS(t *testing.T) {
	for _, cfg := range []Config{
		{RaftAddr: "0.0.0.0:0", AdminAddr: "127.0.0.1:1"},
		{RaftAddr: "127.0.0.1:0", AdminAddr: "0.0.0.0:9080"},
	} {
		cfg.ID, cfg.DataDir, cfg.Logger = "n", t.TempDir(), hclog.NewNullLogger()
		n, err := New(cfg)
		if err == nil {
			_ = n.Shutdown()
			t.Fatalf("raft %s admin %s started without TLS", cfg.RaftAddr, cfg.AdminAddr)
		}
		if !strings.Contains(err.Error(), "--tls-cert") {
			t.Fatalf("refusal does not name the flag: %v", err)
		}
	}
}

// The keys every member must agree on come from the cluster secret alone,
// one label each; the operator's admin token plays no part in them.
func TestDerivedKeysArePerPurposeAndIgnoreTheAdminToken(t *testing.T) {
	secret := NewClusterSecret()
	a, err := deriveKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := deriveKeys(secret)
	if a.peerBearer != b.peerBearer || !bytes.Equal(a.confirmMAC, b.confirmMAC) || !bytes.Equal(a.railNode, b.railNode) {
		t.Fatal("the same secret derived different keys")
	}
	keys := [][]byte{[]byte(a.peerBearer), a.confirmMAC, a.railNode, []byte(a.fingerprint), a.raftStream}
	for i := range keys {
		for j := range keys {
			if i != j && bytes.Contains(keys[i], keys[j][:8]) {
				t.Fatalf("keys %d and %d share material", i, j)
			}
		}
	}
	other, _ := deriveKeys(NewClusterSecret())
	if other.peerBearer == a.peerBearer || bytes.Equal(other.railNode, a.railNode) {
		t.Fatal("another secret derived the same keys")
	}
	n1 := newTestNode(t, "tok-1", secret)
	n2 := newTestNode(t, "tok-2", secret)
	if !bytes.Equal(n1.ConfirmKey(), n2.ConfirmKey()) || !bytes.Equal(n1.RailNodeKey(), n2.RailNodeKey()) {
		t.Fatal("members with their own admin tokens disagree on the shared keys")
	}
	fromToken, _ := rail.NodeKeyFromSecret("tok-1")
	if bytes.Equal(n1.RailNodeKey(), fromToken) {
		t.Fatal("the rail key comes from the admin token")
	}
}

func newTestNode(t *testing.T, token, secret string) *Node {
	t.Helper()
	n, err := New(Config{ID: "n", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", AdminToken: token, ClusterSecret: secret,
		Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return n
}

func TestSecretFilesMustBePrivate(t *testing.T) {
	p := t.TempDir() + "/s"
	if err := WriteSecretFile(p, "x"); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadSecretFile(p); err != nil || s != "x" {
		t.Fatalf("%q %v", s, err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecretFile(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable secret file: %v", err)
	}
}

// TestTLSKeyFileMustBePrivate: the admin token, the cluster secret and the
// metrics token are refused when other users may read them, but a TLS
// private key (a node's, or the operator's for `perpd admin`) was loaded
// at any mode: with mode 0644 anyone on the host could take it and act as
// a member or as the operator on the cluster's mutual TLS.
func TestTLSKeyFileMustBePrivate(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteFiles(t.TempDir(), "node1", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPeerTLS(f.Cert, f.Key, f.CA); err != nil {
		t.Fatalf("a 0600 key: %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		if err := os.Chmod(f.Key, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPeerTLS(f.Cert, f.Key, f.CA); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("a key with mode %v: %v", mode, err)
		}
	}
	// The certificates are public: their modes do not matter.
	if err := os.Chmod(f.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f.Cert, f.CA} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadPeerTLS(f.Cert, f.Key, f.CA); err != nil {
		t.Fatalf("public certificates with a private key: %v", err)
	}
}

// TestDataDirectoryIsMadePrivate: a data directory that already existed
// with mode 0755 (`mkdir data` under the usual umask, then serve --data
// data) was kept so, and raft writes its snapshots 0644 in a 0755
// directory: every user of the host could read the whole state (every
// balance and position, and the key hashes that key each account's Proof
// of Reserves tag). The node makes its data directory 0700.
func TestDataDirectoryIsMadePrivate(t *testing.T) {
	dir := t.TempDir() + "/data"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	n, err := New(Config{ID: "n", DataDir: dir, RaftAddr: "127.0.0.1:0", AdminToken: "t", Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("data directory mode %v, want 0700", fi.Mode().Perm())
	}
}

// A secret file (the cluster secret, the admin token, the node-id mark, a
// TLS key) is synced before it replaces the old one and its directory
// after: renamed unsynced, a power loss can leave it empty, and a cluster
// secret lost so cannot be made again. A failed sync is an error, and the
// old file stays until the new one is on disk.
func TestSecretFileWriteSyncsAndKeepsTheOldFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cluster-secret")
	if err := WriteSecretFile(p, "old"); err != nil {
		t.Fatal(err)
	}
	var synced []string
	failOn := ""
	syncFile = func(f *os.File) error {
		synced = append(synced, f.Name())
		if failOn != "" && (f.Name() == failOn || strings.HasPrefix(filepath.Base(f.Name()), failOn)) {
			return syscall.EIO
		}
		return f.Sync()
	}
	t.Cleanup(func() { syncFile = (*os.File).Sync })
	if err := WriteSecretFile(p, "new"); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || filepath.Dir(synced[0]) != dir || synced[1] != dir {
		t.Fatalf("synced %q, want the temporary file in %s, then the directory", synced, dir)
	}
	failOn = ".cluster-secret.tmp-"
	if err := WriteSecretFile(p, "newer"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failed sync of the new file: %v", err)
	}
	if s, err := ReadSecretFile(p); err != nil || s != "new" {
		t.Fatalf("after a failed write the file holds %q (%v), want the previous %q", s, err, "new")
	}
	failOn = dir
	if err := WriteSecretFile(p, "newest"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failed sync of the directory: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %q", left)
	}
}
