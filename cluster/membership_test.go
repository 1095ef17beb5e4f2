package cluster_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/node"
)

func voters(t testing.TB, n *node.Node) map[string]string {
	t.Helper()
	members, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range members {
		if m.Suffrage == "Voter" {
			out[m.ID] = m.Raft
		}
	}
	return out
}

func TestRemovedMemberReaddedWithWipedDataConverges(t *testing.T) {
	for _, which := range []string{"follower", "leader"} {
		t.Run("remove the "+which, func(t *testing.T) {
			// The raft log a member holds when its node is created, before it
			// starts or joins: a wiped member holds none.
			var readding atomic.Bool
			var lastIndexAtStart atomic.Uint64
			c := clustertest.Start(t, 3, clustertest.OnNode(func(n *node.Node) {
				if readding.Load() {
					lastIndexAtStart.Store(n.Raft.LastIndex())
				}
			}))
			victim := c.Leader()
			if which == "follower" {
				victim = c.Followers()[0]
			}
			for i := range 5 {
				propose(t, c.Leader().Node, fmt.Sprintf("acct:before-%d", i))
			}
			c.Remove(victim.ID)
			leader := c.Leader()
			if leader.ID == victim.ID {
				t.Fatal("a removed member leads")
			}
			if v := voters(t, leader.Node); len(v) != 2 || v[victim.ID] != "" {
				t.Fatalf("voters after remove: %v", v)
			}
			// Two voters out of two: writes still commit.
			for _, m := range c.Live() {
				for i := range 5 {
					propose(t, m.Node, fmt.Sprintf("acct:while-removed-%s-%d", m.ID, i))
				}
			}

			readding.Store(true)
			m := c.Add(victim.ID)
			readding.Store(false)
			if got := lastIndexAtStart.Load(); got != 0 {
				t.Fatalf("a wiped node starts with a raft log up to index %d", got)
			}
			leader = c.Leader()
			if v := voters(t, leader.Node); len(v) != 3 || v[victim.ID] != m.RaftAddr {
				t.Fatalf("voters after re-add: %v", v)
			}
			if err := c.WaitConverged(20 * time.Second); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if !hasKey(m.Node, fmt.Sprintf("acct:before-%d", i)) {
					t.Fatalf("re-added node misses write %d made before its removal", i)
				}
			}
			for _, o := range c.Live() {
				if o == m {
					continue
				}
				for i := range 5 {
					if !hasKey(m.Node, fmt.Sprintf("acct:while-removed-%s-%d", o.ID, i)) {
						t.Fatalf("re-added node misses a write made while it was out")
					}
				}
			}
			// And it takes writes itself.
			propose(t, m.Node, "acct:through-readded")
		})
	}
}
