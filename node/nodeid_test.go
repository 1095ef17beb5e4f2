package node_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

func loopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// stoppedN1 starts node n1 on a new data directory, commits an entry and
// stops it, returning its configuration.
func stoppedN1(t *testing.T) node.Config {
	t.Helper()
	cfg := node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: loopbackAddr(t), Bootstrap: true,
		AdminToken: "t", ClusterSecret: "s", Logger: hclog.NewNullLogger()}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	propose(t, n, noop("k1"))
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDataDirectoryRefusesAnotherNodeID: a data directory is one member's
// raft log and vote. Started under another --id (swapped volumes, a copied
// directory) the node used to run on it as that id: votes cast twice in a
// term under two names, acknowledged entries missing from a voter. It is
// refused, naming both ids.
func TestDataDirectoryRefusesAnotherNodeID(t *testing.T) {
	cfg := stoppedN1(t)
	dir := cfg.DataDir

	other := cfg
	other.ID = "n2"
	if n, err := node.New(other); err == nil {
		_ = n.Shutdown()
		t.Fatal("node n1's data directory started as n2")
	} else if !strings.Contains(err.Error(), `"n1"`) || !strings.Contains(err.Error(), `"n2"`) {
		t.Fatalf("refusal does not name both ids: %v", err)
	}

	// A directory from a build that recorded no id: the stored raft
	// configuration names the member at this raft address.
	if err := os.Remove(filepath.Join(dir, "node-id")); err != nil {
		t.Fatal(err)
	}
	if n, err := node.New(other); err == nil {
		_ = n.Shutdown()
		t.Fatal("an unmarked data directory of n1 started as n2 at n1's raft address")
	} else if !strings.Contains(err.Error(), `"n1"`) {
		t.Fatalf("refusal does not name the member: %v", err)
	}

	// Its own id starts it (and marks the directory again).
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = n.Shutdown()
	if b, err := os.ReadFile(filepath.Join(dir, "node-id")); err != nil || strings.TrimSpace(string(b)) != "n1" {
		t.Fatalf("node-id file after restart: %q %v", b, err)
	}
}

// TestEmptyNodeIDMarkIsAnUnmarkedDirectory: a mark a crash left empty (its
// write cut short) used to refuse the start as belonging to node "" and
// tell the operator to start it as "". It is read as no mark: the stored
// raft configuration still refuses another member at this address, and
// the node's own id starts it and marks the directory again.
func TestEmptyNodeIDMarkIsAnUnmarkedDirectory(t *testing.T) {
	cfg := stoppedN1(t)
	mark := filepath.Join(cfg.DataDir, "node-id")
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	other := cfg
	other.ID = "n2"
	if n, err := node.New(other); err == nil {
		_ = n.Shutdown()
		t.Fatal("n1's directory with an empty mark started as n2 at n1's raft address")
	} else if !strings.Contains(err.Error(), `"n1"`) {
		t.Fatalf("refusal does not name the member: %v", err)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("n1 refused its own directory with an empty mark: %v", err)
	}
	_ = n.Shutdown()
	if b, err := os.ReadFile(mark); err != nil || strings.TrimSpace(string(b)) != "n1" {
		t.Fatalf("node-id file after restart: %q %v", b, err)
	}
}
