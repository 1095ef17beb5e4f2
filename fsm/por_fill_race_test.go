package fsm

import (
	"testing"

	"github.com/perpd/perpd/fsm/por"
)

// fillRaceBuilds answers each build from an inline machine's pending tree
// and, on the first Await, lets apply run one more entry before it answers
// (as apply may, on its own goroutine, while StateHash waits for a build).
type fillRaceBuilds struct {
	built   map[porWant]*por.Snapshot
	onAwait func()
}

func (b *fillRaceBuilds) Want(uint64, int64, int) bool { return true }

func (b *fillRaceBuilds) Await(index uint64, tsMs int64) (*por.Snapshot, error) {
	if f := b.onAwait; f != nil {
		b.onAwait = nil
		f()
	}
	return b.built[porWant{index, tsMs}], nil
}

// StateHash (and SnapshotTo) fill the pending tree left to PoRBuilds, then
// encode the state under a new read lock. An entry applied in between may
// publish that tree and leave the next one pending without its trees: the
// hash is then of a state no replica has (the inline machine's pending
// tree has its trees), and a snapshot so encoded is one every restore
// refuses.
func TestStateHashNeverEncodesATreelessPending(t *testing.T) {
	const t0 = 1_767_225_600_000
	g, err := NewCommand(CmdGenesis, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 7, Deployment: "testnet"})
	if err != nil {
		t.Fatal(err)
	}
	g.TsMs = t0 + 40_000
	var entries [][]byte
	for _, c := range []*Command{g,
		{Type: CmdTick, TsMs: t0 + 50_000}, // the first tree is due: pending
		{Type: CmdTick, TsMs: t0 + 60_000}, // published; the next minute's due
	} {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, b)
	}
	ref := NewMachine(Options{})
	builds := &fillRaceBuilds{built: map[porWant]*por.Snapshot{}}
	for i, b := range entries {
		idx := uint64(i + 1)
		ref.ApplyBatch([]uint64{idx}, [][]byte{b})
		ref.Read(func(st *State, _ uint64) {
			if p := st.PoR.Pending; p != nil && p.Index == idx {
				builds.built[porWant{idx, p.TsMs}] = p.Snap
			}
		})
	}
	live := NewMachine(Options{PoRBuilds: builds})
	live.ApplyBatch([]uint64{1, 2}, entries[:2])
	builds.onAwait = func() { live.ApplyBatch([]uint64{3}, entries[2:]) }

	at, got, err := live.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := ref.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	if h := live.Halted(); h != nil {
		t.Fatalf("halted: %s", h.Reason)
	}
	if at != 3 || got != want {
		t.Fatalf("the live hash at %d is not the inline machine's at 3", at)
	}

	// The same through SnapshotTo: the bytes must restore.
	live2 := NewMachine(Options{PoRBuilds: builds})
	live2.ApplyBatch([]uint64{1, 2}, entries[:2])
	builds.onAwait = func() { live2.ApplyBatch([]uint64{3}, entries[2:]) }
	b, err := live2.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := NewMachine(Options{}).Restore(b); err != nil {
		t.Fatalf("the live machine's snapshot does not restore: %v", err)
	}
}
