package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/por"
)

// lazyShadow stands in for a node's snapshot shadow (node/porbuild.go): a
// machine without PoRBuilds that replays the world's log only when a
// build is awaited, so it is behind the live machine until then.
type lazyShadow struct {
	w      *tradeWorld
	r      *replica
	wants  []porWant
	awaits int
	fail   error
}

type porWant struct {
	index uint64
	tsMs  int64
}

func (s *lazyShadow) Want(index uint64, tsMs int64, accounts int) bool {
	s.wants = append(s.wants, porWant{index, tsMs})
	return true
}

func (s *lazyShadow) Await(index uint64, tsMs int64) (*por.Snapshot, error) {
	s.awaits++
	if s.fail != nil {
		return nil, s.fail
	}
	s.replayTo(index)
	var snap *por.Snapshot
	s.r.m.Read(func(st *State, _ uint64) {
		if p := st.PoR.Pending; p != nil && p.Index == index && p.TsMs == tsMs {
			snap = p.Snap
		}
	})
	if snap == nil {
		return nil, errors.New("the shadow holds no such snapshot")
	}
	return snap, nil
}

// replayTo applies the world's log up to index (the live machine's first
// logged entry follows the two genesis entries both replicas start with).
func (s *lazyShadow) replayTo(index uint64) {
	for s.r.next <= index {
		wantOK(s.w.t, s.r.applyRaw(s.w.log[s.r.next-3]))
	}
}

// newBesideApplyWorld is a trading world at the build's level whose
// machine leaves Proof of Reserves builds to a lazy shadow.
func newBesideApplyWorld(t *testing.T) (*tradeWorld, *lazyShadow) {
	w := newTradeWorld(t)
	s := &lazyShadow{w: w, r: newMarketReplica(t)}
	w.m.opts.PoRBuilds = s
	return w, s
}

func (w *tradeWorld) porState() (latest *por.Snapshot, pending *por.Pending) {
	w.m.Read(func(st *State, _ uint64) { latest, pending = st.PoR.Latest, st.PoR.Pending })
	return latest, pending
}

// From LevelPoRBesideApply the live machine builds no tree inside apply: it
// records the entry that made one due, publishes it PublishDelayMs later,
// and the tree it publishes is the one a machine building inline made of
// the state at that entry, not of the state at publication; state hashes
// and answers stay those of the inline machine at every entry.
func TestPoRBuiltBesideApplyIsTheInlineTree(t *testing.T) {
	w, s := newBesideApplyWorld(t)
	a, ak := w.account(5 * btcBTC)
	b, bk := w.account(5 * btcBTC)
	w.walkToNextPoR()
	first, _ := w.porState()
	if first == nil || len(s.wants) == 0 {
		t.Fatalf("no first tree published (wants %v)", s.wants)
	}

	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	wantOK(t, w.order(a, ak, levered(mktOrder("o1", "BTC-PERP", "buy", 300_000), 10)))
	boundary := (w.ts/por.CadenceMs + 1) * por.CadenceMs
	w.walkTo(boundary)
	latest, pd := w.porState()
	if pd == nil || pd.Snap != nil || pd.TsMs != w.now() {
		t.Fatalf("at the boundary: pending %+v, want one without trees (the live machine built nothing)", pd)
	}
	if latest != first {
		t.Fatal("the new tree was published at the entry that made it due")
	}
	if got := s.wants[len(s.wants)-1]; got.index != w.next-1 || got.tsMs != pd.TsMs {
		t.Fatalf("want %+v, the due entry is %d at %d", got, w.next-1, pd.TsMs)
	}
	dueIndex, dueTs := w.next-1, pd.TsMs

	// Money moves after the boundary: the tree must not see it.
	wantOK(t, w.print("BTCUSD", usdQ8(100_500)))
	wantOK(t, w.order(b, bk, levered(mktOrder("o2", "BTC-PERP", "sell", 200_000), 10)))
	wantOK(t, w.print("BTCUSD", usdQ8(101_000)))
	// Encoding the live state mid-way fills the pending tree from the
	// shadow: the hash is the inline machine's.
	awaits := s.awaits
	h := w.hash()
	s.replayTo(w.next - 1)
	if h != s.r.hash() {
		t.Fatal("the live state hash differs from the inline machine's while a tree is pending")
	}
	if s.awaits != awaits+1 {
		t.Fatalf("the hash awaited %d builds, want 1", s.awaits-awaits)
	}

	w.walkTo(dueTs + por.PublishDelayMs - 1)
	if latest, _ := w.porState(); latest.TsMs == dueTs {
		t.Fatal("published before its delay")
	}
	w.walkTo(dueTs + por.PublishDelayMs)
	latest, pd = w.porState()
	if pd != nil || latest == nil || latest.TsMs != dueTs {
		t.Fatalf("not published at its delay: latest %+v pending %+v", latest, pd)
	}
	s.replayTo(w.next - 1)
	if w.hash() != s.r.hash() {
		t.Fatal("the live state hash differs from the inline machine's after the publication")
	}
	var inline *por.Snapshot
	s.r.m.Read(func(st *State, _ uint64) { inline = st.PoR.Latest })
	if inline.Msat.RootHash != latest.Msat.RootHash {
		t.Fatal("the published root is not the inline machine's")
	}
	// The tree is of the state at its entry: rebuilt from the state at
	// publication (after o2 and the print), the root differs.
	var now *por.Snapshot
	w.m.Read(func(st *State, _ uint64) {
		saved := st.NowMs
		st.NowMs = dueTs
		now = BuildPoR(st)
		st.NowMs = saved
	})
	if now.Msat.RootHash == latest.Msat.RootHash {
		t.Fatal("the published tree is the state at publication, not at its entry")
	}
	_ = dueIndex
}

