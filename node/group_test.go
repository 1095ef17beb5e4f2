package node_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// Group commit: 200 writers at once, through the leader and both
// followers, each get their own answer at an index every replica applied,
// with each write stored exactly once, and the writes took fewer raft
// entries than there were writes. A retry of each, in a second wave,
// replays its own first answer.
func TestConcurrentWritesShareRaftEntries(t *testing.T) {
	c := clustertest.Start(t, 3)
	before := c.Leader().Node.Raft.LastIndex()
	const writers = 200
	members := c.Live()
	results := make([]*fsm.Result, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := tryPropose(members[i%len(members)].Node, noop(fmt.Sprintf("acct%d:group-%d", i%7, i)))
			if err != nil {
				errs <- err
				return
			}
			results[i] = res
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	entries := c.Leader().Node.Raft.LastIndex() - before
	if entries >= writers {
		t.Fatalf("%d writes took %d raft entries: no grouping", writers, entries)
	}
	t.Logf("%d writes in %d raft entries", writers, entries)
	var top uint64
	for i, res := range results {
		if res.Replay || res.Index == 0 {
			t.Fatalf("write %d answered %+v", i, res)
		}
		top = max(top, res.Index)
	}
	for _, m := range c.Live() {
		waitApplied(t, m.Node, top)
		for i, res := range results {
			key := fmt.Sprintf("acct%d:group-%d", i%7, i)
			rec, ok := record(m.Node, key)
			if !ok || rec.Index != res.Index || orderCount(m.Node, key) != 1 {
				t.Fatalf("%s: write %d stored %+v (found %v, %d times), answered at %d", m.ID, i, rec, ok, orderCount(m.Node, key), res.Index)
			}
		}
	}
	// The second wave: every retry replays its first answer.
	errs = make(chan error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := tryPropose(members[(i+1)%len(members)].Node, noop(fmt.Sprintf("acct%d:group-%d", i%7, i)))
			if err != nil {
				errs <- err
				return
			}
			if !res.Replay || res.Index != results[i].Index {
				errs <- fmt.Errorf("retry %d answered %+v, first at %d", i, res, results[i].Index)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// One group in flight at a time while none is full: 120 writers at the
// leader at once take a handful of raft entries, never two in raft
// together. With groups of 8 the same writers fill groups faster than raft
// commits them, and full groups go beside each other, up to the bound.
func TestOneGroupInFlightUnlessFull(t *testing.T) {
	const writers = 120
	write := func(t *testing.T, c *clustertest.Cluster) {
		leader := c.Leader().Node
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := range writers {
			wg.Go(func() {
				if _, err := tryPropose(leader, noop(fmt.Sprintf("acct%d:flight-%d", i%7, i))); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	t.Run("default", func(t *testing.T) {
		c := clustertest.Start(t, 3)
		g0, _ := c.Leader().Node.GroupStats()
		write(t, c)
		groups, peak := c.Leader().Node.GroupStats()
		t.Logf("%d writes in %d groups, at most %d in flight", writers, groups-g0, peak)
		if peak != 1 {
			t.Fatalf("%d groups in flight at once; want 1 while none is full", peak)
		}
		if groups-g0 >= writers/4 {
			t.Fatalf("%d writes took %d groups", writers, groups-g0)
		}
	})
	t.Run("full groups", func(t *testing.T) {
		c := clustertest.Start(t, 3, clustertest.GroupMax(8))
		g0, _ := c.Leader().Node.GroupStats()
		write(t, c)
		groups, peak := c.Leader().Node.GroupStats()
		t.Logf("%d writes in %d groups, at most %d in flight", writers, groups-g0, peak)
		if peak < 2 || peak > node.GroupsInFlight || groups-g0 < writers/8 {
			t.Fatalf("%d groups, %d in flight at once; want at least %d groups, 2 to %d in flight", groups-g0, peak, writers/8, node.GroupsInFlight)
		}
	})
}

// Forward batching: writes arriving together at a follower reach the
// leader in fewer calls than there are writes, and each writer gets its
// own answer, stored once on every replica.
func TestFollowerForwardsWritesInBatches(t *testing.T) {
	c := clustertest.Start(t, 3)
	var follower *clustertest.Member
	for _, m := range c.Live() {
		if !m.Node.IsLeader() {
			follower = m
		}
	}
	calls0, items0 := follower.Node.ForwardStats()
	const writers = 150
	results := make([]*fsm.Result, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := tryPropose(follower.Node, noop(fmt.Sprintf("acct%d:fwd-%d", i%5, i)))
			if err != nil {
				errs <- err
				return
			}
			results[i] = res
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	calls, items := follower.Node.ForwardStats()
	calls, items = calls-calls0, items-items0
	if items < writers || calls >= writers {
		t.Fatalf("%d forwards in %d calls: want all %d forwarded in fewer calls", items, calls, writers)
	}
	t.Logf("%d forwards in %d calls", items, calls)
	var top uint64
	for _, res := range results {
		top = max(top, res.Index)
	}
	for _, m := range c.Live() {
		waitApplied(t, m.Node, top)
		for i, res := range results {
			key := fmt.Sprintf("acct%d:fwd-%d", i%5, i)
			if rec, ok := record(m.Node, key); !ok || rec.Index != res.Index || orderCount(m.Node, key) != 1 {
				t.Fatalf("%s: write %d stored %+v (found %v), answered at %d", m.ID, i, rec, ok, res.Index)
			}
		}
	}
}
