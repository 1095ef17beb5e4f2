package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// connectPeer cuts (or restores) every link between p and the others.
func connectPeer(peers []*guardPeer, p *guardPeer, on bool) {
	for _, q := range peers {
		if q != p {
			linkTransports(p.raw, q.raw, on)
		}
	}
}

// linkTransports connects (or cuts) two in-memory transports both ways.
func linkTransports(a, b *raft.InmemTransport, on bool) {
	if on {
		a.Connect(b.LocalAddr(), b)
		b.Connect(a.LocalAddr(), a)
	} else {
		a.Disconnect(b.LocalAddr())
		b.Disconnect(a.LocalAddr())
	}
}

// caughtUpCluster starts three guarded rafts that keep entries after their
// snapshots, as in production, writes five entries and waits until every
// member applied them. It returns the leader and its last index.
func caughtUpCluster(t *testing.T) (peers []*guardPeer, leader *guardPeer, committed uint64) {
	t.Helper()
	peers = guardClusterTrailing(t, 1024)
	leader = guardLeader(t, peers)
	applyN(t, leader.r, 5)
	for _, p := range peers {
		waitCaughtUp(t, p, leader)
	}
	return peers, leader, leader.r.LastIndex()
}

// newLeaderSnapshots waits for the members other than old (cut off) to
// elect a leader, which writes n entries, then snapshots and compacts its
// log entirely. witness is the other member, which keeps its whole log.
func newLeaderSnapshots(t *testing.T, peers []*guardPeer, old *guardPeer, n int) (leader, witness *guardPeer) {
	t.Helper()
	return leaderSnapshots(t, peers, old, func(leader *guardPeer) { applyN(t, leader.r, n) })
}

// newLeaderSnapshotsAt is newLeaderSnapshots with the leader writing until
// its last index is index (one entry at least, after its no-op).
func newLeaderSnapshotsAt(t *testing.T, peers []*guardPeer, old *guardPeer, index uint64) (leader, witness *guardPeer) {
	t.Helper()
	return leaderSnapshots(t, peers, old, func(leader *guardPeer) {
		for applyN(t, leader.r, 1); leader.r.LastIndex() < index; {
			applyN(t, leader.r, 1)
		}
	})
}

func leaderSnapshots(t *testing.T, peers []*guardPeer, old *guardPeer, write func(*guardPeer)) (leader, witness *guardPeer) {
	t.Helper()
	var others []*guardPeer
	for _, p := range peers {
		if p != old {
			others = append(others, p)
		}
	}
	leader = guardLeader(t, others)
	witness = followerOf(others, leader)
	write(leader)
	rc := leader.r.ReloadableConfig()
	rc.TrailingLogs = 0 // the forced snapshot compacts the new leader's log
	if err := leader.r.ReloadConfig(rc); err != nil {
		t.Fatal(err)
	}
	if err := leader.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	return leader, witness
}

