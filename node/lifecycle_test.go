package node_test

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/node"
)

func TestFailedStartReleasesTheDataDirectory(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: busy.Addr().String(), Bootstrap: true,
		AdminToken: "t", Logger: hclog.NewNullLogger()}
	if _, err := node.New(cfg); err == nil {
		t.Fatal("a start on a taken raft port must fail")
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RaftAddr = free.Addr().String()
	free.Close()

	// The retry opens the same raft store: it hangs if the failed start
	// still holds the store's file lock.
	type started struct {
		n   *node.Node
		err error
	}
	ch := make(chan started, 1)
	go func() {
		n, err := node.New(cfg)
		ch <- started{n, err}
	}()
	select {
	case s := <-ch:
		if s.err != nil {
			t.Fatal(s.err)
		}
		_ = s.n.Shutdown()
	case <-time.After(10 * time.Second):
		t.Fatal("a retried start hangs on the data directory a failed one left locked")
	}
}

func TestShutdownWithoutQuorumIsPrompt(t *testing.T) {
	// The default ProposeTimeout (5s) is what a stuck driver would hold
	// Shutdown for.
	c := clustertest.Start(t, 3)
	keep := c.Leader()
	for _, m := range c.Followers() {
		c.Kill(m.ID)
	}
	// Let the drivers run into the missing quorum.
	if !clustertest.Poll(10*time.Second, func() bool { return !keep.Node.IsLeader() }) {
		t.Fatal("a leader alone did not step down")
	}
	start := time.Now()
	c.Kill(keep.ID)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
}

// TestShutdownReportsAFailedApplyArchive: the archive keeps its first write
// error until it is closed, and Shutdown dropped what close returned, so a
// replica whose archive stopped mid-run (a full disk) looked complete to
// the harness comparing archives. Shutdown now returns it.
func TestShutdownReportsAFailedApplyArchive(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to make every archive write fail")
	}
	n, err := node.New(node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: loopbackAddr(t), Bootstrap: true,
		AdminToken: "t", ClusterSecret: "s", ApplyArchive: "/dev/full", Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	propose(t, n, noop("k1"))
	if err := n.Shutdown(); err == nil || !strings.Contains(err.Error(), "apply archive") {
		t.Fatalf("shutdown after the archive's writes failed: %v, want an error naming the apply archive", err)
	}
}
