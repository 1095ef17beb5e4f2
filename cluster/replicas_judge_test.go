package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The members agree only when every one answered with one hash; the index
// compared is the lowest applied among those that answered.
func TestReplicasJudgement(t *testing.T) {
	ok := []ReplicaMember{{ID: "n1", AppliedIndex: "40", StateHash: "h"}, {ID: "n2", AppliedIndex: "38", StateHash: "h"}}
	if !agree(ok) || lowestApplied(ok) != 38 {
		t.Fatalf("agree %v at %d", agree(ok), lowestApplied(ok))
	}
	differ := append([]ReplicaMember{}, ok...)
	differ[1].StateHash = "x"
	silent := append(append([]ReplicaMember{}, ok...), ReplicaMember{ID: "n3", Error: "connection refused"})
	for name, ms := range map[string][]ReplicaMember{"a different hash": differ, "a member that did not answer": silent, "none": nil} {
		if agree(ms) {
			t.Errorf("%s: judged agreeing", name)
		}
	}
	if lowestApplied(silent) != 38 || lowestApplied([]ReplicaMember{{Error: "x"}}) != 0 {
		t.Fatal("lowest applied counts only answers")
	}
}

// The comparison ends within its bound however long the members take, so
// that /admin/replicas writes its answer inside the admin listener's write
// timeout: an index round cut at peerAskTimeout by a silent member and a
// hash round cut at hashAskTimeout came to 60 s, the whole write timeout,
// and this node's own hash was bounded by nothing but the caller. A
// member still hashing at the bound is answered as an error beside the
// others' hashes.
func TestReplicasComparisonEndsWithinItsBound(t *testing.T) {
	defer func(d time.Duration) { replicasTimeout = d }(replicasTimeout)
	replicasTimeout = 300 * time.Millisecond
	members := []memberAddr{{id: "a", self: true}, {id: "b"}, {id: "c"}}
	ask := func(ctx context.Context, m memberAddr, index string) (StateAtView, error) {
		wait := 10 * time.Millisecond
		switch {
		case index == "" && m.id == "c":
			wait = 200 * time.Millisecond // silent: its ask gives up
		case index != "" && m.self:
			wait = 10 * time.Second // a hash at scale
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return StateAtView{}, ctx.Err()
		}
		if index == "" && m.id == "c" {
			return StateAtView{}, errors.New("no answer")
		}
		return StateAtView{AppliedIndex: "7", Index: index, StateHash: "h"}, nil
	}
	start := time.Now()
	v := compareReplicas(context.Background(), members, ask)
	if took := time.Since(start); took > replicasTimeout+time.Second {
		t.Fatalf("answered after %v, past its bound %v", took, replicasTimeout)
	}
	if v.Index != "7" || v.Agree || v.Members[0].Error == "" || v.Members[1].StateHash != "h" || v.Members[2].Error != "no answer" {
		t.Fatalf("%+v", v)
	}
}
