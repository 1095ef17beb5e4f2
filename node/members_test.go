package node_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

func freeRaftAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestInConfigurationTellsJoinedFromFresh: `serve --join` joins whenever
// the node is not in the configuration, so a failed first join is retried
// on the next start.
func TestInConfigurationTellsJoinedFromFresh(t *testing.T) {
	log := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	fresh, err := node.New(node.Config{ID: "fresh", DataDir: t.TempDir(), RaftAddr: freeRaftAddr(t), AdminToken: "t", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Shutdown()
	if fresh.InConfiguration() {
		t.Fatal("a node that never bootstrapped or joined is not in a configuration")
	}
	boot, err := node.New(node.Config{ID: "boot", DataDir: t.TempDir(), RaftAddr: freeRaftAddr(t), AdminToken: "t", Bootstrap: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer boot.Shutdown()
	deadline := time.Now().Add(5 * time.Second)
	for !boot.InConfiguration() {
		if time.Now().After(deadline) {
			t.Fatal("a bootstrapped node is in its own configuration")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func nodeRecord(n *node.Node, id string) bool {
	var ok bool
	n.Machine().Read(func(st *fsm.State, _ uint64) { _, ok = st.Nodes[id] })
	return ok
}

// A removed member's advertised addresses leave the state with it.
func TestRemoveDropsTheNodeRecord(t *testing.T) {
	c := clustertest.Start(t, 3)
	gone := c.Followers()[0].ID
	c.Remove(gone)
	for _, m := range c.Live() {
		if !clustertest.Poll(10*time.Second, func() bool { return !nodeRecord(m.Node, gone) }) {
			t.Fatalf("%s still records removed member %s", m.ID, gone)
		}
	}
	// The members' own records stay.
	for _, m := range c.Live() {
		for _, o := range c.Live() {
			if !nodeRecord(m.Node, o.ID) {
				t.Fatalf("%s lost the record of member %s", m.ID, o.ID)
			}
		}
	}
}

// Records of ids outside the configuration (a removal whose own cleanup
// failed, a removed node that re-announced itself) are dropped by the
// leader once the grace has passed; members are never touched.
func TestLeaderDropsRecordsOfNonMembers(t *testing.T) {
	old := node.NodeRecordGrace
	node.NodeRecordGrace = 300 * time.Millisecond
	t.Cleanup(func() { node.NodeRecordGrace = old })
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	res, err := leader.Node.ProposeInternal(fsm.CmdNodeMeta, fsm.NodeMeta{ID: "ghost", Raft: "127.0.0.1:1", HTTP: "h", Admin: "a"})
	if err != nil || !res.OK() {
		t.Fatalf("announce ghost: %v %+v", err, res)
	}
	if !nodeRecord(leader.Node, "ghost") {
		t.Fatal("the ghost's record was not applied")
	}
	for _, m := range c.Live() {
		if !clustertest.Poll(15*time.Second, func() bool { return !nodeRecord(m.Node, "ghost") }) {
			t.Fatalf("%s still records the non-member ghost", m.ID)
		}
		for _, o := range c.Live() {
			if !nodeRecord(m.Node, o.ID) {
				t.Fatalf("%s lost the record of member %s", m.ID, o.ID)
			}
		}
	}
}
