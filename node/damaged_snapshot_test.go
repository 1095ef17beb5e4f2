package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

// The newest snapshot damaged on disk (its CRC fails) and the log compacted
// past the older one raft falls back to: the node cannot rebuild its state.
// raft panicked inside New ("log not found"), taking the process down with
// a message that names neither the snapshot nor the way out. New refuses
// the start with an error that does.
func TestStartRefusesADamagedSnapshotTheLogDoesNotCover(t *testing.T) {
	dir := t.TempDir()
	cfg := node.Config{ID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", Bootstrap: true, AdminToken: "t",
		SnapshotThreshold: 1 << 30, TrailingLogs: 2, Logger: hclog.NewNullLogger()}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !n.IsLeader() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for round := range 2 {
		for i := range 20 {
			propose(t, n, noop(fmt.Sprintf("r%d-%d", round, i)))
		}
		_, rc, err := n.TakeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshots", "*"))
	if err != nil || len(snaps) != 2 {
		t.Fatalf("snapshots %v, %v", snaps, err)
	}
	newest := snaps[len(snaps)-1] // names sort by term, then index
	if err := os.Truncate(filepath.Join(newest, "state.bin"), 10); err != nil {
		t.Fatal(err)
	}
	var again *node.Node
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		again, err = node.New(cfg)
	}()
	if err == nil {
		_ = again.Shutdown()
		t.Fatal("a node whose newest snapshot is damaged and whose log starts after the older one started")
	}
	if strings.HasPrefix(err.Error(), "panic") || !strings.Contains(err.Error(), "snapshot") || !strings.Contains(err.Error(), "data directory") {
		t.Fatalf("the refusal names neither the damaged snapshot nor the way out: %v", err)
	}
	// The failed start released the data directory: a retry fails the same
	// way rather than hanging on the store's lock.
	if _, err2 := node.New(cfg); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("retry: %v, first: %v", err2, err)
	}
}
