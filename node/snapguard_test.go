package node

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// countFSM counts applied entries; a restore sets the count from the
// snapshot and is counted too.
type countFSM struct {
	applied  atomic.Uint64
	restores atomic.Int32
}

func (f *countFSM) Apply(*raft.Log) any { f.applied.Add(1); return nil }

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	return countSnap(f.applied.Load()), nil
}

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.applied.Store(binary.BigEndian.Uint64(b[:]))
	f.restores.Add(1)
	return nil
}

type countSnap uint64

func (s countSnap) Persist(sink raft.SnapshotSink) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s))
	return persistBytes(sink, b[:])
}

// persistBytes writes a test snapshot's bytes and closes the sink, or
// cancels it on a failed write.
func persistBytes(sink raft.SnapshotSink, b []byte) error {
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countSnap) Release() {}

type guardPeer struct {
	id    raft.ServerID
	raw   *raft.InmemTransport
	fsm   *countFSM
	r     *raft.Raft
	logs  *raft.InmemStore
	snaps raft.SnapshotStore
}

// guardCluster starts three rafts on in-memory transports, each behind a
// snapshotGuard.
func guardCluster(t *testing.T) []*guardPeer {
	t.Helper()
	return guardClusterTrailing(t, 0)
}

// guardClusterTrailing is guardCluster with every raft keeping trailing
// entries after its snapshots.
func guardClusterTrailing(t *testing.T, trailing uint64) []*guardPeer {
	t.Helper()
	return guardClusterOf(t, trailing, false)
}

