package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A leader can re-send a snapshot that a follower's log already covers: its
// replication to that follower fell back past the start of its own log (seen
// after a member was removed, wiped and re-joined). hashicorp/raft v1.7
// installs such a snapshot anyway:
//   - the follower's state machine goes back to the snapshot's index and
//     re-applies the entries after it only as the commit index moves on, so
//     reads on that follower go back in time meanwhile;
//   - its latest configuration becomes the snapshot's, and the newer
//     configuration entries it holds in its log are forgotten: a re-joined
//     member stops counting itself as a voter until the next change.
//
// The snapshot re-sent can also be older than one the follower took itself
// and compacted its log into; raft installs that too, and with the entries
// between the two gone it panics when the commit index next moves.
//
// Raft's paper says a follower that receives a snapshot describing a prefix
// of its log keeps the entries that follow. snapshotGuard does that: it sits
// between the transport and raft and answers such a request itself.
//
// The leader then goes on with an append whose previous entry is the
// snapshot's point. A follower that installed that snapshot holds no log
// entry there, only the entries after it, and raft v1.7 looks the previous
// entry up in the log alone once the log is past it: it refuses, the leader
// walks back to the snapshot again, and the two loop. The guard hands such
// an append to raft without its previous entry, which the stored snapshot
// vouches for; raft checks its entries against the log's after the point.

// guardedTransport is what raft gets from the network transport: the base
// interface plus the optional ones raft looks for.
type guardedTransport interface {
	raft.Transport
	raft.WithClose
	raft.WithPreVote
}

// snapshotGuard passes every RPC to raft except an InstallSnapshot that the
// follower already holds; those it drains and answers with success, which
// moves the leader's replication on past the snapshot. Appends that start at
// a snapshot point the log lacks it hands on without their previous entry.
type snapshotGuard struct {
	guardedTransport
	in   <-chan raft.RPC
	out  chan raft.RPC
	held heldState
	log  hclog.Logger
	stop chan struct{}
	once sync.Once
	// seen is the highest log index a leader's request has named to this
	// node (an append's last entry or commit index, a snapshot's index):
	// what a follower knows the cluster's log to hold.
	seen atomic.Uint64
	// inflight holds a snapshot back until raft has answered the requests
	// before it.
	inflight inflight
	// store, when set, keeps a node that cannot append from campaigning
	// (campaign.go). Set before raft starts.
	store *watchedStore
}

// heldState is what the guard asks about the follower. Its methods run on
// the pump and must not wait on raft's main loop.
type heldState interface {
	// holds reports whether the follower already has all that the
	// snapshot describes, and the log goes on right after it.
	holds(*raft.InstallSnapshotRequest) bool
	// aheadOf reports whether the snapshot comes in a term this node has
	// not heard of yet while its state machine has applied past the
	// snapshot's last entry.
	aheadOf(*raft.InstallSnapshotRequest) bool
	// term is raft's current term.
	term() uint64
	// pastSnapshotPoint returns the append without a previous entry when
	// that entry is a snapshot point the log lacks, or nil.
	pastSnapshotPoint(*raft.AppendEntriesRequest) *raft.AppendEntriesRequest
	// installed is told of a snapshot raft has just installed, before
	// raft gets the next request.
	installed(*raft.InstallSnapshotRequest)
}

func newSnapshotGuard(inner guardedTransport, log hclog.Logger) *snapshotGuard {
	return &snapshotGuard{
		guardedTransport: inner,
		in:               inner.Consumer(),
		out:              make(chan raft.RPC),
		log:              log,
		stop:             make(chan struct{}),
	}
}

// start begins passing RPCs on, judged against held. Requests wait in the
// transport until then.
func (g *snapshotGuard) start(held heldState) {
	g.held = held
	go g.pump()
}

// Consumer is what raft reads its RPCs from.
func (g *snapshotGuard) Consumer() <-chan raft.RPC { return g.out }

// Close stops the pump and closes the transport; it may be called twice
// (raft's shutdown closes its transport, and so does the node's).
func (g *snapshotGuard) Close() error {
	g.once.Do(func() { close(g.stop) })
	return g.guardedTransport.Close()
}

