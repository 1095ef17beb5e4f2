package node

import (
	"context"
	"sync"
	"time"
)

// State hashes that do not pile up. A hash encodes the whole State (seconds
// at 150 MB under load) and holds an encoding of it in memory while it
// runs. Asked once a second by a poller that gives up after a few seconds,
// each request used to start its own encoding behind the previous ones: a
// queue of work nobody waited for, and a node's live heap grew from 0.9 to
// 1.6 GB (the soak, docs/performance.md). So:
//
//   - one hash is computed at a time, on its own goroutine: a caller that
//     leaves stops waiting, but the work it started finishes and is kept,
//     since the next caller most likely wants the same index;
//   - the last few (index, hash) pairs are remembered, so asking again at an
//     index (a quiet cluster, the replicas check asking every member at one
//     index, an operator's repeated `admin state`) costs nothing;
//   - a caller that wants any recent pair (admin state, admin status) joins
//     the hash already running instead of queueing a new one behind it.
//
// The pair is always exact: a hash is reported only with the index it was
// computed at. A remembered pair never goes stale: the state at an index of
// the committed log is a fact, which a later restore (at a new index past
// the log) does not change.
type stateHasher struct {
	// hashAt computes the hash at index (on the shadow, shadow.go).
	hashAt func(index uint64) (string, error)

	mu     sync.Mutex
	recent [hashCacheSize]hashedAt // a ring; zero index is empty
	next   int
	flight *hashFlight // the hash being computed, or nil
}

// hashCacheSize is how many (index, hash) pairs are remembered: enough for
// the replicas check's index and a few status calls beside it.
const hashCacheSize = 8

type hashedAt struct {
	index uint64
	hash  string
}

// hashFlight is one hash being computed; done closes when hash and err are
// set.
type hashFlight struct {
	index uint64
	done  chan struct{}
	hash  string
	err   error
}

// at returns the hash at index, computing it when it is not remembered, or
// ctx's error when the caller leaves first.
func (h *stateHasher) at(ctx context.Context, index uint64) (string, error) {
	for {
		hash, ok, f := h.rememberedOrFlight(index)
		if ok {
			return hash, nil
		}
		select {
		case <-f.done:
			if f.index == index {
				return f.hash, f.err
			}
			// Another index's hash finished: ask again for ours.
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// recentOrAt returns a pair at least as new as any remembered one: the
// running hash when there is one (whatever its index), else the pair at
// index (remembered, or computed).
func (h *stateHasher) recentOrAt(ctx context.Context, index uint64) (uint64, string, error) {
	hash, ok, f := h.rememberedOrFlight(index)
	if ok {
		return index, hash, nil
	}
	select {
	case <-f.done:
		return f.index, f.hash, f.err
	case <-ctx.Done():
		return 0, "", ctx.Err()
	}
}

// rememberedOrFlight returns the remembered hash at index, or else the
// hash running (started at index when none is).
func (h *stateHasher) rememberedOrFlight(index uint64) (string, bool, *hashFlight) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hash, ok := h.cachedLocked(index); ok {
		return hash, true, nil
	}
	if h.flight == nil {
		return "", false, h.startLocked(index)
	}
	return "", false, h.flight
}

// startLocked starts computing the hash at index; h.mu is held.
func (h *stateHasher) startLocked(index uint64) *hashFlight {
	f := &hashFlight{index: index, done: make(chan struct{})}
	h.flight = f
	hashAt := h.hashAt
	go func() {
		hash, err := hashAt(index)
		h.mu.Lock()
		f.hash, f.err = hash, err
		if err == nil {
			h.recent[h.next] = hashedAt{index: index, hash: hash}
			h.next = (h.next + 1) % len(h.recent)
		}
		h.flight = nil
		h.mu.Unlock()
		close(f.done)
	}()
	return f
}

func (h *stateHasher) cachedLocked(index uint64) (string, bool) {
	for _, r := range h.recent {
		if r.index == index && index != 0 {
			return r.hash, true
		}
	}
	return "", false
}

// SlowStateHashes makes every state hash this node computes from now on
// take d longer: tests use it to stand for a large State's encoding.
func (n *Node) SlowStateHashes(d time.Duration) {
	h := n.hashes
	h.mu.Lock()
	defer h.mu.Unlock()
	inner := h.hashAt
	h.hashAt = func(index uint64) (string, error) {
		time.Sleep(d)
		return inner(index)
	}
}
