package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/node"
)

// A running node builds its Proof of Reserves trees beside apply: the live
// machine holds a due tree without its trees (it built none), publishes it
// por.PublishDelayMs later with the trees its shadow built, and its state
// hash, pending or published, is the one the shadow computes by replaying
// the log (where the trees are built inline).
func TestNodeBuildsProofOfReservesBesideApply(t *testing.T) {
	n := startClockedNode(t, &steppedClock{start: time.Now()},
		func(n *node.Node) { n.SetPoRBesideApplyFrom(0) }) // a state of any size
	var pd por.Pending
	var treeless bool
	if !clustertest.Poll(10*time.Second, func() bool {
		found := false
		n.Machine().Read(func(st *fsm.State, _ uint64) {
			if st.PoR != nil && st.PoR.Pending != nil {
				pd, treeless, found = *st.PoR.Pending, st.PoR.Pending.Snap == nil, true
			}
		})
		return found
	}) {
		t.Fatal("no tree became due")
	}
	if !treeless {
		t.Fatal("the live machine built the due tree inside apply")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sameAsShadow := func(when string) {
		t.Helper()
		at, live, err := n.Machine().StateHash()
		if err != nil {
			t.Fatal(err)
		}
		shadow, err := n.StateHashAt(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if live != shadow {
			t.Fatalf("%s: the live hash at %d differs from the shadow's", when, at)
		}
	}
	sameAsShadow("pending")
	published := func() (ok bool) {
		n.Machine().Read(func(st *fsm.State, _ uint64) {
			ok = st.PoR.Latest != nil && st.PoR.Latest.TsMs == pd.TsMs && st.PoR.Latest.Msat != nil
		})
		return ok
	}
	if !clustertest.Poll(por.PublishDelayMs*time.Millisecond+10*time.Second, published) {
		n.Machine().Read(func(st *fsm.State, idx uint64) {
			t.Logf("now %d (due %d), applied %d, latest %+v, pending %+v", st.NowMs, pd.TsMs, idx, st.PoR.Latest, st.PoR.Pending)
		})
		t.Fatalf("the tree due at entry %d was not published", pd.Index)
	}
	var at int64
	n.Machine().Read(func(st *fsm.State, _ uint64) { at = st.NowMs })
	if at-pd.TsMs < por.PublishDelayMs {
		t.Fatalf("published %d ms after it was due", at-pd.TsMs)
	}
	sameAsShadow("published")
	if st := n.PoRBuildStats(); st.Built == 0 {
		t.Fatalf("stats %+v: no build counted on the shadow", st)
	}
}
