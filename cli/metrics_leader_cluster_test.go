package cli_test

import (
	"context"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
)

// One handover of leadership is one change on every member's
// perpd_raft_leader_changes_total: PerpdLeaderFlapping (more than 3 in 10
// minutes) and docs/deploy.md read it as the elections a node saw.
func TestLeaderChangesCountOneHandoverOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble))
	leader := c.Leader()
	to := c.Followers()[0]
	changes := func() map[string]float64 {
		out := map[string]float64{}
		for _, m := range c.Live() {
			_, fams := scrape(t, m.AdminAddr, c.Token)
			out[m.ID], _ = sample(fams, "perpd_raft_leader_changes_total")
		}
		return out
	}
	time.Sleep(500 * time.Millisecond) // the formation's own changes are counted
	before := changes()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Admin(leader.ID).TransferLeadership(ctx, to.ID); err != nil {
		t.Fatal(err)
	}
	if !clustertest.Poll(10*time.Second, func() bool {
		for _, m := range c.Live() {
			if _, id := m.Node.Raft.LeaderWithID(); string(id) != to.ID {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the members never agreed on the new leader")
	}
	time.Sleep(500 * time.Millisecond)
	after := changes()
	for id, v := range after {
		if d := v - before[id]; d != 1 {
			t.Errorf("%s counted %v leader changes for one handover (%v -> %v), want 1", id, d, before[id], v)
		}
	}
}
