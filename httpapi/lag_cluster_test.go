package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
)

// stallApply blocks the state machine's goroutine after each batch (the
// observer runs after the machine's lock is released), so raft goes on
// taking entries and heartbeats while nothing more is applied: a follower
// that knows its leader and serves an ever older state.
type stallApply struct{ release chan struct{} }

func (s stallApply) Applied(int, time.Duration) { <-s.release }
func (stallApply) Grouped(int)                  {}

// TestHealthzOfAFollowerThatStoppedApplying: a follower that knows its
// leader but applies nothing (its log store refuses appends, its apply is
// stuck) answered /healthz 200 while serving a state that grew older by
// the second: a load balancer kept sending clients to stale balances. It
// now answers 503 with how long it has applied nothing, and 200 again
// once it catches up.
func TestHealthzOfAFollowerThatStoppedApplying(t *testing.T) {
	c := readyCluster(t)
	f := c.Followers()[0]
	stall := stallApply{release: make(chan struct{})}
	f.Node.SetObserver(stall)
	released := false
	release := func() {
		if !released {
			released = true
			close(stall.release)
		}
	}
	defer release()
	var st int
	var h map[string]any
	if !clustertest.Poll(10*time.Second, func() bool { st, h = healthOf(t, c.HTTP(f.ID)); return st == http.StatusServiceUnavailable }) {
		t.Fatalf("%s applies nothing: healthz still %d %v", f.ID, st, h)
	}
	if reason, _ := h["reason"].(string); h["ok"] != false || !strings.Contains(reason, "applied") {
		t.Fatalf("%s: healthz %d %v, want the reason", f.ID, st, h)
	}
	if id, _, _, _ := f.Node.LeaderInfo(); id == "" {
		t.Fatalf("%s lost its leader: the test wants one it knows", f.ID)
	}
	// The others are fine.
	for _, m := range c.Live() {
		if m.ID != f.ID {
			if st, h := healthOf(t, c.HTTP(m.ID)); st != http.StatusOK {
				t.Fatalf("%s: healthz %d %v", m.ID, st, h)
			}
		}
	}
	f.Node.SetObserver(nil)
	release()
	if !clustertest.Poll(10*time.Second, func() bool { st, h = healthOf(t, c.HTTP(f.ID)); return st == http.StatusOK }) {
		t.Fatalf("%s caught up: healthz still %d %v", f.ID, st, h)
	}
}

// TestHealthzAnswersWhileTheStateIsLocked: /healthz read the state under
// the machine's read lock, so while an apply held (or waited for) the
// write lock, as a long batch or a snapshot restore at 100k accounts does
// for seconds, the probe hung instead of answering. Here a reader holds
// the lock on a follower and the leader's next entry leaves the follower's
// apply waiting for it (which blocks every new reader): /healthz answers
// within 200 ms each time, and 503 with the reason once the apply has been
// held past the bound.
func TestHealthzAnswersWhileTheStateIsLocked(t *testing.T) {
	c := readyCluster(t)
	leader, f := c.Leader(), c.Followers()[0]
	release := make(chan struct{})
	held := make(chan struct{})
	go f.Node.Machine().Read(func(*fsm.State, uint64) { close(held); <-release })
	<-held
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := leader.Node.Propose(ctx, &fsm.Command{Type: fsm.CmdNoop, IdemKey: "acct:locked", ReqHash: fsm.RequestHash([]byte("locked"))}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 200 * time.Millisecond}
	deadline := time.Now().Add(5 * time.Second)
	for {
		start := time.Now()
		res, err := client.Get(c.HTTP(f.ID) + "/healthz")
		if err != nil {
			t.Fatalf("healthz while the state is locked: %v after %v", err, time.Since(start))
		}
		var h map[string]any
		err = json.NewDecoder(res.Body).Decode(&h)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if reason, _ := h["reason"].(string); res.StatusCode == http.StatusServiceUnavailable && h["ok"] == false && strings.Contains(reason, "busy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz %d %v, want 503 once the apply waits past the bound", res.StatusCode, h)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(release)
	released = true
	if !clustertest.Poll(10*time.Second, func() bool { st, _ := healthOf(t, c.HTTP(f.ID)); return st == http.StatusOK }) {
		t.Fatalf("%s: healthz not ok after the lock was released", f.ID)
	}
}
