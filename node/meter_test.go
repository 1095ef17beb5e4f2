package node_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// recordingMeter is every member's meter in a test: it records which node
// was asked to draw what, admits every subject but "key:denied", and
// answers with fixed figures so the test can see them travel.
type recordingMeter struct {
	mu    sync.Mutex
	takes map[string][]node.Draw // by node id
}

var (
	admitted = node.Verdict{OK: true, Limit: 60, Remaining: 41, ResetUnix: 1_800_000_000}
	refused  = node.Verdict{Limit: 7, ResetUnix: 1_800_000_003, RetryAfterMs: 2500}
)

func (r *recordingMeter) install(n *node.Node) { n.SetMeter(memberMeter{r, n.Config().ID}) }

func (r *recordingMeter) taken() map[string][]node.Draw {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]node.Draw{}
	for k, v := range r.takes {
		out[k] = append([]node.Draw(nil), v...)
	}
	return out
}

type memberMeter struct {
	r  *recordingMeter
	id string
}

func (m memberMeter) Take(d node.Draw) node.Verdict {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	if m.r.takes == nil {
		m.r.takes = map[string][]node.Draw{}
	}
	m.r.takes[m.id] = append(m.r.takes[m.id], d)
	if d.Subject == "key:denied" {
		return refused
	}
	return admitted
}

func (m memberMeter) Remaining(d node.Draw) int { return len(d.Subject) }

func meteredCluster(t *testing.T) (*clustertest.Cluster, *recordingMeter) {
	r := &recordingMeter{}
	return clustertest.Start(t, 3, clustertest.OnNode(r.install)), r
}

func proposeDrawing(n *node.Node, d *node.Draw, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := n.Propose(node.WithDraw(ctx, d), noop(key))
	return err
}

// A write forwarded by a follower is metered once, by the leader, and the
// leader's figures come back with the answer.
func TestLeaderDrawsTheBudgetOfAForwardedWrite(t *testing.T) {
	c, r := meteredCluster(t)
	leader, f := c.Leader(), c.Followers()[0]
	d := &node.Draw{ID: "req-1", Budget: "order", Subject: "key:k1", Account: "acc1"}
	if err := proposeDrawing(f.Node, d, "acct1:metered"); err != nil {
		t.Fatal(err)
	}
	if v, ok := d.Verdict(); !ok || v != admitted {
		t.Fatalf("verdict back on the follower: %+v (present %v), want %+v", v, ok, admitted)
	}
	got := r.taken()
	if len(got) != 1 || len(got[leader.ID]) != 1 {
		t.Fatalf("draws by node: %+v, want one on the leader %s", got, leader.ID)
	}
	if g := got[leader.ID][0]; g.ID != "req-1" || g.Budget != "order" || g.Subject != "key:k1" || g.Account != "acc1" {
		t.Fatalf("the leader drew %+v", g)
	}

	// The node's retry of the same request (same draw) is not charged
	// again: it finds the write already applied.
	if err := proposeDrawing(f.Node, d, "acct1:metered"); err != nil {
		t.Fatal(err)
	}
	// A write with no draw is not metered; the leader's own client's is.
	propose(t, f.Node, noop("acct1:unmetered"))
	local := &node.Draw{ID: "req-2", Budget: "withdraw", Subject: "key:k1"}
	if err := proposeDrawing(leader.Node, local, "acct1:on-leader"); err != nil {
		t.Fatal(err)
	}
	// The leader's own retry of its client's request (the same draw) is
	// not charged again either.
	if err := proposeDrawing(leader.Node, local, "acct1:on-leader"); err != nil {
		t.Fatal(err)
	}
	got = r.taken()
	if len(got) != 1 || len(got[leader.ID]) != 2 || got[leader.ID][1].ID != "req-2" {
		t.Fatalf("draws by node after retries, an unmetered write and a leader write: %+v", got)
	}
}

// A refused draw comes back to the follower as a RateLimitedError with
// the leader's figures, is not retried, and writes nothing.
func TestRefusedDrawNeverReachesTheLog(t *testing.T) {
	c, r := meteredCluster(t)
	f := c.Followers()[0]
	d := &node.Draw{ID: "req-denied", Budget: "order", Subject: "key:denied", Account: "acc1"}
	start := time.Now()
	err := proposeDrawing(f.Node, d, "acct1:refused")
	var limited *node.RateLimitedError
	if !errors.As(err, &limited) || limited.Budget != "order" || limited.Verdict != refused {
		t.Fatalf("refusal on the follower: %v", err)
	}
	if v, ok := d.Verdict(); !ok || v != refused {
		t.Fatalf("verdict recorded on the draw: %+v (present %v)", v, ok)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("a refusal took %v: it was retried", el)
	}
	if n := len(r.taken()[c.Leader().ID]); n != 1 {
		t.Fatalf("the leader drew %d times for one refused request", n)
	}
	// A later write applied everywhere: the refused one is in no state.
	res := propose(t, f.Node, noop("acct1:after"))
	for _, m := range c.Live() {
		waitApplied(t, m.Node, res.Index)
		if _, ok := record(m.Node, "acct1:refused"); ok {
			t.Fatalf("%s applied a write whose draw was refused", m.ID)
		}
	}
}

// A follower's budget report is the leader's meter's.
func TestRemainingAsksTheLeader(t *testing.T) {
	c, _ := meteredCluster(t)
	ds := []node.Draw{{Budget: "order", Subject: "key:abc"}, {Budget: "withdraw", Subject: "key:abcdef"}}
	for _, m := range c.Live() {
		got, err := m.Node.Remaining(context.Background(), ds)
		if err != nil || len(got) != 2 || got[0] != 7 || got[1] != 10 {
			t.Fatalf("%s (leader %v): %v %v", m.ID, m.Node.IsLeader(), got, err)
		}
	}
}

// The leader refuses a malformed draw rather than apply the write
// unmetered.
func TestForwardWithABadDrawIsRefused(t *testing.T) {
	c, _ := meteredCluster(t)
	leader, f := c.Leader(), c.Followers()[0]
	body, err := fsm.Marshal(noop("acct1:bad-draw"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, f.Node.PeerURL(leader.AdminAddr, node.ForwardPath), bytes.NewReader(body))
	f.Node.SetPeerAuth(req)
	req.Header.Set(node.DrawHeader, `{"id":"x"}`)
	resp, err := f.Node.PeerClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("forward with a draw naming no budget: %d", resp.StatusCode)
	}
	// The same command without the bad header is applied: the refusal was
	// the draw's.
	req, _ = http.NewRequest(http.MethodPost, f.Node.PeerURL(leader.AdminAddr, node.ForwardPath), bytes.NewReader(body))
	f.Node.SetPeerAuth(req)
	if resp, err = f.Node.PeerClient().Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the same forward without a draw: %d", resp.StatusCode)
	}
}