// The jepsen case of 2026-11-27 (n3): a leader is cut off with entries it
// never committed, the others elect a new leader, which writes on, takes a
// snapshot and compacts its log; the old leader comes back and catches up by
// installing that snapshot. hashicorp/raft v1.7.3 then compacts only up to
// min(snapshot index, last log index - TrailingLogs)
// (https://github.com/hashicorp/raft/issues/697, PR #704), so the old
// leader's uncommitted entries below the snapshot's index stay in its log
// store: were it to lead again, a follower needing that range would be sent
// them. Raft's paper (figure 13) discards them. The guard does: after raft
// installed a snapshot from a leader, no entry at or below its index that
// the snapshot does not vouch for is left in the store.
func TestInstalledSnapshotLeavesNoConflictingEntryBelowIt(t *testing.T) {
	peers, old, committed := caughtUpCluster(t)

	// Cut off, the old leader still appends what it is given, until its
	// lease runs out; none of it commits.
	connectPeer(peers, old, false)
	for range 3 {
		old.r.Apply([]byte("uncommitted"), 50*time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for old.r.LastIndex() == committed || old.r.State() == raft.Leader {
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off leader: last index %d (committed %d), state %s", old.r.LastIndex(), committed, old.r.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	staleTo := old.r.LastIndex()

	leader, witness := newLeaderSnapshots(t, peers, old, 20)
	snap := newestSnapshot(t, leader)
	if snap.Index <= staleTo {
		t.Fatalf("snapshot at %d, the stale entries reach %d", snap.Index, staleTo)
	}
	applyN(t, leader.r, 3)

	connectPeer(peers, old, true)
	waitCaughtUp(t, old, leader)
	if got := old.fsm.restores.Load(); got != 1 {
		t.Fatalf("the old leader caught up with %d snapshot installs, want 1", got)
	}

	// Every entry at or below the snapshot's index that the old leader still
	// stores must be the committed one (the witness's).
	first, err := old.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i != 0 && i <= snap.Index; i++ {
		var mine, theirs raft.Log
		if err := old.logs.GetLog(i, &mine); err != nil {
			continue
		}
		if err := witness.logs.GetLog(i, &theirs); err != nil {
			t.Fatalf("witness entry %d: %v", i, err)
		}
		if mine.Term != theirs.Term || string(mine.Data) != string(theirs.Data) {
			t.Fatalf("after installing the snapshot at %d the old leader still stores entry %d of term %d (%q); "+
				"the committed entry there is of term %d (%q)", snap.Index, i, mine.Term, mine.Data, theirs.Term, theirs.Data)
		}
	}
	// And it goes on replicating normally after the snapshot.
	applyN(t, leader.r, 3)
	waitCaughtUp(t, old, leader)
}

func storeOf(t *testing.T, entries ...raft.Log) *raft.InmemStore {
	t.Helper()
	s := raft.NewInmemStore()
	for i := range entries {
		if err := s.StoreLog(&entries[i]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func indexes(t *testing.T, s *raft.InmemStore, upTo uint64) []uint64 {
	t.Helper()
	var got []uint64
	for i := uint64(1); i <= upTo; i++ {
		var l raft.Log
		if s.GetLog(i, &l) == nil {
			got = append(got, i)
		}
	}
	return got
}

// dropUnvouched, run after an install and at start, keeps a log whose entry
// at the snapshot's index has the snapshot's term (a node's own snapshot
// keeps trailing entries) and drops everything up to the index otherwise;
// when the log goes on past the index it stores the snapshot's point there.
func TestDropUnvouched(t *testing.T) {
	for _, c := range []struct {
		name     string
		log      []raft.Log
		from, to uint64
		point    bool
		left     []uint64
	}{
		{"stale entries end below the snapshot", []raft.Log{{Index: 3, Term: 2}, {Index: 4, Term: 2}}, 3, 5, false, nil},
		{"own snapshot with trailing entries", []raft.Log{{Index: 4, Term: 2}, {Index: 5, Term: 3}, {Index: 6, Term: 3}}, 0, 0, false, []uint64{4, 5, 6}},
		{"another term at the snapshot's index", []raft.Log{{Index: 4, Term: 2}, {Index: 5, Term: 2}, {Index: 6, Term: 2}}, 4, 5, true, []uint64{5, 6}},
		{"the log starts after the snapshot", []raft.Log{{Index: 6, Term: 3}}, 0, 0, false, []uint64{6}},
		{"a gap at the snapshot's index", []raft.Log{{Index: 2, Term: 1}, {Index: 6, Term: 3}}, 2, 5, true, []uint64{5, 6}},
		{"empty", nil, 0, 0, false, nil},
	} {
		s := storeOf(t, c.log...)
		from, to, point, err := dropUnvouched(s, 5, 3)
		if err != nil {
			t.Fatal(err)
		}
		if from != c.from || (from != 0 && to != c.to) || point != c.point {
			t.Errorf("%s: dropped %d..%d (point %v), want %d..%d (point %v)", c.name, from, to, point, c.from, c.to, c.point)
		}
		if got := indexes(t, s, 10); fmt.Sprint(got) != fmt.Sprint(c.left) {
			t.Errorf("%s: left %v, want %v", c.name, got, c.left)
		}
		var at raft.Log
		if c.point {
			if err := s.GetLog(5, &at); err != nil || !IsSnapshotPoint(&at) || at.Term != 3 {
				t.Errorf("%s: entry 5 is %+v (%v), want the snapshot's point of term 3", c.name, at, err)
			}
		}
	}
}

// The case TestInstalledSnapshotLeavesNoConflictingEntryBelowIt leaves out:
// the cut-off leader's uncommitted entries reach past the index of the
// snapshot it later installs. hashicorp/raft v1.7 remembers its last log
// index across the install, so the leader's next append, which starts at the
// snapshot's point, is checked against the log's entry there: one of another
// term before the guard drops it, none after. Either way the append is
// refused, the leader walks back past its compacted log and sends the
// snapshot again, for ever. Raft's paper discards the whole log here; the
// guard leaves the snapshot's point in the log (its index and term, as the
// append expects), so raft's own conflict check replaces the stale entries
// after it.
func TestStaleEntriesPastAnInstalledSnapshotDoNotStopCatchUp(t *testing.T) {
	staleCatchUp(t, 1024, func(committed, staleTo uint64) uint64 { return committed + 3 })
}

// The same with a follower that keeps no entries after its snapshots: raft's
// install compacts its log through the snapshot's index itself (up to
// min(index, last - TrailingLogs)), so the guard finds nothing to drop and
// no entry to replace with the snapshot's point, and the stale entries go on
// right after the point. (Found by TestSnapshotPointStress; in production a
// stale tail longer than TrailingLogs past the index does the same.)
func TestStaleEntriesPastASnapshotRaftCompactedDoNotStopCatchUp(t *testing.T) {
	staleCatchUp(t, 0, func(committed, staleTo uint64) uint64 { return committed + 3 })
}

// And with stale entries that end exactly at the snapshot's index: the
// guard drops them all and the log is empty, but raft remembers its last
// entry, index and term, and checks an append starting at its last index
// against that remembered term, not the log: the stale one. (Found by
// TestSnapshotPointStress.)
func TestStaleEntriesEndingAtTheSnapshotsIndexDoNotStopCatchUp(t *testing.T) {
	staleCatchUp(t, 1024, func(committed, staleTo uint64) uint64 { return staleTo })
}

// staleCatchUp cuts off the leader of a caught-up cluster while it appends
// entries nobody commits, lets the others elect a leader that writes until
// its last index is snapAt(committed, staleTo) and snapshots, and brings the old
// leader back, keeping trailing entries after its snapshots: it must catch
// up with one install, and hold the committed log after the snapshot.
func staleCatchUp(t *testing.T, trailing uint64, snapAt func(committed, staleTo uint64) uint64) {
	t.Helper()
	peers, old, committed := caughtUpCluster(t)
	rc := old.r.ReloadableConfig()
	rc.TrailingLogs = trailing
	if err := old.r.ReloadConfig(rc); err != nil {
		t.Fatal(err)
	}

	connectPeer(peers, old, false)
	for i := range 40 {
		old.r.Apply([]byte(fmt.Sprint("uncommitted ", i)), 0) // not waited on: the log grows while the lease lasts
	}
	deadline := time.Now().Add(5 * time.Second)
	for old.r.State() == raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("the cut-off leader did not step down")
		}
		time.Sleep(5 * time.Millisecond)
	}
	staleTo := old.r.LastIndex()
	if staleTo < committed+5 {
		t.Fatalf("the cut-off leader appended only %d entries", staleTo-committed)
	}

	leader, witness := newLeaderSnapshotsAt(t, peers, old, snapAt(committed, staleTo))
	snap := newestSnapshot(t, leader)
	if want := snapAt(committed, staleTo); snap.Index != want || snap.Index > staleTo || snap.Index <= committed {
		t.Fatalf("snapshot at %d: the case needs it at %d, inside the stale entries %d..%d", snap.Index, want, committed+1, staleTo)
	}
	applyN(t, leader.r, 3)

	connectPeer(peers, old, true)
	waitCaughtUp(t, old, leader)
	applyN(t, leader.r, 3)
	waitCaughtUp(t, old, leader)
	if got := old.fsm.restores.Load(); got != 1 {
		t.Fatalf("the old leader caught up with %d snapshot installs, want 1", got)
	}

	// Past the snapshot its log is the committed one; at the snapshot's
	// point it holds at most the point itself (the snapshot's term).
	last := old.r.LastIndex()
	if wl := witness.r.LastIndex(); last != wl {
		t.Fatalf("the old leader's log ends at %d, the witness's at %d", last, wl)
	}
	for i := snap.Index + 1; i <= last; i++ {
		var mine, theirs raft.Log
		if err := old.logs.GetLog(i, &mine); err != nil {
			t.Fatalf("old leader entry %d: %v", i, err)
		}
		if err := witness.logs.GetLog(i, &theirs); err != nil {
			t.Fatalf("witness entry %d: %v", i, err)
		}
		if mine.Term != theirs.Term || string(mine.Data) != string(theirs.Data) {
			t.Fatalf("entry %d: the old leader holds term %d %q, the committed one is term %d %q", i, mine.Term, mine.Data, theirs.Term, theirs.Data)
		}
	}
	var at raft.Log
	if err := old.logs.GetLog(snap.Index, &at); err == nil && at.Term != snap.Term {
		t.Fatalf("entry %d at the snapshot's point is of term %d, the snapshot's is %d", snap.Index, at.Term, snap.Term)
	}
}

// A replay that would run through a snapshot's point (its base is older
// than the point) is refused: the point is not the committed entry, and a
// no-op in its place would give another state without a word.
func TestReplayRefusesASnapshotPoint(t *testing.T) {
	logs := storeOf(t, raft.Log{Index: 1, Term: 1, Type: raft.LogNoop}, raft.Log{Index: 2, Term: 3, Type: raft.LogNoop})
	if _, _, _, err := dropUnvouched(logs, 1, 3); err != nil {
		t.Fatal(err)
	}
	_, err := RebuildAt(logs, raft.NewInmemSnapshotStore(), 2)
	if err == nil || !strings.Contains(err.Error(), "snapshot's point") {
		t.Fatalf("replay through a snapshot's point: %v", err)
	}
}

// An append commits on a follower no further than its own last entry
// (Raft's rule: min(leader's commit, index of the last new entry)). raft
// v1.7 takes min(leader's commit, the follower's last index), so an append
// that ends below a deposed leader's stale entries, while the leader's
// commit index is past them, would commit and apply the stale entries. A
// leader sends such an append when its replication to the follower starts
// far below the follower's log, as after the guard answers an older
// snapshot, and a lagging follower gets its entries in batches.
func TestAnAppendCommitsNoFurtherThanItsLastEntry(t *testing.T) {
	peers, old, committed := caughtUpCluster(t)
	applied := old.fsm.applied.Load()
	connectPeer(peers, old, false)
	for i := range 20 {
		old.r.Apply([]byte(fmt.Sprint("uncommitted ", i)), 0)
	}
	deadline := time.Now().Add(5 * time.Second)
	for old.r.State() == raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("the cut-off leader did not step down")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if old.r.LastIndex() < committed+5 {
		t.Fatalf("the cut-off leader appended only %d entries", old.r.LastIndex()-committed)
	}
	var others []*guardPeer
	for _, p := range peers {
		if p != old {
			others = append(others, p)
		}
	}
	leader := guardLeader(t, others)
	applyN(t, leader.r, 40)
	if leader.r.CommitIndex() <= old.r.LastIndex() {
		t.Fatalf("the new leader's commit index %d is not past the stale entries (to %d)", leader.r.CommitIndex(), old.r.LastIndex())
	}
	var prev raft.Log
	if err := leader.logs.GetLog(committed-2, &prev); err != nil {
		t.Fatal(err)
	}
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.id), Addr: []byte(leader.raw.LocalAddr())},
		Term:              leader.r.CurrentTerm(),
		PrevLogEntry:      prev.Index,
		PrevLogTerm:       prev.Term,
		Entries:           logEntries(t, leader.logs, committed-1, committed),
		LeaderCommitIndex: leader.r.CommitIndex(),
	}
	_, sender := raft.NewInmemTransport("")
	sender.Connect(old.raw.LocalAddr(), old.raw)
	var resp raft.AppendEntriesResponse
	if err := sender.AppendEntries(old.id, old.raw.LocalAddr(), req, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Fatalf("the append that matches the follower's log was refused: %+v", resp)
	}
	time.Sleep(200 * time.Millisecond) // raft hands committed entries to the state machine on its own goroutine
	if got := old.fsm.applied.Load(); got != applied {
		t.Fatalf("the deposed leader applied %d entries, %d of them its own uncommitted ones", got, got-applied)
	}
	if got := old.r.CommitIndex(); got > committed {
		t.Fatalf("the follower's commit index moved to %d, past the append's last entry %d", got, committed)
	}
}
