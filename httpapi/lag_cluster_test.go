package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
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
