package cluster_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
)

// TestRestoreOfAnotherDeploymentsSnapshotIsRefused: a `local` cluster's
// backup restored into a `testnet` cluster was installed (a testnet's
// faucet-funded balances would as well be into prod), and from then on
// every member refused to restart: its --deployment no longer matched the
// restored genesis. It is refused before anything is installed.
func TestRestoreOfAnotherDeploymentsSnapshotIsRefused(t *testing.T) {
	other := clustertest.Start(t, 1, clustertest.Deployment("local"))
	var snap bytes.Buffer
	if _, err := other.Admin(other.Leader().ID).Snapshot(ctx(t), &snap, nil); err != nil {
		t.Fatal(err)
	}
	other.Stop()

	c := clustertest.Start(t, 1)
	leader := c.Leader()
	propose(t, leader.Node, "acct:before-restore")
	_, err := c.Admin(leader.ID).Restore(ctx(t), snap.Bytes())
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "--deployment local") {
		t.Fatalf("restoring a local cluster's snapshot into a testnet one: %v", err)
	}
	if strings.Contains(err.Error(), "{") {
		t.Fatalf("the refusal shows the raw JSON body: %v", err)
	}
	leader.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.Genesis == nil || st.Genesis.Deployment != "testnet" {
			t.Fatalf("genesis after the refused restore: %+v", st.Genesis)
		}
	})
	if !hasKey(leader.Node, "acct:before-restore") {
		t.Fatal("the refused restore replaced the state")
	}
}

// TestRestoreAboveTheClustersLevelAsksEveryMember: a snapshot above the
// cluster's feature level is a raise; it was installed without asking the
// members, so a member whose build implements less refused the install
// (or halted replaying the raise). Like the raise, it is refused while a
// member does not say it implements the level.
func TestRestoreAboveTheClustersLevelAsksEveryMember(t *testing.T) {
	newer := clustertest.Start(t, 1)
	var snap bytes.Buffer
	if _, err := newer.Admin(newer.Leader().ID).Snapshot(ctx(t), &snap, nil); err != nil {
		t.Fatal(err)
	}
	newer.Stop()

	c := clustertest.Start(t, 3, clustertest.GenesisAtLevelZero())
	down := c.Followers()[0]
	c.Kill(down.ID)
	leader := c.Leader()
	_, err := c.Admin(leader.ID).Restore(ctx(t), snap.Bytes())
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), down.ID) {
		t.Fatalf("restoring a level %d snapshot into a level 0 cluster with %s down: %v", fsm.FeatureLevel, down.ID, err)
	}
	leader.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.FeatureLevel != 0 {
			t.Fatalf("feature level %d after the refused restore", st.FeatureLevel)
		}
	})
	// With every member answering, it is the raise the members implement.
	c.Restart(down.ID)
	if _, err := c.Admin(leader.ID).Restore(ctx(t), snap.Bytes()); err != nil {
		t.Fatalf("restore with every member up: %v", err)
	}
}