func (g *snapshotGuard) pump() {
	for {
		var rpc raft.RPC
		select {
		case <-g.stop: // select picks at random when both are ready
			return
		default:
		}
		select {
		case rpc = <-g.in:
		case <-g.stop:
			return
		}
		switch req := rpc.Command.(type) {
		case *raft.InstallSnapshotRequest:
			g.see(req.LastLogIndex)
			// Judge against what raft has made of every request before
			// this one: an append raft took but has not finished may
			// commit past the snapshot, and judged before that, the
			// snapshot went to raft, which installed it over the newer
			// state (the stress test saw 10 -> 8).
			if !g.inflight.wait(g.stop) {
				return
			}
			switch {
			case g.held.holds(req):
				g.answerHeld(rpc, req)
			case g.held.aheadOf(req):
				g.refuseAhead(rpc, req)
			default:
				g.installThenWait(rpc)
			}
			continue
		case *raft.TimeoutNowRequest:
			if g.refusesTransfer() {
				g.log.Warn("leadership transfer refused: this node's raft log store cannot append")
				rpc.Respond(emptyResponse(req), errStoreCannotAppend)
				continue
			}
		case *raft.AppendEntriesRequest:
			g.see(max(req.LeaderCommitIndex, req.PrevLogEntry+uint64(len(req.Entries))))
			if moved := g.held.pastSnapshotPoint(req); moved != nil {
				g.log.Info("append starts at or below a snapshot the log lacks: handed to raft without its previous entry",
					"previous", req.PrevLogEntry, "entries", len(req.Entries), "kept", len(moved.Entries))
				rpc.Command = moved
			} else if bounded := commitBounded(req); bounded != nil {
				rpc.Command = bounded
			}
		}
		g.inflight.track(&rpc)
		select {
		case g.out <- rpc:
		case <-g.stop:
			// Tracked but never handed to raft: answer it, or the
			// goroutine waiting on its answer waits forever.
			rpc.Respond(emptyResponse(rpc.Command), raft.ErrTransportShutdown)
			return
		}
	}
}

// emptyResponse is a zero response of the kind cmd expects. An answer
// carrying an error still needs one: raft's in-memory pipeline copies the
// response of an append before it looks at the error (and panics on nil).
func emptyResponse(cmd any) any {
	switch cmd.(type) {
	case *raft.AppendEntriesRequest:
		return &raft.AppendEntriesResponse{}
	case *raft.RequestVoteRequest:
		return &raft.RequestVoteResponse{}
	case *raft.RequestPreVoteRequest:
		return &raft.RequestPreVoteResponse{}
	case *raft.InstallSnapshotRequest:
		return &raft.InstallSnapshotResponse{}
	case *raft.TimeoutNowRequest:
		return &raft.TimeoutNowResponse{}
	}
	return nil
}

// inflight counts the requests handed to raft that it has not answered
// yet. Each answer passes through a goroutine on its way back (one per
// request: a follower takes a few hundred appends a second, each carrying a
// group of writes).
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

// track makes rpc's answer count down when raft gives it.
func (f *inflight) track(rpc *raft.RPC) {
	reply := rpc.RespChan
	answered := make(chan raft.RPCResponse, 1)
	rpc.RespChan = answered
	f.mu.Lock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
	go func() {
		resp := <-answered
		f.mu.Lock()
		if f.n--; f.n == 0 {
			close(f.idle)
		}
		f.mu.Unlock()
		reply <- resp
	}()
}

// wait returns true once raft has answered every request tracked, false if
// stop closes first.
func (f *inflight) wait(stop <-chan struct{}) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-stop:
		return false
	}
}

