package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ReadIndexPath is where the leader hands out read indexes to followers, on
// the admin listener, behind the cluster's peer credential.
const ReadIndexPath = "/internal/read-index"

// maxReadIndexBody bounds a read-index answer (a few dozen bytes).
const maxReadIndexBody = 4 << 10

// ErrNoReadIndex means no leader could vouch for a read index in time: the
// node has no leader, the leader could not confirm it still leads, or it
// could not be reached. The read must be refused rather than served stale.
var ErrNoReadIndex = errors.New("no leader confirmed a read index")

// readIndexAnswer is the body of ReadIndexPath.
type readIndexAnswer struct {
	Index string `json:"index"`
}

// bugSkipReadIndex is set only by a file built with the jepsen_bug tag,
// which makes linearizable reads serve local state (a planted stale-read
// bug the Jepsen harness must catch). Production builds never set it.
var bugSkipReadIndex bool

// LinearizableRead returns once this node's state machine has applied every
// entry committed before the call, so a read served right after it reflects
// every write acknowledged before the read began, whichever node took it.
//
// The leader reads its read index, confirms with a quorum that it still
// leads (Raft.VerifyLeader), then waits until it has applied that index.
// A follower asks the leader for that read index over the authenticated
// admin channel and waits until it has applied it locally. The whole call
// is bounded by MaxReadWait (and ctx); it fails with ErrNoReadIndex or
// ErrReadTimeout rather than answer from state that may be stale.
func (n *Node) LinearizableRead(ctx context.Context) error {
	if bugSkipReadIndex {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, MaxReadWait)
	defer cancel()
	index, err := n.readIndex(ctx)
	if err != nil {
		return err
	}
	if err := n.WaitApplied(ctx, index); err != nil {
		return fmt.Errorf("%w: read index %d", err, index)
	}
	return nil
}

// readIndex asks whoever leads for a read index, retrying across
// leadership changes until ctx ends.
func (n *Node) readIndex(ctx context.Context) (uint64, error) {
	backoff := 10 * time.Millisecond
	for {
		var index uint64
		var err error
		if n.IsLeader() {
			index, err = n.leaderReadIndex(ctx)
		} else {
			index, err = n.remoteReadIndex(ctx)
		}
		if err == nil {
			return index, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %v", ErrNoReadIndex, err)
		case <-time.After(backoff):
		}
		if backoff < 100*time.Millisecond {
			backoff *= 2
		}
	}
}

// leaderReadIndex is the read index this node can vouch for as leader.
//
// It is the last log index, not the commit index: right after an election
// a new leader's commit index can lag entries the previous leader already
// committed (and acknowledged) until the new term's first entry commits.
// Every committed entry is in the leader's log, so the last index covers
// them all; the cost is waiting for entries still in flight, which commit
// within a round trip. The index is read before VerifyLeader, so a quorum
// confirms leadership at a moment after it was taken.
func (n *Node) leaderReadIndex(ctx context.Context) (uint64, error) {
	index := n.Raft.LastIndex()
	if c := n.Raft.CommitIndex(); c > index {
		index = c
	}
	done := make(chan error, 1)
	go func() { done <- n.Raft.VerifyLeader().Error() }()
	select {
	case err := <-done:
		if err != nil {
			return 0, fmt.Errorf("verify leader: %w", err)
		}
		return index, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("verify leader: %w", ctx.Err())
	}
}

// remoteReadIndex asks the leader's admin listener for a read index.
func (n *Node) remoteReadIndex(ctx context.Context) (uint64, error) {
	meta := n.leaderMeta()
	if meta == nil || meta.Admin == "" {
		return 0, errors.New("leader unknown")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.PeerURL(meta.Admin, ReadIndexPath), nil)
	if err != nil {
		return 0, err
	}
	n.SetPeerAuth(req)
	resp, err := n.forwarder.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReadIndexBody))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("leader %s answered %d: %s", meta.ID, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var a readIndexAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return 0, fmt.Errorf("read index answer: %w", err)
	}
	return strconv.ParseUint(a.Index, 10, 64)
}

// ReadIndexHandler serves ReadIndexPath on the admin listener: the leader
// answers {"index": "N"} once a quorum confirmed it still leads; any other
// node answers 421 so the caller looks for the leader again.
func (n *Node) ReadIndexHandler() http.Handler {
	return n.InternalPost(func(w http.ResponseWriter, r *http.Request) {
		if !n.IsLeader() {
			http.Error(w, errNotLeader.Error(), http.StatusMisdirectedRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), MaxReadWait)
		defer cancel()
		index, err := n.leaderReadIndex(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(readIndexAnswer{Index: strconv.FormatUint(index, 10)})
	})
}
