package node

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/por"
)

// porLog writes a log that makes Proof of Reserves trees due at several
// entries (genesis at the build's level, then ticks across three minutes
// and each tree's publication) and returns it with each due entry's
// index and time, and the inline machine's pending tree at each.
func porLog(t *testing.T) (*raft.InmemStore, []porKey, map[porKey]*por.Snapshot) {
	t.Helper()
	logs := raft.NewInmemStore()
	ref := fsm.NewMachine(fsm.Options{})
	const t0 = 1_767_225_600_000 // a minute's start
	times := []int64{t0 + 1_000, t0 + 5_000, t0 + 11_000, t0 + 60_000, t0 + 60_500, t0 + 70_000,
		t0 + 120_000, t0 + 130_000, t0 + 180_000}
	var keys []porKey
	built := map[porKey]*por.Snapshot{}
	index := uint64(1)
	put := func(cmd *fsm.Command) {
		b, err := cmd.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := logs.StoreLog(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}); err != nil {
			t.Fatal(err)
		}
		ref.ApplyBatch([]uint64{index}, [][]byte{b})
		ref.Read(func(st *fsm.State, _ uint64) {
			if p := st.PoR; p != nil && p.Pending != nil && p.Pending.Index == index {
				k := porKey{index, p.Pending.TsMs}
				keys = append(keys, k)
				built[k] = p.Pending.Snap
			}
		})
		index++
	}
	g, err := fsm.NewCommand(fsm.CmdGenesis, fsm.GenesisPayload{FeatureLevel: fsm.FeatureLevel, Seed: 7, Deployment: "testnet"})
	if err != nil {
		t.Fatal(err)
	}
	g.TsMs = t0
	put(g)
	for _, ts := range times {
		put(&fsm.Command{Type: fsm.CmdTick, TsMs: ts})
	}
	if len(keys) != 4 || built[keys[0]] == nil {
		t.Fatalf("the log makes %d trees due (%v), want 4 with trees", len(keys), keys)
	}
	return logs, keys, built
}

// The shadow answers each due tree with the one the inline machine built
// at that entry: from an empty start, moving on, when it is already past
// the entry (pending or published there) and when its state no longer
// holds it (rebuilt up to the entry).
func TestShadowBuildsEachDueTreeAsInline(t *testing.T) {
	logs, keys, built := porLog(t)
	check := func(sh *shadow, k porKey) {
		t.Helper()
		snap, err := sh.porAt(k.index, k.tsMs)
		if err != nil {
			t.Fatalf("porAt %+v: %v", k, err)
		}
		if snap.TsMs != k.tsMs || snap.Msat.RootHash != built[k].Msat.RootHash || snap.Usdx.RootHash != built[k].Usdx.RootHash {
			t.Fatalf("porAt %+v: another tree (ts %d)", k, snap.TsMs)
		}
	}
	sh := &shadow{logs: logs, snaps: raft.NewInmemSnapshotStore()}
	for _, k := range keys {
		check(sh, k) // in order, the shadow moving on
	}
	// Past every entry: the last is pending there, the first long
	// replaced by newer trees (rebuilt from the log up to its entry).
	last, _ := logs.LastIndex()
	if err := sh.reach(last); err != nil {
		t.Fatal(err)
	}
	check(sh, keys[len(keys)-1])
	check(sh, keys[0])
	check(sh, keys[2])
	if _, err := sh.porAt(keys[1].index, keys[1].tsMs+1); err == nil {
		t.Fatal("a tree of a time no entry made due was answered")
	}

	// Through the builder, as the live machine asks.
	b := &porBuilder{shadow: &shadow{logs: logs, snaps: raft.NewInmemSnapshotStore()}}
	b.minAccounts.Store(1)
	if b.Want(keys[0].index, keys[0].tsMs, 0) || len(b.builds) != 0 {
		t.Fatal("the builder took a build below its threshold")
	}
	for _, k := range keys {
		if !b.Want(k.index, k.tsMs, 1) {
			t.Fatal("the builder refused a build at its threshold")
		}
		snap, err := b.Await(k.index, k.tsMs)
		if err != nil || snap.Msat.RootHash != built[k].Msat.RootHash {
			t.Fatalf("builder %+v: %v", k, err)
		}
		if len(b.builds) > 2 {
			t.Fatalf("the builder keeps %d builds", len(b.builds))
		}
	}
	if got := b.built.Load(); got != uint64(len(keys)) {
		t.Fatalf("the builder counts %d builds, ran %d", got, len(keys))
	}
	// A node's builder takes states from PoRBesideApplyFrom accounts on.
	if d := newPoRBuilder(); d.Want(1, 1, PoRBesideApplyFrom-1) || !d.Want(1, 1, PoRBesideApplyFrom) {
		t.Fatalf("the default threshold is not %d accounts", PoRBesideApplyFrom)
	}
	// A log that lost the entry: an error, not another tree.
	gone := &porBuilder{shadow: &shadow{logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}}
	if _, err := gone.Await(keys[0].index, keys[0].tsMs); err == nil {
		t.Fatal("a build from a log without the entry succeeded")
	}
}

// Config.PoRBesideApplyFrom reaches the node's builder; 0 is the default.
func TestPoRBesideApplyFromReachesTheBuilder(t *testing.T) {
	for _, tc := range []struct{ set, want int }{{0, PoRBesideApplyFrom}, {3, 3}} {
		n, err := New(Config{ID: "n", DataDir: t.TempDir(), RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:1",
			AdminToken: "t", Logger: hclog.NewNullLogger(), PoRBesideApplyFrom: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		got := n.porBuilds.minAccounts.Load()
		_ = n.Shutdown()
		if got != int64(tc.want) {
			t.Fatalf("PoRBesideApplyFrom %d: the builder takes states from %d accounts, want %d", tc.set, got, tc.want)
		}
	}
}

// flakyLogs fails its first reads, as a store briefly unreadable would.
type flakyLogs struct {
	raft.LogStore
	fails atomic.Int32
}

func (f *flakyLogs) GetLog(index uint64, l *raft.Log) error {
	if f.fails.Add(-1) >= 0 {
		return errors.New("the store could not be read just now")
	}
	return f.LogStore.GetLog(index, l)
}

// A build that failed on a passing store error is tried again, not
// handed to apply as a failure (which halts the replica); one that keeps
// failing still fails, after porBuildAttempts builds.
func TestAFailedBuildIsTriedAgain(t *testing.T) {
	logs, keys, built := porLog(t)
	k := keys[1]
	flaky := &flakyLogs{LogStore: logs}
	flaky.fails.Store(1)
	b := &porBuilder{shadow: &shadow{logs: flaky, snaps: raft.NewInmemSnapshotStore()}}
	snap, err := b.Await(k.index, k.tsMs)
	if err != nil || snap.Msat.RootHash != built[k].Msat.RootHash {
		t.Fatalf("after one failed read: %v", err)
	}
	if got := b.built.Load(); got != 2 {
		t.Fatalf("%d builds, want the failed one and its retry", got)
	}
	broken := &flakyLogs{LogStore: logs}
	broken.fails.Store(1 << 30)
	b = &porBuilder{shadow: &shadow{logs: broken, snaps: raft.NewInmemSnapshotStore()}}
	if _, err := b.Await(k.index, k.tsMs); err == nil || b.built.Load() != porBuildAttempts {
		t.Fatalf("a store that never reads: %v after %d builds", err, b.built.Load())
	}
}