// commitBounded returns a copy of an append whose leader's commit index lies
// past the append's last entry, bounded by that entry, or nil. Raft's paper
// has a follower commit up to min(leader's commit, index of the last new
// entry); raft v1.7 takes min(leader's commit, its own last index), which
// counts entries after the append that it has not checked against the
// leader's. A follower holding a deposed leader's uncommitted entries after
// them would commit and apply those
// (TestAnAppendCommitsNoFurtherThanItsLastEntry). A leader sends such an
// append when its replication to the follower starts below the follower's
// log and goes in batches: after the guard answered an older snapshot, or to
// a follower that lags. A caught-up follower is sent every entry up to the
// leader's last, so its appends pass unchanged.
func commitBounded(req *raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	last := req.PrevLogEntry + uint64(len(req.Entries))
	if req.LeaderCommitIndex <= last {
		return nil
	}
	bounded := *req
	bounded.LeaderCommitIndex = last
	return &bounded
}

// see records index as seen, if it is the highest yet.
func (g *snapshotGuard) see(index uint64) {
	for {
		old := g.seen.Load()
		if index <= old || g.seen.CompareAndSwap(old, index) {
			return
		}
	}
}

// answerHeld drains a snapshot the follower holds and answers it. The data
// must be read off the stream before the answer, as raft itself does, or the
// connection is left mid-message. Raft's main loop runs on meanwhile (raft
// would be busy installing): with no request reaching it while the pump
// drains, its election timer may fire and move the term on, so the answer
// is checked again after the read and refused if the term moved, lest a
// deposed leader count it as a follower's confirmation.
func (g *snapshotGuard) answerHeld(rpc raft.RPC, req *raft.InstallSnapshotRequest) {
	n, err := io.Copy(io.Discard, rpc.Reader)
	if err == nil && n != req.Size {
		err = fmt.Errorf("short snapshot: %d of %d bytes", n, req.Size)
	}
	if err != nil {
		rpc.Respond(nil, err)
		return
	}
	if term := g.held.term(); term != req.Term || !g.held.holds(req) {
		rpc.Respond(&raft.InstallSnapshotResponse{Term: term}, nil)
		return
	}
	g.log.Info("snapshot not installed: this follower already holds and has applied its last entry",
		"index", req.LastLogIndex, "term", req.LastLogTerm, "bytes", n)
	rpc.Respond(&raft.InstallSnapshotResponse{Term: req.Term, Success: true}, nil)
}

// refuseAhead drains a snapshot that would take the state machine back and
// refuses it, for now. holds judges a snapshot only in the current term
// (its answer must not confirm a leader of another term), so one from a
// newer leader this node has not heard of yet went to raft, which takes
// the new term and installs it: the state machine went back from the
// entries it had applied to the snapshot's (the stress test saw 140 -> 133
// on CI). Committed entries are the same on every member, so a snapshot
// below what was applied holds nothing new; the leader's heartbeats bring
// its term within a heartbeat, and the leader's next try is judged then.
func (g *snapshotGuard) refuseAhead(rpc raft.RPC, req *raft.InstallSnapshotRequest) {
	if _, err := io.Copy(io.Discard, rpc.Reader); err != nil {
		rpc.Respond(nil, err)
		return
	}
	g.log.Info("snapshot refused: it comes in a newer term and this node has applied past it",
		"index", req.LastLogIndex, "term", req.Term)
	rpc.Respond(&raft.InstallSnapshotResponse{Term: g.held.term()}, nil)
}

// installThenWait hands a snapshot to raft and holds the next request until
// raft has answered, so that a copy of the same snapshot arriving on another
// connection meanwhile (the leader's old replication to a re-added member
// can send one) is judged against the state the first one left. Raft's main
// loop is busy with the install all that time anyway.
func (g *snapshotGuard) installThenWait(rpc raft.RPC) {
	reply := rpc.RespChan
	done := make(chan raft.RPCResponse, 1)
	rpc.RespChan = done
	select {
	case g.out <- rpc:
	case <-g.stop:
		return
	}
	select {
	case resp := <-done:
		if ir, _ := resp.Response.(*raft.InstallSnapshotResponse); resp.Error == nil && ir != nil && ir.Success {
			if req, _ := rpc.Command.(*raft.InstallSnapshotRequest); req != nil {
				g.held.installed(req)
			}
		}
		reply <- resp
	case <-g.stop:
	}
}

