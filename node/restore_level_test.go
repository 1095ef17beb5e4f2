package node_test

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm"
)

// TestSnapshotAboveThisBuildsFeatureLevelIsRefused: a node whose build
// implements a lower feature level than the cluster's (an old binary
// joining, or restarted, after the raise; an operator restoring a newer
// cluster's backup into old binaries) installed such a snapshot and then
// applied the entries after it by its old rules: silent divergence. A log
// replay of the raise halts such a replica (applySetFeatureLevel); a
// snapshot must be refused the same way, before anything is installed.
func TestSnapshotAboveThisBuildsFeatureLevelIsRefused(t *testing.T) {
	src := fsm.NewMachine(fsm.Options{})
	src.Read(func(st *fsm.State, _ uint64) { st.FeatureLevel = fsm.FeatureLevel + 1 }) // as a newer build's cluster
	b, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := fsm.ValidateSnapshot(b); err == nil || !strings.Contains(err.Error(), "feature level") {
		t.Fatalf("an operator's restore of a level %d snapshot into a level %d build: %v", fsm.FeatureLevel+1, fsm.FeatureLevel, err)
	}
	dst := fsm.NewMachine(fsm.Options{})
	if err := dst.RestoreAt(b, 10); err == nil {
		t.Fatal("a level above this build's was installed from a leader's snapshot")
	}
	if dst.Applied() != 0 {
		t.Fatalf("a refused snapshot left the machine at index %d", dst.Applied())
	}
	var level uint32
	dst.Read(func(st *fsm.State, _ uint64) { level = st.FeatureLevel })
	if level != 0 {
		t.Fatalf("a refused snapshot left feature level %d installed", level)
	}
}
