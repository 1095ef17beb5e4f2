package cluster_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
)

// TestFeatureLevelRaisedOnceEveryMemberImplementsIt walks the rolling
// upgrade's last step on a live cluster: every member answers the level
// its build implements; while the state records a node the leader cannot
// vouch for (here a record of a node outside the configuration, as an old
// build's would be) the raise is refused naming it; once it is gone the
// raise, sent to a follower, is relayed to the leader and applies on every
// replica; raising again, or past this build, is refused.
func TestFeatureLevelRaisedOnceEveryMemberImplementsIt(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.GenesisAtLevelZero())
	follower := c.Admin(c.Followers()[0].ID)
	var v cluster.FeatureLevelView
	if !clustertest.Poll(10*time.Second, func() bool {
		if err := follower.Do(ctx(t), http.MethodGet, "/admin/feature-level", nil, &v); err != nil {
			return false
		}
		return len(v.Members) == 3 && v.Raisable != nil && *v.Raisable == fsm.FeatureLevel
	}) {
		t.Fatalf("members never all answered level %d: %+v", fsm.FeatureLevel, v)
	}
	if v.FeatureLevel != 0 || v.BuildLevel != fsm.FeatureLevel {
		t.Fatalf("a new cluster: %+v", v)
	}

	// A node record from a build before feature levels.
	res, err := c.Leader().Node.ProposeInternal(fsm.CmdNodeMeta, fsm.NodeMeta{ID: "old-build", Raft: "127.0.0.1:1"})
	if err != nil || !res.OK() {
		t.Fatalf("old record: %+v %v", res, err)
	}
	err = follower.Do(ctx(t), http.MethodPost, "/admin/feature-level", cluster.FeatureLevelRequest{Level: 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "old-build") || !strings.Contains(err.Error(), "409") {
		t.Fatalf("raise with an old build recorded: %v", err)
	}
	// Leader-only command: proposed on whoever leads now (an election
	// under load may have moved the leadership).
	if !clustertest.Poll(15*time.Second, func() bool {
		res, err = c.Leader().Node.ProposeInternal(fsm.CmdNodeGone, fsm.NodeGonePayload{ID: "old-build"})
		return err == nil && res.OK()
	}) {
		t.Fatalf("drop old record: %+v %v", res, err)
	}
	if err := follower.Do(ctx(t), http.MethodPost, "/admin/feature-level", cluster.FeatureLevelRequest{Level: 1}, nil); err != nil {
		t.Fatalf("raise: %v", err)
	}
	if err := c.WaitConverged(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Members() {
		var got cluster.FeatureLevelView
		if err := c.Admin(m.ID).Do(ctx(t), http.MethodGet, "/admin/feature-level", nil, &got); err != nil || got.FeatureLevel != 1 {
			t.Fatalf("%s after the raise: %+v %v", m.ID, got, err)
		}
	}
	for _, level := range []uint32{1, fsm.FeatureLevel + 1} {
		if err := follower.Do(ctx(t), http.MethodPost, "/admin/feature-level", cluster.FeatureLevelRequest{Level: level}, nil); err == nil {
			t.Fatalf("raise to %d accepted", level)
		}
	}
}