// follower answers the guard from this node's raft, log and snapshots.
type follower struct {
	r     *raft.Raft
	logs  raft.LogStore // the store raft is given (its cache, so a deletion reaches both)
	snaps raft.SnapshotStore
	log   hclog.Logger // may be nil
}

// holds: the request is one raft would read (versions in range) of the
// current term, the state machine has been given the snapshot's last index,
// and that entry is known here with the same term, either in the log (so,
// by raft's log matching, every entry before it too) or as the point of a
// stored snapshot (a follower that installed this very snapshot keeps only
// the log after it) that the log continues right after, so the leader's
// next append can start there (pastSnapshotPoint). Any doubt (an entry
// compacted away, a read error, another term) leaves the request to raft.
//
// A snapshot older than one this follower stored is held too, when its
// entry is gone from the log (compacted into the newer snapshot) and the
// log continues right after the newest one (which decides, though the
// follower may also keep the older one: it took a snapshot at the same
// index). Both snapshots hold only
// committed entries, and committed entries are the same on every member, so
// the newer one already contains the older. raft v1.7 would install it: the
// state machine goes back, the log no longer holds the entries between the
// two, and the follower panics ("log not found") when the commit index next
// moves (TestSnapshotGuardAnswersASnapshotOlderThanTheFollowers).
func (f follower) holds(req *raft.InstallSnapshotRequest) bool {
	if v := req.ProtocolVersion; v < raft.ProtocolVersionMax-1 || v > raft.ProtocolVersionMax {
		return false
	}
	if req.SnapshotVersion < raft.SnapshotVersionMin || req.SnapshotVersion > raft.SnapshotVersionMax {
		return false
	}
	if req.Term != f.r.CurrentTerm() || f.r.AppliedIndex() < req.LastLogIndex {
		return false
	}
	var entry raft.Log
	if err := f.logs.GetLog(req.LastLogIndex, &entry); err == nil {
		return entry.Term == req.LastLogTerm
	}
	if newer, ok := f.snapshotAbove(req.LastLogIndex); ok {
		return f.continuesAfter(newer.Index)
	}
	return f.snapshotAt(req.LastLogIndex, req.LastLogTerm) && f.continuesAfter(req.LastLogIndex)
}

// aheadOf: a request of a term past raft's current one for a snapshot whose
// last entry the state machine has already applied.
func (f follower) aheadOf(req *raft.InstallSnapshotRequest) bool {
	return req.Term > f.r.CurrentTerm() && f.r.AppliedIndex() >= req.LastLogIndex
}

// continuesAfter reports whether the log goes on right after index, or ends
// there: the entries after a stored snapshot are all here.
func (f follower) continuesAfter(index uint64) bool {
	var entry raft.Log
	return f.r.LastIndex() == index || f.logs.GetLog(index+1, &entry) == nil
}

func (f follower) term() uint64 { return f.r.CurrentTerm() }

