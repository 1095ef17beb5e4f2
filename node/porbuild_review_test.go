package node

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
)

// besideLog is a raft log written entry by entry, applied as it is written
// to an inline machine (no PoRBuilds, as the shadow and tools) and to a
// live machine whose builder builds on a shadow of the same log.
type besideLog struct {
	t     *testing.T
	logs  *raft.InmemStore
	ref   *fsm.Machine
	live  *fsm.Machine
	b     *porBuilder
	index uint64
}

func newBesideLog(t *testing.T) *besideLog {
	t.Helper()
	l := &besideLog{t: t, logs: raft.NewInmemStore(), ref: fsm.NewMachine(fsm.Options{}), index: 1}
	l.b = newPoRBuilder()
	l.b.minAccounts.Store(0) // a state of any size
	l.b.shadow = &shadow{logs: l.logs, snaps: raft.NewInmemSnapshotStore()}
	l.live = fsm.NewMachine(fsm.Options{PoRBuilds: l.b})
	return l
}

const besideT0 = 1_767_225_600_000 // a minute's start

func (l *besideLog) encode(cmd *fsm.Command) []byte {
	b, err := cmd.Encode()
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

// put appends an entry and applies it to both machines.
func (l *besideLog) put(data []byte) {
	l.t.Helper()
	if err := l.logs.StoreLog(&raft.Log{Index: l.index, Term: 1, Type: raft.LogCommand, Data: data}); err != nil {
		l.t.Fatal(err)
	}
	l.ref.ApplyBatch([]uint64{l.index}, [][]byte{data})
	if h := l.ref.Halted(); h != nil {
		l.t.Fatalf("the inline machine halted at %d: %v", l.index, h)
	}
	l.live.ApplyBatch([]uint64{l.index}, [][]byte{data})
	if h := l.live.Halted(); h != nil {
		l.t.Fatalf("the live machine halted at entry %d where the inline one did not: %s", l.index, h.Reason)
	}
	l.index++
}

func (l *besideLog) genesis() {
	g, err := fsm.NewCommand(fsm.CmdGenesis, fsm.GenesisPayload{FeatureLevel: fsm.FeatureLevel, Seed: 7, Deployment: "testnet"})
	if err != nil {
		l.t.Fatal(err)
	}
	g.TsMs = besideT0
	l.put(l.encode(g))
}

func (l *besideLog) tick(ts int64) []byte {
	return l.encode(&fsm.Command{Type: fsm.CmdTick, TsMs: ts})
}

func (l *besideLog) sameHash() {
	l.t.Helper()
	ai, ah, err := l.ref.StateHash()
	if err != nil {
		l.t.Fatal(err)
	}
	bi, bh, err := l.live.StateHash()
	if err != nil {
		l.t.Fatal(err)
	}
	if ai != bi || ah != bh {
		l.t.Fatalf("hash at %d (inline) != hash at %d (beside apply)", ai, bi)
	}
}

// One group entry whose commands advance log time by 20 s in all (each
// within fsm.MaxClockStepMs) makes a tree due, publishes it, makes the
// next one due and publishes that one too. The live machine awaits the
// first tree while applying that entry; the shadow, which can only stop
// between entries, is then past both publications, and its state holds
// neither the first tree pending nor as the latest: the live replica
// halts where every inline replica applies the entry.
func TestGroupEntryPublishingTwoTreesDoesNotHaltTheLiveMachine(t *testing.T) {
	l := newBesideLog(t)
	l.genesis()                      // the first tree due at genesis, pending
	l.put(l.tick(besideT0 + 10_000)) // published; no tree due until the next minute
	l.put(l.tick(besideT0 + 55_000))
	g, err := fsm.EncodeGroup([][]byte{
		l.tick(besideT0 + 60_000),  // due: pending at this entry
		l.tick(besideT0 + 70_000),  // published
		l.tick(besideT0 + 120_000), // due: pending at this entry again
		l.tick(besideT0 + 130_000), // published
	})
	if err != nil {
		t.Fatal(err)
	}
	l.put(g)
	l.sameHash()
}
