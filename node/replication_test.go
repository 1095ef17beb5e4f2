package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/node"
)

func TestThreeNodeClusterElectsExactlyOneLeader(t *testing.T) {
	c := clustertest.Start(t, 3)
	leader := c.Leader()
	leaders := 0
	for _, m := range c.Live() {
		if m.Node.IsLeader() {
			leaders++
		}
		id, raftAddr, httpAddr, adminAddr := m.Node.LeaderInfo()
		if id != leader.ID || raftAddr != leader.RaftAddr || httpAddr != leader.HTTPAddr || adminAddr != leader.AdminAddr {
			t.Errorf("%s names leader %s %s %s %s, want %s %s %s %s", m.ID, id, raftAddr, httpAddr, adminAddr,
				leader.ID, leader.RaftAddr, leader.HTTPAddr, leader.AdminAddr)
		}
		members, err := m.Node.Members()
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 3 {
			t.Fatalf("%s lists %d members: %+v", m.ID, len(members), members)
		}
		for _, mm := range members {
			want := c.Member(mm.ID)
			if mm.Raft != want.RaftAddr || mm.Suffrage != "Voter" {
				t.Errorf("%s lists %+v, want raft %s voter", m.ID, mm, want.RaftAddr)
			}
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
}

func TestWriteThroughFollowerIsAppliedOnAllNodes(t *testing.T) {
	c := clustertest.Start(t, 3)
	f := c.Followers()[0]
	res := propose(t, f.Node, noop("acct1:write-through-follower"))
	if res.Replay || res.Index == 0 {
		t.Fatalf("first write answered replay=%v index=%d", res.Replay, res.Index)
	}
	for _, m := range c.Live() {
		waitApplied(t, m.Node, res.Index)
		rec, ok := record(m.Node, "acct1:write-through-follower")
		if !ok || rec.Index != res.Index || int(rec.Status) != res.Status || !bytes.Equal(rec.Body, res.Body) {
			t.Errorf("%s holds %+v (found %v), want the answer at index %d", m.ID, rec, ok, res.Index)
		}
	}
}

func TestLeaderCrashElectsNewLeaderAndLosesNoAcknowledgedWrite(t *testing.T) {
	c := clustertest.Start(t, 3)
	old := c.Leader()
	followers := c.Followers()

	// Writers on both followers keep proposing distinct keys through the
	// crash; a key counts once its Propose returned an accepted answer.
	var mu sync.Mutex
	acked := map[string]uint64{}
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, f := range followers {
		n := f.Node
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("acct%d:crash-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := n.Propose(ctx, noop(key))
				cancel()
				if err == nil && res.OK() {
					mu.Lock()
					acked[key] = res.Index
					mu.Unlock()
				}
			}
		}()
	}
	var once sync.Once
	stopWriters := func() {
		once.Do(func() { close(stop) })
		wg.Wait()
	}
	defer stopWriters()

	if !clustertest.Poll(10*time.Second, func() bool { return ackedCount() >= 30 }) {
		t.Fatalf("only %d writes acknowledged before the crash", ackedCount())
	}
	crashedAt := time.Now()
	c.Kill(old.ID)
	leader, err := c.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(crashedAt)
	t.Logf("new leader %s after %v", leader.ID, took)
	if leader.ID == old.ID {
		t.Fatal("the crashed node cannot lead")
	}
	if took > 6*time.Second {
		t.Errorf("a new leader took %v", took)
	}
	before := ackedCount()
	if !clustertest.Poll(10*time.Second, func() bool { return ackedCount() >= before+30 }) {
		t.Fatalf("writes did not continue: %d acknowledged after the crash", ackedCount()-before)
	}

	stopWriters()
	c.Restart(old.ID)
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range c.Live() {
		for key, index := range acked {
			rec, ok := record(m.Node, key)
			if !ok {
				t.Fatalf("%s lost acknowledged write %q (index %d)", m.ID, key, index)
			}
			if rec.Index != index {
				t.Fatalf("%s holds %q at index %d, acknowledged at %d", m.ID, key, rec.Index, index)
			}
		}
	}
	t.Logf("%d acknowledged writes checked on %d nodes", len(acked), len(c.Live()))
}

func TestRestartedNodeCatchesUpFromSnapshotAfterCompaction(t *testing.T) {
	const trailing = 32
	c := clustertest.Start(t, 3,
		clustertest.SnapshotThreshold(64),
		clustertest.TrailingLogs(trailing),
		clustertest.SnapshotInterval(50*time.Millisecond))
	leader := c.Leader()
	victim := c.Followers()[0]
	lastIndex := victim.Node.Raft.LastIndex()
	c.Kill(victim.ID)

	// Write while it is down until the leader has compacted its log past
	// everything the victim holds: it can then only catch up from a
	// snapshot. A second, later snapshot proves the first one's compaction
	// (which runs right after it) is done.
	var keys []string
	writeBatch := func(from int) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w; i < from+64; i += 8 {
					if _, err := tryPropose(leader.Node, noop(fmt.Sprintf("acct:snap-%d", i))); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for i := from; i < from+64; i++ {
			keys = append(keys, fmt.Sprintf("acct:snap-%d", i))
		}
	}
	var compactedAt uint64
	for round := 0; ; round++ {
		if round > 40 {
			t.Fatalf("the leader did not compact past index %d (snapshot at %d)", lastIndex, snapshotIndex(t, leader.Node))
		}
		writeBatch(round * 64)
		s := snapshotIndex(t, leader.Node)
		if compactedAt == 0 && s > lastIndex+trailing {
			compactedAt = s
		} else if compactedAt != 0 && s > compactedAt {
			break
		}
	}

	c.Restart(victim.ID)
	if err := c.WaitConverged(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	v := c.Member(victim.ID).Node
	if s := snapshotIndex(t, v); s < compactedAt {
		t.Fatalf("restarted node's last snapshot is at %d; it must have installed the leader's (>= %d)", s, compactedAt)
	}
	for _, k := range keys {
		if _, ok := record(v, k); !ok {
			t.Fatalf("restarted node misses %q", k)
		}
	}
	t.Logf("victim was at %d, leader compacted past it at %d, %d writes", lastIndex, compactedAt, len(keys))
}

func snapshotIndex(t testing.TB, n *node.Node) uint64 {
	t.Helper()
	st, err := n.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, err := strconv.ParseUint(st.LastSnapshotIndex, 10, 64)
	if err != nil {
		t.Fatalf("lastSnapshotIndex %q: %v", st.LastSnapshotIndex, err)
	}
	return s
}

func TestReplicasAtTheSameIndexHaveEqualStateHashes(t *testing.T) {
	c := clustertest.Start(t, 3)
	live := c.Live()

	// Sample every node's (index, hash) while writes land through all of
	// them; any index seen on two nodes must carry one hash.
	seen := map[uint64]map[string]string{} // index -> node -> hash
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, m := range live {
				idx, h, err := m.Node.StateHash(context.Background())
				if err != nil {
					continue
				}
				if seen[idx] == nil {
					seen[idx] = map[string]string{}
				}
				seen[idx][m.ID] = h
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for w, m := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if _, err := tryPropose(m.Node, noop(fmt.Sprintf("acct%d:hash-%d", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	err := c.WaitConverged(15 * time.Second)
	close(stop)
	<-sampled
	if err != nil || t.Failed() {
		t.Fatal(err)
	}

	shared := 0
	for idx, byNode := range seen {
		var first string
		for id, h := range byNode {
			if first == "" {
				first = h
			} else if h != first {
				t.Fatalf("index %d: %s has hash %s, another node %s", idx, id, h, first)
			}
		}
		if len(byNode) > 1 {
			shared++
		}
	}
	if shared < 10 {
		t.Fatalf("only %d indexes were sampled on more than one node", shared)
	}
	t.Logf("%d indexes compared across nodes", shared)
}

func TestIdempotentRetryAcrossLeaderChangeAppliesOnce(t *testing.T) {
	c := clustertest.Start(t, 3)
	old := c.Leader()
	fs := c.Followers()
	cmd := noop("acct1:retry-across-leaders")

	first := propose(t, fs[0].Node, cmd)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.Admin(old.ID).TransferLeadership(ctx, fs[1].ID); err != nil {
		t.Fatal(err)
	}
	if l := c.Leader(); l.ID != fs[1].ID {
		t.Fatalf("leader is %s after a transfer to %s", l.ID, fs[1].ID)
	}

	// The client retries the same request on other nodes: the old leader
	// (now a follower, forwarding) and the new leader itself.
	for _, via := range []*clustertest.Member{old, fs[1]} {
		retry := propose(t, via.Node, cmd)
		if !retry.Replay {
			t.Fatalf("retry through %s was applied again", via.ID)
		}
		if retry.Index != first.Index || retry.Status != first.Status || !bytes.Equal(retry.Body, first.Body) {
			t.Fatalf("retry through %s answered index %d %d %s, first answer index %d %d %s",
				via.ID, retry.Index, retry.Status, retry.Body, first.Index, first.Status, first.Body)
		}
	}
	if err := c.WaitConverged(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Live() {
		if n := orderCount(m.Node, cmd.IdemKey); n != 1 {
			t.Fatalf("%s stored the key %d times", m.ID, n)
		}
		if rec, _ := record(m.Node, cmd.IdemKey); rec.Index != first.Index {
			t.Fatalf("%s records index %d, want %d", m.ID, rec.Index, first.Index)
		}
	}
}

func TestWriteWithoutLeaderFailsUnavailableWithinProposeTimeout(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	const margin = 1500 * time.Millisecond
	for _, survivor := range []string{"leader", "follower"} {
		t.Run("survivor is the "+survivor, func(t *testing.T) {
			c := clustertest.Start(t, 3, clustertest.ProposeTimeout(timeout))
			keep := c.Leader()
			if survivor == "follower" {
				keep = c.Followers()[0]
			}
			for _, m := range c.Live() {
				if m != keep {
					c.Kill(m.ID)
				}
			}
			for i := range 2 { // at once, and again once it knows it is alone
				start := time.Now()
				res, err := keep.Node.Propose(context.Background(), noop(fmt.Sprintf("acct:alone-%d", i)))
				took := time.Since(start)
				if !errors.Is(err, node.ErrUnavailable) {
					t.Fatalf("write %d without a quorum: %+v, %v; want ErrUnavailable", i, res, err)
				}
				if took > timeout+margin {
					t.Fatalf("write %d took %v to fail, bound is %v + %v", i, took, timeout, margin)
				}
			}
		})
	}
}