// pastSnapshotPoint: an append that starts past the tail of the log, or
// whose previous entry the log holds (the steady case), is raft's: one look
// at raft's last index, and at the log's entry there. The rest is an append
// whose previous entry is missing from the log but is a stored snapshot's
// point, index and term: the follower's state there is that snapshot, whose
// last entry is the leader's previous one, so the append is consistent with
// it. Raft checks the previous entry against the log alone, or, at its last
// index, against the last entry it remembers, and either may be gone: the
// guard dropped the stale entries up to the point (those that ended at the
// point leave raft remembering the last one, term and all), or raft's
// install compacted the log through the point itself (a follower keeping
// fewer entries than went on past it), leaving no entry to store the point
// in. Raft refuses, the leader walks back past its log, sends the snapshot
// again, and the two loop. So raft gets a copy without a previous entry and
// checks only the entries: it keeps those the log holds with the same term
// (log matching makes them the same entries) and replaces the log from the
// first that differs. The commit index is bounded by the append's last
// entry (as Raft's paper has it), lest stale entries after it that the log
// still holds count as committed. A copy, because the in-memory transport of
// the tests hands the leader's own request over.
//
// An append whose previous entry lies below a newer stored snapshot (the
// leader goes on from an older snapshot the guard answered, holds) is
// handled the same way from the newest such snapshot on, whether or not the
// older one is stored too: its entries up to the
// newer snapshot's index are committed ones the snapshot already holds and
// are left out (one at that index must have the snapshot's term, or the
// append is raft's), and raft gets the rest without a previous entry.
func (f follower) pastSnapshotPoint(req *raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	if req.PrevLogEntry == 0 || req.PrevLogEntry > f.r.LastIndex() {
		return nil
	}
	var entry raft.Log
	if err := f.logs.GetLog(req.PrevLogEntry, &entry); err == nil {
		return nil // raft finds it
	}
	entries := req.Entries
	if newer, ok := f.snapshotAbove(req.PrevLogEntry); ok {
		if !f.continuesAfter(newer.Index) {
			return nil
		}
		if entries, ok = entriesAfter(req.Entries, newer.Index, newer.Term); !ok {
			return nil
		}
	} else if !f.snapshotAt(req.PrevLogEntry, req.PrevLogTerm) {
		return nil
	}
	moved := *req
	moved.Entries = entries
	moved.PrevLogEntry, moved.PrevLogTerm = 0, 0
	moved.LeaderCommitIndex = min(req.LeaderCommitIndex, req.PrevLogEntry+uint64(len(req.Entries)))
	return &moved
}

// entriesAfter is the part of an append's entries past index; false when
// one at index has another term than the snapshot there.
func entriesAfter(entries []*raft.Log, index, term uint64) ([]*raft.Log, bool) {
	for i, e := range entries {
		if e.Index == index && e.Term != term {
			return nil, false
		}
		if e.Index > index {
			return entries[i:], true
		}
	}
	return nil, true
}

// snapshotAbove is the newest stored snapshot past index that the state
// machine has been given (every stored snapshot is, unless one is being
// installed just then).
func (f follower) snapshotAbove(index uint64) (*raft.SnapshotMeta, bool) {
	list, err := f.snaps.List()
	if err != nil {
		return nil, false
	}
	var newest *raft.SnapshotMeta
	for _, m := range list {
		if m.Index > index && (newest == nil || m.Index > newest.Index) {
			newest = m
		}
	}
	return newest, newest != nil && newest.Index <= f.r.AppliedIndex()
}

// snapshotAt reports whether a stored snapshot ends at index and term.
func (f follower) snapshotAt(index, term uint64) bool {
	list, err := f.snaps.List()
	if err != nil {
		return false
	}
	for _, m := range list {
		if m.Index == index && m.Term == term {
			return true
		}
	}
	return false
}