// A machine that cannot get its pending tree built halts at the entry
// that would publish it, rather than publish another or none.
func TestPoRBuildFailureHaltsAtPublication(t *testing.T) {
	w, s := newBesideApplyWorld(t)
	w.unchecked, w.m.opts.CheckInvariants = true, false
	w.walkTo((w.ts/por.CadenceMs + 1) * por.CadenceMs)
	_, pd := w.porState()
	if pd == nil || pd.Snap != nil {
		t.Fatalf("pending %+v", pd)
	}
	s.fail = errors.New("log entry gone")
	w.ts = pd.TsMs + por.PublishDelayMs
	cmd := &Command{Type: CmdTick, TsMs: w.ts}
	b, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := w.m.Apply(w.next, b)
	h := w.m.Halted()
	if h == nil || res.Status != 503 || !strings.Contains(h.Reason, "proof of reserves") || !strings.Contains(h.Reason, "log entry gone") {
		t.Fatalf("halt %+v, answer %d", h, res.Status)
	}
}

// Encoding never writes a pending tree without its trees, and a snapshot
// holding one is refused on restore: no machine could publish it.
func TestSnapshotWithATreelessPendingIsRefused(t *testing.T) {
	w := newTradeWorld(t)
	w.walkTo((w.ts/por.CadenceMs + 1) * por.CadenceMs)
	if _, pd := w.porState(); pd == nil || pd.Snap == nil {
		t.Fatalf("a machine without PoRBuilds built no pending tree inline: %+v", pd)
	}
	good, err := w.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := NewMachine(Options{}).Restore(good); err != nil {
		t.Fatalf("a snapshot with a built pending tree: %v", err)
	}
	w.m.Read(func(st *State, _ uint64) { st.PoR.Pending.Snap = nil })
	bad, err := w.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := NewMachine(Options{}).Restore(bad); err == nil || !strings.Contains(err.Error(), "pending proof of reserves") {
		t.Fatalf("restore of a treeless pending tree: %v", err)
	}
	// An operator's file is validated before raft sees it: raft panics
	// when a user restore then fails inside the state machine.
	if err := ValidateSnapshot(bad); err == nil || !strings.Contains(err.Error(), "pending proof of reserves") {
		t.Fatalf("validation of a treeless pending tree: %v", err)
	}
	if err := ValidateSnapshot(good); err != nil {
		t.Fatalf("validation of a built pending tree: %v", err)
	}
}

// Below the level a tree is still built and published at its entry.
func TestPoRBelowBesideApplyPublishesAtItsEntry(t *testing.T) {
	w := newTradeWorldAt(t, LevelPoRBesideApply-1)
	s := &lazyShadow{w: w, r: newMarketReplicaAt(t, LevelPoRBesideApply-1)}
	w.m.opts.PoRBuilds = s
	w.walkTo((w.ts/por.CadenceMs + 1) * por.CadenceMs)
	latest, pd := w.porState()
	if pd != nil || latest == nil || latest.TsMs != w.now() || len(s.wants) != 0 {
		t.Fatalf("latest %+v pending %+v wants %v", latest, pd, s.wants)
	}
}

// A cadence period that starts while a tree is pending (the first tree is
// due at once, mid-period) does not replace it: the pending tree is
// published at its delay, and the period's tree is due at that entry.
func TestPoRDueWhilePendingWaitsForThePublication(t *testing.T) {
	r := newMarketReplica(t)
	b := (r.now()/por.CadenceMs + 1) * por.CadenceMs // ticks move log time at most a minute
	if b-5_000 <= r.now() {
		t.Fatalf("launch %d is too late in its minute for this test", r.now())
	}
	state := func() (latest *por.Snapshot, pd *por.Pending) {
		r.m.Read(func(st *State, _ uint64) { latest, pd = st.PoR.Latest, st.PoR.Pending })
		return latest, pd
	}
	wantOK(t, r.apply(tickAt(b-5_000)))
	if latest, pd := state(); latest != nil || pd == nil || pd.TsMs != b-5_000 {
		t.Fatalf("first tree: latest %+v pending %+v", latest, pd)
	}
	wantOK(t, r.apply(tickAt(b+1_000)))
	if latest, pd := state(); latest != nil || pd == nil || pd.TsMs != b-5_000 {
		t.Fatalf("a new period replaced the pending tree: latest %+v pending %+v", latest, pd)
	}
	wantOK(t, r.apply(tickAt(b+5_000)))
	latest, pd := state()
	if latest == nil || latest.TsMs != b-5_000 || pd == nil || pd.TsMs != b+5_000 {
		t.Fatalf("at the publication: latest %+v pending %+v", latest, pd)
	}
	wantOK(t, r.apply(tickAt(b+15_000)))
	if latest, pd := state(); latest.TsMs != b+5_000 || pd != nil {
		t.Fatalf("the period's tree: latest %+v pending %+v", latest, pd)
	}
}