// guardClusterOf is guardClusterTrailing with, when files, snapshots in
// file stores that keep three (as node.New has them): older snapshots stay
// listed beside the newest.
func guardClusterOf(t *testing.T, trailing uint64, files bool) []*guardPeer {
	t.Helper()
	var peers []*guardPeer
	var servers []raft.Server
	for i := range 3 {
		addr, raw := raft.NewInmemTransport("")
		p := &guardPeer{id: raft.ServerID("g" + strconv.Itoa(i)), raw: raw, fsm: &countFSM{},
			logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		if files {
			snaps, err := raft.NewFileSnapshotStoreWithLogger(t.TempDir(), 3, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			p.snaps = snaps
		}
		peers = append(peers, p)
		servers = append(servers, raft.Server{ID: p.id, Address: addr, Suffrage: raft.Voter})
	}
	for _, a := range peers {
		for _, b := range peers {
			if a != b {
				a.raw.Connect(b.raw.LocalAddr(), b.raw)
			}
		}
	}
	for _, p := range peers {
		// trailing 0: the leader's log starts right after its snapshot
		rc := fastRaftConfig(p.id, hclog.New(&hclog.LoggerOptions{Output: io.Discard}), trailing)
		guard := newSnapshotGuard(p.raw, rc.Logger)
		r, err := raft.NewRaft(rc, p.fsm, p.logs, p.logs, p.snaps, guard)
		if err != nil {
			t.Fatal(err)
		}
		p.r = r
		guard.start(follower{r: r, logs: p.logs, snaps: p.snaps})
		t.Cleanup(func() { _ = r.Shutdown().Error() })
	}
	if err := peers[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	return peers
}

// fastRaftConfig is raft's configuration for the guard's tests: quick
// elections and commits, snapshots only when a test asks, trailing entries
// kept after each.
func fastRaftConfig(id raft.ServerID, log hclog.Logger, trailing uint64) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = id
	rc.Logger = log
	rc.HeartbeatTimeout = 100 * time.Millisecond
	rc.ElectionTimeout = 100 * time.Millisecond
	rc.LeaderLeaseTimeout = 50 * time.Millisecond
	rc.CommitTimeout = 5 * time.Millisecond
	rc.SnapshotThreshold = 1 << 30 // snapshots only when the test asks
	rc.SnapshotInterval = time.Hour
	rc.TrailingLogs = trailing
	return rc
}

func guardLeader(t *testing.T, peers []*guardPeer) *guardPeer {
	t.Helper()
	i := awaitLeader(len(peers), func(i int) *raft.Raft { return peers[i].r })
	if i < 0 {
		t.Fatal("no leader")
		return nil
	}
	return peers[i]
}

// awaitLeader waits up to 10 s for one of n rafts (raftOf(i)) to lead and
// returns its position, or -1.
func awaitLeader(n int, raftOf func(int) *raft.Raft) int {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for i := range n {
			if raftOf(i).State() == raft.Leader {
				return i
			}
		}
	}
	return -1
}

func applyN(t *testing.T, r *raft.Raft, n int) {
	t.Helper()
	for i := range n {
		if err := r.Apply([]byte(fmt.Sprint(i)), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCaughtUp waits until p's state machine has applied as many entries as
// the leader's.
func waitCaughtUp(t *testing.T, p, leader *guardPeer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.fsm.applied.Load() < leader.fsm.applied.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("%s applied %d entries, the leader %d", p.id, p.fsm.applied.Load(), leader.fsm.applied.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// selfInConfig reports whether p's latest configuration lists p.
func selfInConfig(t *testing.T, p *guardPeer) bool {
	t.Helper()
	f := p.r.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == p.id {
			return true
		}
	}
	return false
}

// newestSnapshot is the leader's newest stored snapshot.
func newestSnapshot(t *testing.T, leader *guardPeer) *raft.SnapshotMeta {
	t.Helper()
	list, err := leader.snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("leader snapshots: %v %d", err, len(list))
	}
	return list[0]
}

// resendSnapshot sends the leader's newest snapshot to follower again, as a
// leader whose replication fell back past its log does.
func resendSnapshot(t *testing.T, leader, follower *guardPeer) *raft.InstallSnapshotResponse {
	t.Helper()
	meta, data := newestSnapshotData(t, leader)
	req := snapshotRequest(leader.id, leader.raw.LocalAddr(), leader.r.CurrentTerm(), meta, len(data))
	var resp raft.InstallSnapshotResponse
	if err := leader.raw.InstallSnapshot(follower.id, follower.raw.LocalAddr(), req, &resp, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return &resp
}

// newestSnapshotData is p's newest stored snapshot, described and read.
func newestSnapshotData(t *testing.T, p *guardPeer) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	meta, rc, err := p.snaps.Open(newestSnapshot(t, p).ID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	return meta, data
}

// snapshotRequest is the InstallSnapshot a leader (id at addr, of term)
// sends for the snapshot meta describes, size bytes long.
func snapshotRequest(id raft.ServerID, addr raft.ServerAddress, term uint64, meta *raft.SnapshotMeta, size int) *raft.InstallSnapshotRequest {
	return &raft.InstallSnapshotRequest{
		RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)},
		SnapshotVersion:    meta.Version,
		Term:               term,
		Leader:             []byte(addr),
		LastLogIndex:       meta.Index,
		LastLogTerm:        meta.Term,
		Configuration:      raft.EncodeConfiguration(meta.Configuration),
		ConfigurationIndex: meta.ConfigurationIndex,
		Size:               int64(size),
	}
}

// storedEntries reads the entries from to to (both included) out of logs.
func storedEntries(logs raft.LogStore, from, to uint64) ([]*raft.Log, error) {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		l := new(raft.Log)
		if err := logs.GetLog(i, l); err != nil {
			return out, fmt.Errorf("entry %d: %w", i, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// logEntries is storedEntries, failing t when an entry is missing.
func logEntries(t *testing.T, logs raft.LogStore, from, to uint64) []*raft.Log {
	t.Helper()
	out, err := storedEntries(logs, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// staleResend builds the jepsen case: a follower is removed, the leader
// snapshots (a configuration without it) and compacts its log, the follower
// is re-added, installs that snapshot, takes the log after it (with the entry
// that re-added it) and applies it all; then the leader sends the same
// snapshot again. It returns the follower and its answer to the re-send.
func staleResend(t *testing.T) (leader, follower *guardPeer, resp *raft.InstallSnapshotResponse) {
	peers := guardCluster(t)
	leader = guardLeader(t, peers)
	follower = followerOf(peers, leader)
	applyN(t, leader.r, 5)
	if err := leader.r.RemoveServer(follower.id, 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	// The leader stops replicating to the removed follower a moment after
	// the removal commits, so the first entries may still reach it; write
	// and snapshot until its log ends before the snapshot point (under CI
	// load it once received all 20, and so needed no install).
	for round := 0; ; round++ {
		applyN(t, leader.r, 20)
		if err := leader.r.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		if follower.r.LastIndex() < newestSnapshot(t, leader).Index {
			break
		}
		if round == 10 {
			t.Fatal("the removed follower keeps receiving the leader's log")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := leader.r.AddVoter(follower.id, follower.raw.LocalAddr(), 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	applyN(t, leader.r, 10)
	waitCaughtUp(t, follower, leader)
	if got := follower.fsm.restores.Load(); got != 1 {
		t.Fatalf("the re-added follower caught up with %d snapshot installs, want 1", got)
	}
	if !selfInConfig(t, follower) {
		t.Fatal("the re-added follower does not see itself in its configuration")
	}
	return leader, follower, resendSnapshot(t, leader, follower)
}

func followerOf(peers []*guardPeer, leader *guardPeer) *guardPeer {
	for _, p := range peers {
		if p != leader {
			return p
		}
	}
	return nil
}

// The guard answers a re-sent snapshot that the follower already installed:
// the follower keeps its newer configuration, its state machine does not go
// back to the snapshot, and replication goes on after it.
func TestSnapshotGuardKeepsTheNewerLogOverAResentSnapshot(t *testing.T) {
	leader, follower, resp := staleResend(t)
	if !selfInConfig(t, follower) {
		t.Fatal("the follower lost itself from its configuration")
	}
	checkAnswered(t, leader, follower, resp, 1)
}

// checkAnswered: the guard said success, the state machine saw no install
// past the restores it had, and replication goes on after the snapshot.
func checkAnswered(t *testing.T, leader, follower *guardPeer, resp *raft.InstallSnapshotResponse, restores int32) {
	t.Helper()
	if !resp.Success {
		t.Fatalf("the guard answers a covered snapshot with success: %+v", resp)
	}
	if n := follower.fsm.restores.Load(); n != restores {
		t.Fatalf("the state machine was restored %d times, want %d", n, restores)
	}
	applyN(t, leader.r, 5)
	waitCaughtUp(t, follower, leader)
}

// A re-sent snapshot whose last entry is still in the follower's log is
// answered too.
func TestSnapshotGuardAnswersASnapshotItsLogHolds(t *testing.T) {
	peers := guardCluster(t)
	leader := guardLeader(t, peers)
	follower := followerOf(peers, leader)
	applyN(t, leader.r, 20)
	waitCaughtUp(t, follower, leader) // the leader's log starts after its snapshot
	if err := leader.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	applyN(t, leader.r, 5)
	waitCaughtUp(t, follower, leader)
	checkAnswered(t, leader, follower, resendSnapshot(t, leader, follower), 0)
}

// appendFromSnapshotPoint sends follower the leader's entries after the
// snapshot it installed, with that snapshot's point as the previous entry,
// as the leader does after the guard answers a re-sent snapshot.
func appendFromSnapshotPoint(t *testing.T, leader, follower *guardPeer) *raft.AppendEntriesResponse {
	t.Helper()
	point := newestSnapshot(t, leader)
	last, err := leader.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	entries := logEntries(t, leader.logs, point.Index+1, last)
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.id), Addr: []byte(leader.raw.LocalAddr())},
		Term:              leader.r.CurrentTerm(),
		PrevLogEntry:      point.Index,
		PrevLogTerm:       point.Term,
		Entries:           entries,
		LeaderCommitIndex: leader.r.CommitIndex(),
	}
	var resp raft.AppendEntriesResponse
	if err := leader.raw.AppendEntries(follower.id, follower.raw.LocalAddr(), req, &resp); err != nil {
		t.Fatal(err)
	}
	return &resp
}

// After the guard answers, the leader appends from the snapshot's point. A
// follower whose log starts after that point takes the append from its
// first entry on; raft alone refuses it, and the two loop.
func TestSnapshotGuardTakesAnAppendFromTheSnapshotPoint(t *testing.T) {
	leader, follower, _ := staleResend(t)
	if resp := appendFromSnapshotPoint(t, leader, follower); !resp.Success {
		t.Fatalf("the append from the snapshot's point was refused: %+v", resp)
	}
	applyN(t, leader.r, 5)
	waitCaughtUp(t, follower, leader)
}

// An append from the snapshot's point reaches raft without its previous
// entry, which the stored snapshot vouches for, and with its commit index
// bounded by its last entry; raft's conflict check then decides on the
// entries (TestStaleEntriesPastASnapshotRaftCompactedDoNotStopCatchUp: it
// replaces stale ones). An append whose previous entry the log holds, that
// starts past the log, or whose previous entry is no stored snapshot's
// point (another term) is left to raft as it is.
func TestSnapshotGuardHandsOnlyASnapshotPointOver(t *testing.T) {
	leader, peer, _ := staleResend(t)
	point := newestSnapshot(t, leader)
	held := follower{r: peer.r, logs: peer.logs, snaps: peer.snaps}
	var entry raft.Log
	if peer.logs.GetLog(point.Index, &entry) == nil {
		t.Fatalf("the follower's log holds the snapshot's point %d; the case needs a log that starts after it", point.Index)
	}
	if err := peer.logs.GetLog(point.Index+1, &entry); err != nil {
		t.Fatal(err)
	}
	req := &raft.AppendEntriesRequest{
		Term:              leader.r.CurrentTerm(),
		PrevLogEntry:      point.Index,
		PrevLogTerm:       point.Term,
		Entries:           []*raft.Log{&entry},
		LeaderCommitIndex: point.Index + 10,
	}
	moved := held.pastSnapshotPoint(req)
	if moved == nil || moved.PrevLogEntry != 0 || moved.PrevLogTerm != 0 || len(moved.Entries) != 1 || moved.LeaderCommitIndex != point.Index+1 {
		t.Fatalf("the append from the snapshot's point became %+v", moved)
	}
	if req.PrevLogEntry != point.Index || req.LeaderCommitIndex != point.Index+10 {
		t.Fatalf("the leader's own request was changed: %+v", req)
	}
	inLog := *req
	inLog.PrevLogEntry, inLog.PrevLogTerm = entry.Index, entry.Term
	past := *req
	past.PrevLogEntry = peer.r.LastIndex() + 1
	otherTerm := *req
	otherTerm.PrevLogTerm++
	for name, r := range map[string]*raft.AppendEntriesRequest{"in the log": &inLog, "past the log": &past, "another term": &otherTerm} {
		if got := held.pastSnapshotPoint(r); got != nil {
			t.Errorf("an append whose previous entry is %s was changed: %+v", name, got)
		}
	}
}

// A snapshot the follower does not have (it fell behind the leader's log)
// still reaches raft and is installed.
func TestSnapshotGuardPassesASnapshotTheLogLacks(t *testing.T) {
	peers := guardCluster(t)
	leader := guardLeader(t, peers)
	applyN(t, leader.r, 5)
	lagging := followerOf(peers, leader)
	waitCaughtUp(t, lagging, leader)
	for _, p := range peers {
		if p != lagging {
			p.raw.Disconnect(lagging.raw.LocalAddr())
			lagging.raw.Disconnect(p.raw.LocalAddr())
		}
	}
	applyN(t, leader.r, 20)
	if err := leader.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	applyN(t, leader.r, 3)
	for _, p := range peers {
		if p != lagging {
			p.raw.Connect(lagging.raw.LocalAddr(), lagging.raw)
			lagging.raw.Connect(p.raw.LocalAddr(), p.raw)
		}
	}
	waitCaughtUp(t, lagging, leader)
	if lagging.fsm.restores.Load() != 1 {
		t.Fatalf("the lagging follower caught up with %d snapshot installs, want 1", lagging.fsm.restores.Load())
	}
}

// The guard's pump stops with the transport, and a second close is safe.
func TestSnapshotGuardCloseTwice(t *testing.T) {
	_, raw := raft.NewInmemTransport("")
	g := newSnapshotGuard(raw, hclog.NewNullLogger())
	g.start(follower{})
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// fakeHeld holds every snapshot; its term is whatever the test says.
type fakeHeld struct{ now atomic.Uint64 }

func (f *fakeHeld) holds(*raft.InstallSnapshotRequest) bool   { return true }
func (f *fakeHeld) aheadOf(*raft.InstallSnapshotRequest) bool { return false }
func (f *fakeHeld) term() uint64                              { return f.now.Load() }
func (f *fakeHeld) pastSnapshotPoint(*raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	return nil
}
func (f *fakeHeld) installed(*raft.InstallSnapshotRequest) {}

// sendToFake sends an InstallSnapshot of term 5 carrying data but claiming
// size bytes to a guard whose follower is held.
func sendToFake(t *testing.T, held *fakeHeld, data []byte, size int64) (*raft.InstallSnapshotResponse, error) {
	t.Helper()
	addr, raw := raft.NewInmemTransport("")
	peerAddr, peer := raft.NewInmemTransport("")
	peer.Connect(addr, raw)
	g := newSnapshotGuard(raw, hclog.NewNullLogger())
	g.start(held)
	t.Cleanup(func() { _ = g.Close() })
	req := &raft.InstallSnapshotRequest{
		RPCHeader:       raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(peerAddr)},
		SnapshotVersion: raft.SnapshotVersionMax, Term: 5, LastLogIndex: 10, LastLogTerm: 5, Size: size,
	}
	var resp raft.InstallSnapshotResponse
	err := peer.InstallSnapshot("f", addr, req, &resp, bytes.NewReader(data))
	return &resp, err
}

// A term that moves on while the snapshot is read off the stream (raft's
// election timer fires meanwhile) turns the answer into a refusal at the
// new term: a deposed leader must not count it.
func TestSnapshotGuardRefusesWhenTheTermMovesDuringTheRead(t *testing.T) {
	held := &fakeHeld{}
	held.now.Store(6)
	resp, err := sendToFake(t, held, []byte("snapshot"), 8)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Success || resp.Term != 6 {
		t.Fatalf("want a refusal at term 6, got %+v", resp)
	}
	held.now.Store(5)
	if resp, err := sendToFake(t, held, []byte("snapshot"), 8); err != nil || !resp.Success {
		t.Fatalf("the same request at an unchanged term is answered with success: %+v %v", resp, err)
	}
}

// A snapshot shorter than it claims is an error, not a success.
func TestSnapshotGuardRefusesAShortSnapshot(t *testing.T) {
	held := &fakeHeld{}
	held.now.Store(5)
	if resp, err := sendToFake(t, held, []byte("snap"), 8); err == nil {
		t.Fatalf("a short snapshot was answered: %+v", resp)
	}
}

// A stored snapshot's point counts as held only while the log continues
// right after it: with the entry after the point gone (a log cut there),
// the follower cannot show it holds what came after the snapshot, and the
// request goes to raft.
func TestSnapshotGuardNeedsTheLogToContinueAfterAStoredSnapshot(t *testing.T) {
	leader, peer, _ := staleResend(t)
	point := newestSnapshot(t, leader)
	req := &raft.InstallSnapshotRequest{
		RPCHeader:       raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax},
		SnapshotVersion: point.Version,
		Term:            leader.r.CurrentTerm(),
		LastLogIndex:    point.Index,
		LastLogTerm:     point.Term,
	}
	held := follower{r: peer.r, logs: peer.logs, snaps: peer.snaps}
	var entry raft.Log
	if peer.logs.GetLog(point.Index, &entry) == nil {
		t.Fatalf("the follower's log holds the snapshot's point %d; the case needs a log that starts after it", point.Index)
	}
	if !held.holds(req) {
		t.Fatal("a stored snapshot followed by the log is not counted as held")
	}
	if peer.r.LastIndex() <= point.Index+1 {
		t.Fatalf("the follower's log ends at %d, want past %d", peer.r.LastIndex(), point.Index+1)
	}
	if err := peer.logs.DeleteRange(point.Index+1, point.Index+1); err != nil {
		t.Fatal(err)
	}
	if held.holds(req) {
		t.Fatal("a stored snapshot the log does not continue is counted as held")
	}
}

// olderResend builds a follower that has applied, and snapshotted, past the
// leader's newest snapshot (its own log compacted up to its snapshot), then
// has the leader send that older snapshot: a leader whose replication to it
// fell back past the leader's own log does this. raft v1.7 installs it: the
// state machine goes back to the older snapshot, and its log no longer
// holds the entries between the two.
func olderResend(t *testing.T) (leader, follower *guardPeer, applied uint64, resp *raft.InstallSnapshotResponse) {
	t.Helper()
	peers := guardCluster(t)
	leader = guardLeader(t, peers)
	follower = followerOf(peers, leader)
	applyN(t, leader.r, 20)
	waitCaughtUp(t, follower, leader)
	if err := leader.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	snapshotPastLeader(t, leader, follower)
	own := newestSnapshot(t, follower)
	if older := newestSnapshot(t, leader); older.Index >= own.Index {
		t.Fatalf("the leader's snapshot (%d) is not older than the follower's (%d)", older.Index, own.Index)
	}
	var entry raft.Log
	if follower.logs.GetLog(newestSnapshot(t, leader).Index, &entry) == nil {
		t.Fatal("the follower's log still holds the older snapshot's point; the case needs it compacted")
	}
	applied = follower.fsm.applied.Load()
	return leader, follower, applied, resendSnapshot(t, leader, follower)
}

// snapshotPastLeader has the leader write 20 entries, the follower snapshot
// after them (with no trailing entries its log then starts past them), and
// the leader write 5 more, all applied on the follower.
func snapshotPastLeader(t *testing.T, leader, follower *guardPeer) {
	t.Helper()
	applyN(t, leader.r, 20)
	waitCaughtUp(t, follower, leader)
	if err := follower.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	applyN(t, leader.r, 5)
	waitCaughtUp(t, follower, leader)
}

// The guard answers a snapshot older than what the follower has applied and
// snapshotted itself: the state machine does not go back, and the leader's
// appends from the older snapshot's point, whose first entries the follower
// compacted into its own snapshot, are taken from the follower's snapshot
// on.
func TestSnapshotGuardAnswersASnapshotOlderThanTheFollowers(t *testing.T) {
	leader, follower, before, resp := olderResend(t)
	if !resp.Success {
		t.Fatalf("the guard answers an older snapshot with success: %+v", resp)
	}
	if n := follower.fsm.restores.Load(); n != 0 {
		t.Fatalf("the state machine was restored %d times (applied %d -> %d), want 0", n, before, follower.fsm.applied.Load())
	}
	if resp := appendFromSnapshotPoint(t, leader, follower); !resp.Success {
		t.Fatalf("the append from the older snapshot's point was refused: %+v", resp)
	}
	if got := follower.fsm.applied.Load(); got != before {
		t.Fatalf("the append moved the state machine from %d to %d applied entries", before, got)
	}
	applyN(t, leader.r, 5)
	waitCaughtUp(t, follower, leader)
	if got, want := follower.fsm.applied.Load(), leader.fsm.applied.Load(); got != want {
		t.Fatalf("the follower applied %d entries, the leader %d", got, want)
	}
}

// A snapshot from a term the follower has not heard of yet, below what it
// has applied, is refused and changes nothing: raft would take the term and
// install it, and the state machine would go back (the stress test's
// "restored a snapshot of entry 133 after applying entry 140" on CI,
// 2026-11-28). Once the term is known, the same snapshot is judged as
// before and answered.
func TestSnapshotGuardRefusesAnOlderSnapshotOfANewerTerm(t *testing.T) {
	peers := guardCluster(t)
	leader := guardLeader(t, peers)
	follower := followerOf(peers, leader)
	applyN(t, leader.r, 20)
	waitCaughtUp(t, follower, leader)
	if err := leader.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	applyN(t, leader.r, 5)
	waitCaughtUp(t, follower, leader)
	before, term := follower.fsm.applied.Load(), follower.r.CurrentTerm()
	meta, data := newestSnapshotData(t, leader)
	if meta.Index >= before {
		t.Fatalf("the snapshot (%d) is not below what the follower applied (%d)", meta.Index, before)
	}
	req := snapshotRequest(leader.id, leader.raw.LocalAddr(), term+1, meta, len(data))
	var resp raft.InstallSnapshotResponse
	if err := leader.raw.InstallSnapshot(follower.id, follower.raw.LocalAddr(), req, &resp, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if resp.Success || resp.Term != term {
		t.Fatalf("a snapshot of term %d below the applied state was answered %+v, want a refusal at term %d", term+1, resp, term)
	}
	if n := follower.fsm.restores.Load(); n != 0 {
		t.Fatalf("the state machine was restored %d times", n)
	}
	if got := follower.fsm.applied.Load(); got != before || follower.r.CurrentTerm() != term {
		t.Fatalf("applied %d -> %d, term %d -> %d", before, got, term, follower.r.CurrentTerm())
	}
	resp = *resendSnapshot(t, leader, follower)
	if !resp.Success || follower.fsm.restores.Load() != 0 {
		t.Fatalf("the same snapshot in the current term: %+v, %d restores; want success and none", resp, follower.fsm.restores.Load())
	}
}

// An append whose previous entry lies below the follower's newer snapshot
// reaches raft from that snapshot on: entries up to its index are left out,
// the rest go without a previous entry, the commit index bounded by the
// append's last entry. An entry at the snapshot's index of another term, or
// a log that does not continue after the snapshot, leaves it to raft.
func TestSnapshotGuardCutsAnAppendBelowANewerSnapshot(t *testing.T) {
	leader, peer, _, _ := olderResend(t)
	older, newer := newestSnapshot(t, leader), newestSnapshot(t, peer)
	held := follower{r: peer.r, logs: peer.logs, snaps: peer.snaps}
	entriesFrom := func(from, to uint64) []*raft.Log { return logEntries(t, leader.logs, from, to) }
	last := leader.r.LastIndex()
	req := func(entries []*raft.Log) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{Term: leader.r.CurrentTerm(), PrevLogEntry: older.Index, PrevLogTerm: older.Term,
			Entries: entries, LeaderCommitIndex: last + 10}
	}
	whole := req(entriesFrom(older.Index+1, last))
	moved := held.pastSnapshotPoint(whole)
	if moved == nil || moved.PrevLogEntry != 0 || moved.PrevLogTerm != 0 || moved.LeaderCommitIndex != last ||
		len(moved.Entries) != int(last-newer.Index) || moved.Entries[0].Index != newer.Index+1 {
		t.Fatalf("an append from %d to %d over a snapshot at %d became %+v", older.Index, last, newer.Index, moved)
	}
	if len(whole.Entries) != int(last-older.Index) || whole.PrevLogEntry != older.Index {
		t.Fatalf("the leader's own request was changed: %+v", whole)
	}
	short := req(entriesFrom(older.Index+1, newer.Index-1))
	if moved := held.pastSnapshotPoint(short); moved == nil || len(moved.Entries) != 0 || moved.LeaderCommitIndex != newer.Index-1 {
		t.Fatalf("an append that ends below the newer snapshot became %+v", moved)
	}
	conflicting := req(entriesFrom(older.Index+1, last))
	at := *conflicting.Entries[newer.Index-older.Index-1]
	at.Term++
	conflicting.Entries[newer.Index-older.Index-1] = &at
	if moved := held.pastSnapshotPoint(conflicting); moved != nil {
		t.Fatalf("an append with another term at the snapshot's index was changed: %+v", moved)
	}
	if err := peer.logs.DeleteRange(newer.Index+1, newer.Index+1); err != nil {
		t.Fatal(err)
	}
	if moved := held.pastSnapshotPoint(req(entriesFrom(older.Index+1, last))); moved != nil {
		t.Fatalf("an append over a snapshot the log does not continue was changed: %+v", moved)
	}
}

// A follower whose file store still lists a snapshot at the re-sent one's
// point (it took one there itself, or installed that very snapshot, then
// snapshotted past it and compacted its log) is no different: the log does
// not continue after the older point, but it does after the newer snapshot,
// so the re-sent snapshot is answered and the append from its point is cut
// at the newer one. Before, the older point's own snapshot decided alone:
// raft installed the snapshot (the state machine went back) and refused
// the append, whose entries the log no longer held.
func TestSnapshotGuardAnswersAnOlderSnapshotItStillLists(t *testing.T) {
	peers := guardClusterOf(t, 0, true)
	leader := guardLeader(t, peers)
	peer := followerOf(peers, leader)
	applyN(t, leader.r, 20)
	waitCaughtUp(t, peer, leader)
	for _, p := range []*guardPeer{leader, peer} {
		if err := p.r.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	older := newestSnapshot(t, leader)
	if own := newestSnapshot(t, peer); own.Index != older.Index || own.Term != older.Term {
		t.Fatalf("the follower snapshotted at %d/%d, the leader at %d/%d; the case needs the same point", own.Index, own.Term, older.Index, older.Term)
	}
	snapshotPastLeader(t, leader, peer)
	held := follower{r: peer.r, logs: peer.logs, snaps: peer.snaps}
	var entry raft.Log
	if !held.snapshotAt(older.Index, older.Term) || peer.logs.GetLog(older.Index+1, &entry) == nil {
		t.Fatalf("the case needs the follower to list a snapshot at %d and its log to start past it", older.Index)
	}
	newer, last := newestSnapshot(t, peer), leader.r.LastIndex()
	entries := logEntries(t, leader.logs, older.Index+1, last)
	moved := held.pastSnapshotPoint(&raft.AppendEntriesRequest{Term: leader.r.CurrentTerm(),
		PrevLogEntry: older.Index, PrevLogTerm: older.Term, Entries: entries, LeaderCommitIndex: last})
	if moved == nil || len(moved.Entries) == 0 || moved.Entries[0].Index != newer.Index+1 {
		t.Fatalf("an append from the listed older point %d is not cut at the newer snapshot %d: %+v", older.Index, newer.Index, moved)
	}
	before := peer.fsm.applied.Load()
	if resp := resendSnapshot(t, leader, peer); !resp.Success {
		t.Fatalf("the guard answers an older snapshot the follower still lists with success: %+v", resp)
	}
	if n := peer.fsm.restores.Load(); n != 0 {
		t.Fatalf("the state machine was restored %d times (applied %d -> %d), want 0", n, before, peer.fsm.applied.Load())
	}
	if resp := appendFromSnapshotPoint(t, leader, peer); !resp.Success {
		t.Fatalf("the append from the older snapshot's point was refused: %+v", resp)
	}
	applyN(t, leader.r, 5)
	waitCaughtUp(t, peer, leader)
	if got, want := peer.fsm.applied.Load(), leader.fsm.applied.Load(); got != want {
		t.Fatalf("the follower applied %d entries, the leader %d", got, want)
	}
}

// recordingHeld holds every snapshot, and records whether raft (the test)
// still had an append unanswered when the guard judged one.
type recordingHeld struct {
	fakeHeld
	appendOpen atomic.Bool
	judged     chan bool // appendOpen at each judgement
}

func (f *recordingHeld) holds(*raft.InstallSnapshotRequest) bool {
	f.judged <- f.appendOpen.Load()
	return true
}

// The guard judges a snapshot only once raft has answered every request
// handed to it before: an append raft has taken may commit past the
// snapshot, and judged before that (with raft's applied index still below
// the snapshot's) the snapshot went on to raft, which installed it over
// the newer state (TestSnapshotPointStress, seed 370744160: a follower's
// state went back from entry 10 to entry 8).
func TestSnapshotGuardJudgesASnapshotAfterTheAppendBeforeIt(t *testing.T) {
	addr, raw := raft.NewInmemTransportWithTimeout("", 10*time.Second)
	peerAddr, peer := raft.NewInmemTransportWithTimeout("", 10*time.Second)
	peer.Connect(addr, raw)
	held := &recordingHeld{judged: make(chan bool, 4)}
	held.now.Store(5)
	g := newSnapshotGuard(raw, hclog.NewNullLogger())
	g.start(held)
	t.Cleanup(func() { _ = g.Close() })

	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(peerAddr)}
	appendDone := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		appendDone <- peer.AppendEntries("f", addr, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 5, LeaderCommitIndex: 10}, &resp)
	}()
	// Raft (here, the test) takes the append and works on it a while.
	var taken raft.RPC
	select {
	case taken = <-g.Consumer():
	case <-time.After(5 * time.Second):
		t.Fatal("the append did not reach raft")
	}
	held.appendOpen.Store(true)
	snapDone := make(chan error, 1)
	go func() {
		req := &raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: raft.SnapshotVersionMax, Term: 5, LastLogIndex: 8, LastLogTerm: 5, Size: 8}
		var resp raft.InstallSnapshotResponse
		snapDone <- peer.InstallSnapshot("f", addr, req, &resp, bytes.NewReader([]byte("snapshot")))
	}()
	select {
	case open := <-held.judged:
		if open {
			t.Fatal("the snapshot was judged while raft was still working on the append before it")
		}
		t.Fatal("the snapshot was judged before raft answered the append")
	case <-time.After(200 * time.Millisecond):
	}
	held.appendOpen.Store(false)
	taken.Respond(&raft.AppendEntriesResponse{Term: 5, Success: true}, nil)
	if err := <-appendDone; err != nil {
		t.Fatalf("the append's answer did not reach the leader: %v", err)
	}
	select {
	case open := <-held.judged:
		if open {
			t.Fatal("judged with the append open")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the snapshot was never judged after the append was answered")
	}
	if err := <-snapDone; err != nil {
		t.Fatal(err)
	}
}

// A request the pump tracked but never handed to raft, because the guard
// closed while raft was not reading (its main loop already gone on
// shutdown), is answered with the transport's shutdown error: the
// goroutine waiting on its answer ends, and the count of requests raft
// owes goes back to 0. Before, that goroutine waited forever.
func TestSnapshotGuardAnswersWhatItTrackedWhenClosed(t *testing.T) {
	addr, raw := raft.NewInmemTransportWithTimeout("", 10*time.Second)
	peerAddr, peer := raft.NewInmemTransportWithTimeout("", 10*time.Second)
	peer.Connect(addr, raw)
	g := newSnapshotGuard(raw, hclog.NewNullLogger())
	g.start(&fakeHeld{})
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(peerAddr)}
	done := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		done <- peer.AppendEntries("f", addr, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 5}, &resp)
	}()
	awaitTracked(t, g) // nobody reads g.Consumer()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an append raft never saw was answered without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an append the guard tracked and never handed to raft was not answered after Close")
	}
	if !g.inflight.wait(make(chan struct{})) {
		t.Fatal("unreachable")
	}
}

// The same for an append sent on a pipeline: the answer carries a typed
// (empty) response with the error, since raft's in-memory pipeline copies
// the response before it looks at the error. An answer of nil panicked
// the leader's pipeline goroutine (make test, node package, after the
// change above).
func TestSnapshotGuardAnswersAPipelinedAppendItTrackedWhenClosed(t *testing.T) {
	addr, raw := raft.NewInmemTransportWithTimeout("", 10*time.Second)
	_, peer := raft.NewInmemTransportWithTimeout("", 10*time.Second)
	peer.Connect(addr, raw)
	g := newSnapshotGuard(raw, hclog.NewNullLogger())
	g.start(&fakeHeld{})
	pipe, err := peer.AppendEntriesPipeline("f", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	var resp raft.AppendEntriesResponse
	if _, err := pipe.AppendEntries(&raft.AppendEntriesRequest{Term: 5}, &resp); err != nil {
		t.Fatal(err)
	}
	awaitTracked(t, g)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-pipe.Consumer():
		if f.Error() == nil {
			t.Fatal("an append raft never saw was answered without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pipelined append was not answered after Close")
	}
}

// awaitTracked waits until the pump has tracked one request (handed on to
// a raft that does not read it).
func awaitTracked(t *testing.T, g *snapshotGuard) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.inflight.mu.Lock()
		n := g.inflight.n
		g.inflight.mu.Unlock()
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the append was not tracked (%d in flight)", n)
		}
		time.Sleep(time.Millisecond)
	}
}
