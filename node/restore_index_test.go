package node_test

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/node"
)

// snapshotOf writes n entries through c's leader and takes a snapshot.
func snapshotOf(t *testing.T, c *clustertest.Cluster, prefix string, n int) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	leader := c.Leader()
	for i := range n {
		propose(t, leader.Node, noop(fmt.Sprintf("%s-%d", prefix, i)))
	}
	meta, rc, err := leader.Node.TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return meta, b
}

// restoreRaw installs a snapshot through raft alone (no tick after it), so
// the applied index seen is the one the restore itself set.
func restoreRaw(t *testing.T, n *node.Node, meta *raft.SnapshotMeta, b []byte) {
	t.Helper()
	if err := n.Raft.Restore(meta, bytes.NewReader(b), time.Minute); err != nil {
		t.Fatal(err)
	}
}

// A snapshot from another cluster carries its own log's index in its
// header. The restored machine takes the index raft gives the snapshot in
// this log instead, so Applied() never runs backwards or leaps ahead.
func TestRestoreTakesTheIndexFromRaftNotTheSnapshotHeader(t *testing.T) {
	small := clustertest.Start(t, 1)
	big := clustertest.Start(t, 1)
	lowMeta, low := snapshotOf(t, small, "low", 3)
	highMeta, high := snapshotOf(t, big, "high", 300)
	if lowMeta.Index+200 > highMeta.Index {
		t.Fatalf("snapshot indexes %d and %d are too close for the test", lowMeta.Index, highMeta.Index)
	}

	// Header far below this log's index.
	n := big.Leader().Node
	before := n.Machine().Applied()
	restoreRaw(t, n, lowMeta, low)
	wantAppliedAtRestore(t, n, lowMeta.Index)
	if n.Machine().Applied() < before {
		t.Fatalf("applied index ran backwards from %d to %d", before, n.Machine().Applied())
	}
	if _, ok := record(n, "low-0"); !ok {
		t.Fatal("the restored state is not the snapshot's")
	}

	// Header far above this log's index.
	restoreRaw(t, small.Leader().Node, highMeta, high)
	wantAppliedAtRestore(t, small.Leader().Node, highMeta.Index)
}

// wantAppliedAtRestore checks the machine's applied index against raft's:
// at least the index raft gave the restored snapshot, at most what raft
// has applied since (the leader's ticks go on meanwhile).
func wantAppliedAtRestore(t *testing.T, n *node.Node, header uint64) {
	t.Helper()
	snap, err := strconv.ParseUint(n.Raft.Stats()["last_snapshot_index"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	got := n.Machine().Applied()
	raftApplied := n.Raft.AppliedIndex()
	if got < snap || got > raftApplied {
		t.Fatalf("after restoring a snapshot with header index %d: applied %d, want between raft's snapshot index %d and raft's applied %d",
			header, got, snap, raftApplied)
	}
}
