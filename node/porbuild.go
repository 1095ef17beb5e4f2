package node

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/por"
)

// porBuilder builds the Proof of Reserves snapshots that the live machine
// leaves to it (fsm.LevelPoRBesideApply), on the snapshot shadow: the
// shadow's machine has no builder of its own, so when it replays the entry
// that made a snapshot due it builds the trees inline, exactly as the live
// machine would have, and the live machine takes them from there by the
// time it publishes them. The cost (0.2-0.7 s at 100,000 accounts) moves
// from the apply path to the shadow's goroutine.
type porBuilder struct {
	shadow *shadow
	// minAccounts is the least number of accounts whose trees are built
	// here; below it the live machine builds them inline
	// (PoRBesideApplyFrom; tests lower it).
	minAccounts atomic.Int64

	mu     sync.Mutex
	builds map[porKey]*porBuild

	// For operators (PoRBuildStats): builds run here, and the times and
	// nanoseconds a caller (apply, or an encoding of the live state)
	// waited for one that was not done yet.
	built, waits, waitedNs atomic.Uint64
}

// PoRBuildStats are the node's Proof of Reserves builds beside apply:
// how many ran on the shadow, and how often and how long the live
// machine waited for one (at a publication, or to encode its state).
type PoRBuildStats struct {
	Built, Waits uint64
	Waited       time.Duration
}

// PoRBuildStats reports the node's builds beside apply.
func (n *Node) PoRBuildStats() PoRBuildStats {
	b := n.porBuilds
	return PoRBuildStats{Built: b.built.Load(), Waits: b.waits.Load(), Waited: time.Duration(b.waitedNs.Load())}
}

// porKey names a due snapshot: the entry that made it due, and its time.
type porKey struct {
	index uint64
	tsMs  int64
}

// porBuild is one build, running or done.
type porBuild struct {
	done chan struct{}
	snap *por.Snapshot
	err  error
}

var _ fsm.PoRBuilds = (*porBuilder)(nil)

// PoRBesideApplyFrom is the number of accounts from which a node
// builds its Proof of Reserves trees beside apply: about 25 ms inside
// apply at 10,000 accounts, less than the shadow would spend replaying a
// busy minute of log only to build them (a cost it otherwise pays at the
// next snapshot, outside that minute).
const PoRBesideApplyFrom = 10_000

func newPoRBuilder() *porBuilder {
	b := &porBuilder{}
	b.minAccounts.Store(PoRBesideApplyFrom)
	return b
}

// Want starts the build of the snapshot due at index (called inside
// apply: it never blocks), unless the state is small enough to build
// inline. Builds of older entries, which the machine no longer waits
// for, are forgotten, so at most a few are kept.
func (b *porBuilder) Want(index uint64, tsMs int64, accounts int) bool {
	if int64(accounts) < b.minAccounts.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.builds {
		if k.index < index {
			delete(b.builds, k)
		}
	}
	b.startLocked(porKey{index, tsMs})
	return true
}

// porBuildAttempts is how many builds Await tries before it gives up (and
// the replica halts): a build that failed on a passing store error (a
// snapshot removed between its listing and its opening) is tried again
// rather than halting a replica that could have built it.
const porBuildAttempts = 3

// Await returns the snapshot due at index, waiting for its build (started
// now if no Want started it: a machine restored with an unfilled pending
// snapshot cannot be, but a reset may have dropped the build). A failed
// build is forgotten and tried again, up to porBuildAttempts in all.
func (b *porBuilder) Await(index uint64, tsMs int64) (*por.Snapshot, error) {
	k := porKey{index, tsMs}
	var err error
	for attempt := range porBuildAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 250 * time.Millisecond)
		}
		b.mu.Lock()
		x := b.startLocked(k)
		b.mu.Unlock()
		select {
		case <-x.done:
		default:
			start := time.Now()
			<-x.done
			b.waits.Add(1)
			b.waitedNs.Add(uint64(time.Since(start)))
		}
		if x.err == nil {
			return x.snap, nil
		}
		err = x.err
		b.mu.Lock()
		if b.builds[k] == x {
			delete(b.builds, k)
		}
		b.mu.Unlock()
	}
	return nil, err
}

func (b *porBuilder) startLocked(k porKey) *porBuild {
	if x := b.builds[k]; x != nil {
		return x
	}
	if b.builds == nil {
		b.builds = make(map[porKey]*porBuild)
	}
	x := &porBuild{done: make(chan struct{})}
	b.builds[k] = x
	go func() {
		defer close(x.done)
		if b.shadow == nil {
			x.err = fmt.Errorf("this node has no snapshot shadow to build on")
			return
		}
		x.snap, x.err = b.shadow.porAt(k.index, k.tsMs)
		b.built.Add(1)
	}()
	return x
}

// reset forgets every build: the live machine was restored from a
// snapshot, so an entry's index may now name another entry.
func (b *porBuilder) reset() {
	b.mu.Lock()
	b.builds = nil
	b.mu.Unlock()
}

// porAt returns the Proof of Reserves snapshot that the entry at index
// made due at tsMs, from the shadow's state once it has applied that
// entry: pending there, or already published if the shadow is past its
// publication. A shadow past the entry whose state no longer holds it is
// rebuilt from the store up to the entry.
func (s *shadow) porAt(index uint64, tsMs int64) (*por.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := porKey{index, tsMs}
	if s.m != nil && s.m.Halted() == nil && s.m.Applied() >= index {
		if snap := porIn(s.m, index, tsMs); snap != nil {
			return snap, nil
		}
		if snap := s.built[k]; snap != nil {
			return snap, nil
		}
	}
	if err := s.reach(index); err != nil {
		return nil, err
	}
	if snap := porIn(s.m, index, tsMs); snap != nil {
		return snap, nil
	}
	if snap := s.built[k]; snap != nil {
		return snap, nil
	}
	return nil, fmt.Errorf("the state at entry %d holds no proof of reserves of time %d", index, tsMs)
}

// porIn finds the snapshot due at index and tsMs in m's state. The
// snapshot is never changed once built, so the live machine may hold it
// while the shadow goes on.
func porIn(m *fsm.Machine, index uint64, tsMs int64) (snap *por.Snapshot) {
	m.Read(func(st *fsm.State, _ uint64) {
		p := st.PoR
		switch {
		case p == nil:
		case p.Pending != nil && p.Pending.Index == index && p.Pending.TsMs == tsMs:
			snap = p.Pending.Snap
		case p.Latest != nil && p.Latest.TsMs == tsMs:
			snap = p.Latest
		}
	})
	return snap
}
