package node_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/internal/testdisk"
)

// A leader whose disk filled stepped down at its failed append (raft's
// own rule) with a log as long as the others', and could win the next
// election: its term and vote are small writes that fit. As leader it
// failed its first append and stepped down, again and again. It now does
// not campaign while its log store cannot append, and once the disk has
// room the probe at its next campaign lets it lead again.
//
// node1 (on a small filesystem) leads; the others are made slow to
// campaign, so node1 is the only one to stand once it has stepped down:
// before the fix it was elected within a second or two (22 times in 20 s,
// each lost at its first append). The disk is freed while no other member
// leads: a leader pipelining appends to a follower that refuses one can
// stop replicating to it for good (hashicorp/raft #612), which is not what
// this test is about.
func TestANodeThatCannotAppendDoesNotLeadUntilItCan(t *testing.T) {
	var dir1 string
	c := clustertest.Start(t, 3, clustertest.PrepareData(func(id, dir string) {
		if id == "node1" {
			testdisk.MountTmpfs(t, dir, "16m")
			dir1 = dir
		}
	}))
	if c.Leader().ID != "node1" {
		if err := c.Leader().Node.TransferLeadership("node1"); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := c.WaitLeader(10 * time.Second); err != nil || l.ID != "node1" {
		t.Fatalf("node1 should lead: %v %v", l, err)
	}
	full := c.Member("node1").Node
	for _, id := range []string{"node2", "node3"} {
		r := c.Member(id).Node.Raft
		rc := r.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = 20*time.Second, 20*time.Second
		if err := r.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	var led atomic.Bool // node1 became leader since its disk filled
	full.Raft.RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if s, ok := o.Data.(raft.RaftState); ok && s == raft.Leader {
			led.Store(true)
		}
		return false
	}))

	filler := testdisk.Fill(t, dir1)
	for i := 0; full.IsLeader() && !full.StoreWriteFailing(); i++ {
		if i == 2000 {
			t.Fatal("2000 writes through a leader with a full disk, and none failed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = full.Propose(ctx, noop(fmt.Sprintf("acct1:full-%d", i)))
		cancel()
	}
	if !clustertest.Poll(5*time.Second, func() bool { return !full.IsLeader() }) {
		t.Fatal("node1 still leads after an append failed")
	}
	// node1 would stand within 1.4 s of stepping down, and again at each
	// election timeout (up to 1.4 s): 4 s covers at least two campaigns.
	// Nothing to wait for instead: a refused campaign changes nothing.
	if clustertest.Poll(4*time.Second, led.Load) {
		t.Fatal("node1 was elected while its log store could not append")
	}
	if !full.StoreWriteFailing() {
		t.Fatal("node1's store no longer fails with its disk still full: the test proves nothing")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	leader, err := c.WaitLeader(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if leader.ID != "node1" {
		t.Fatalf("%s leads, not node1, with the others slow to campaign", leader.ID)
	}
	propose(t, full, noop("acct1:node1-leads-again"))
	if full.StoreWriteFailing() {
		t.Fatal("node1 leads and appends, and its store is still reported failing")
	}
}
