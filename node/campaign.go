package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// A node whose log store cannot append (a full disk) could still win an
// election: its term and vote are small writes that fit, and its log is as
// long as the others' when its failed append was its own, as leader. As
// leader it then fails to append its first entry (hashicorp/raft v1.7's
// dispatchLogs steps down on a failed StoreLogs) and the cluster waits out
// another election timeout without a leader. So such a node does not
// campaign: the guard fails its outgoing RequestPreVote and RequestVote
// (raft counts a failed RPC as a refused vote, and a refused pre-vote
// leaves the term alone) and refuses a TimeoutNow (a leadership transfer
// to it fails, the leader stays).
//
// It campaigns again once its store can append: a successful append (a
// leader's entries reaching it) or, when no leader is there to send any
// (every member's disk filled), a probe write the size of the append that
// failed, made when it would campaign. A cluster whose every store fails
// is then without a leader until a majority have room, as it was before
// in effect (each leader stepped down at its first append), minus the
// churn of terms.

// The probe write's bounds. The append that failed may be a follower's
// catch-up of up to MaxAppendEntries entries, and room for a megabyte is
// room for a busy leader's next groups. It may also be one small entry,
// and a write that small fits in pages bolt freed inside its file where an
// append, which grows the log's tree, does not (seen: a probe the size of
// the failed append, a few hundred bytes, passed and the leader elected
// next failed its first append); sixteen pages do not.
const (
	probeBytesMin = 64 << 10
	probeBytesMax = 1 << 20
)

// probeReuse is how long a probe's outcome answers for: raft asks every
// peer for its vote at once, and each asking would otherwise write its
// own probe. Well under raftConfig's ElectionTimeout, so each campaign
// probes afresh.
const probeReuse = 100 * time.Millisecond

// probeKey is where the probe writes in the stable store (raft's own keys
// are CurrentTerm, LastVoteTerm and LastVoteCand). It is left holding an
// empty value, which frees the probe's pages for the next append.
var probeKey = []byte("perpdAppendProbe")

// errStoreCannotAppend is what a refused vote request or leadership
// transfer fails with. Its text must not contain raft's "unexpected
// command", which raft takes as a peer too old for pre-vote and counts as
// a granted pre-vote.
var errStoreCannotAppend = errors.New("not campaigning: this node's raft log store cannot append")

// appendBytes estimates what storing logs writes: their data and
// extensions, and a little for each entry's encoding.
func appendBytes(logs []*raft.Log) int64 {
	var n int64
	for _, l := range logs {
		n += int64(len(l.Data)+len(l.Extensions)) + 64
	}
	return n
}

// appendFailure is a failed log append: its error and about how many
// bytes it wrote.
type appendFailure struct {
	err   error
	bytes int64
}

func (w *watchedStore) noteAppend(logs []*raft.Log, err error) error {
	if err != nil {
		w.appendFailed.Store(&appendFailure{err: err, bytes: appendBytes(logs)})
	} else if w.appendFailed.Load() != nil {
		w.appendFailed.Store(nil)
	}
	return w.note(err)
}

// appendFailing reports, without touching the disk, whether the last log
// append failed and neither an append nor a probe has succeeded since. A
// term or vote written since does not count: those fit where an append
// does not.
func (w *watchedStore) appendFailing() bool { return w.appendFailed.Load() != nil }

// appendRoom is nil when the store can append: no append failed since the
// last that succeeded, or a probe write of the failed append's size (at
// least probeBytesMin, at most probeBytesMax) succeeds now, which clears
// the failure. A failed probe answers for the same failure for
// probeReuse.
func (w *watchedStore) appendRoom() error {
	failed := w.appendFailed.Load()
	if failed == nil {
		return nil
	}
	w.probeMu.Lock()
	defer w.probeMu.Unlock()
	if w.probedFor == failed && time.Since(w.probedAt) < probeReuse {
		return w.probeErr
	}
	probe := min(max(failed.bytes, probeBytesMin), probeBytesMax)
	err := w.BoltStore.Set(probeKey, make([]byte, probe))
	if err == nil {
		err = w.BoltStore.Set(probeKey, []byte{})
	}
	if err != nil {
		w.probedFor, w.probedAt = failed, time.Now()
		w.probeErr = fmt.Errorf("%w: a %d-byte probe write failed: %w", errStoreCannotAppend, probe, err)
		_ = w.note(err)
		return w.probeErr
	}
	// An append that failed since the probe began keeps its failure.
	if w.appendFailed.CompareAndSwap(failed, nil) {
		_ = w.note(nil)
	}
	return nil
}

// RequestPreVote is raft asking a peer for a pre-vote: failed while the
// store cannot append.
func (g *snapshotGuard) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := g.campaignRoom(); err != nil {
		return err
	}
	return g.guardedTransport.RequestPreVote(id, target, args, resp)
}

// RequestVote is raft asking a peer for its vote: failed while the store
// cannot append.
func (g *snapshotGuard) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := g.campaignRoom(); err != nil {
		return err
	}
	return g.guardedTransport.RequestVote(id, target, args, resp)
}

func (g *snapshotGuard) campaignRoom() error {
	if g.store == nil {
		return nil
	}
	return g.store.appendRoom()
}

// refusesTransfer reports whether a leadership transfer to this node is
// refused: its store's last append failed. It does not probe (the pump
// must not wait on the disk); the leader that asks sends appends, and the
// first that succeeds ends the refusal.
func (g *snapshotGuard) refusesTransfer() bool { return g.store != nil && g.store.appendFailing() }
