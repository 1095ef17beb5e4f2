package cluster

import "testing"

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