// installed drops from the log the entries at and below an installed
// snapshot's index that the snapshot does not vouch for.
//
// hashicorp/raft v1.7 compacts the log after installing a snapshot from a
// leader only up to min(snapshot index, last log index - TrailingLogs)
// (https://github.com/hashicorp/raft/issues/697, PR #704). A follower that
// had entries the leader never committed (a leader cut off and deposed, as
// n3 in the jepsen run of 2026-11-27) keeps those below the snapshot's index
// when its log ends before it: it never applies them (its state machine
// starts at the snapshot), but they stay in its store, and were it to lead
// again a follower needing that range would be sent them in place of the
// committed entries. Raft's paper (figure 13) discards the log unless its
// entry at the snapshot's index has the snapshot's term.
//
// The guard calls this after raft answered the install and before raft sees
// the next request, so raft's main loop takes no append meanwhile; what it
// may still do (a heartbeat reads the log; a snapshot of its own compacts
// below this index; a leadership won in between appends above it) does not
// touch what is deleted here. With the entries gone the follower is, for
// raft, a node with an empty log and this snapshot: raft's last entry is the
// snapshot's (its remembered last log index lies below it), an append that
// starts at the snapshot's point is checked against the snapshot's term, and
// as a leader raft sends a snapshot to a follower that needs an entry it no
// longer holds. When the entry at the index has the snapshot's term nothing
// is deleted: raft checks appends against it as before.
//
// Where the stale entries go on past the index, raft remembers a last log
// index above the snapshot and checks the leader's next append, which
// starts at the snapshot's point, against the log's entry there: missing
// (or of another term) it refuses, the leader walks back past its compacted
// log, sends the snapshot again, and the two loop for ever. So the point
// itself is stored there (snapshotPoint): the append is checked against the
// snapshot's term, and raft's own conflict check then replaces the stale
// entries after it with the leader's. Where no point can serve (raft's
// install compacted the log through the index itself, or the stale entries
// ended at the index and raft remembers the last one's term),
// pastSnapshotPoint hands the append to raft without its previous entry.
func (f follower) installed(req *raft.InstallSnapshotRequest) {
	from, to, point, err := dropUnvouched(f.logs, req.LastLogIndex, req.LastLogTerm)
	if f.log == nil {
		return
	}
	switch {
	case err != nil:
		f.log.Error("entries below an installed snapshot not checked or not dropped",
			"snapshot-index", req.LastLogIndex, "error", err)
	case from != 0:
		f.log.Warn("dropped log entries an installed snapshot replaced",
			"from", from, "to", to, "snapshot-index", req.LastLogIndex, "snapshot-term", req.LastLogTerm,
			"point-stored", point)
	}
}

// snapshotPointMark is the data of the entry dropUnvouched stores at a
// snapshot's index: a no-op of the snapshot's term that stands for the
// snapshot's last entry. Raft never applies it (the state machine starts at
// the snapshot) and never sends it (a leader sends entries after a
// follower's previous one, and a snapshot to a follower that needs one
// before it); it only answers raft's check of an append that starts there.
var snapshotPointMark = []byte("perpd: snapshot point")

// IsSnapshotPoint reports whether l is the stand-in dropUnvouched stores at
// a snapshot's index (the jepsen log checks compare only its term).
func IsSnapshotPoint(l *raft.Log) bool {
	return l.Type == raft.LogNoop && bytes.Equal(l.Data, snapshotPointMark)
}

// dropUnvouched deletes the log entries from the first one to index when the
// log's entry at index is not of term (missing or another term's): those are
// entries a snapshot at index and term replaced, and may be entries no
// leader committed. When the entry at index has the snapshot's term the log
// is, by log matching, the snapshot's history up to there, and is kept. When
// the log goes on past index, it then stores the snapshot's point there
// (see installed), and says so. It returns the range deleted (0, 0 for
// none).
func dropUnvouched(logs raft.LogStore, index, term uint64) (from, to uint64, point bool, err error) {
	if index == 0 {
		return 0, 0, false, nil
	}
	first, err := logs.FirstIndex()
	if err != nil || first == 0 || first > index {
		return 0, 0, false, err
	}
	var at raft.Log
	switch err := logs.GetLog(index, &at); {
	case err == nil && at.Term == term:
		return 0, 0, false, nil
	case err != nil && !errors.Is(err, raft.ErrLogNotFound):
		return 0, 0, false, err
	}
	if err := logs.DeleteRange(first, index); err != nil {
		return 0, 0, false, err
	}
	last, err := logs.LastIndex()
	if err != nil || last <= index {
		return first, index, false, err
	}
	if err := logs.StoreLog(&raft.Log{Index: index, Term: term, Type: raft.LogNoop, Data: snapshotPointMark}); err != nil {
		return first, index, false, err
	}
	return first, index, true, nil
}

// lastSnapshotOf is the index and term of the snapshot raft last installed,
// took or restored at start (false when none).
func lastSnapshotOf(r *raft.Raft) (index, term uint64, ok bool) {
	st := r.Stats()
	index, err1 := strconv.ParseUint(st["last_snapshot_index"], 10, 64)
	term, err2 := strconv.ParseUint(st["last_snapshot_term"], 10, 64)
	return index, term, err1 == nil && err2 == nil && index != 0
}
