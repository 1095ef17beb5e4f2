package node_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// steppedClock is the real clock with a wall-clock offset a test can step,
// as NTP or an operator would.
type steppedClock struct {
	start    time.Time
	offsetMs atomic.Int64
}

func (c *steppedClock) WallMs() int64       { return time.Now().UnixMilli() + c.offsetMs.Load() }
func (c *steppedClock) Mono() time.Duration { return time.Since(c.start) }

func stateNow(n *node.Node) int64 {
	var now int64
	n.Machine().Read(func(st *fsm.State, _ uint64) { now = st.NowMs })
	return now
}

func startClockedNode(t *testing.T, clk node.Clock) *node.Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n, err := node.New(node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: addr, Bootstrap: true,
		AdminToken: "t", Logger: hclog.NewNullLogger(), Clock: clk, TickInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	t.Cleanup(func() { _ = n.Shutdown() })
	if !clustertest.Poll(10*time.Second, func() bool { return stateNow(n) > 0 }) {
		t.Fatal("no tick applied")
	}
	return n
}

func TestLeaderClockStepForwardDoesNotDragLogTime(t *testing.T) {
	clk := &steppedClock{start: time.Now()}
	n := startClockedNode(t, clk)
	before, real0 := stateNow(n), time.Now()
	clk.offsetMs.Store((24 * time.Hour).Milliseconds())
	time.Sleep(1500 * time.Millisecond) // several ticks under the stepped clock
	moved, realMs := stateNow(n)-before, time.Since(real0).Milliseconds()
	if moved > realMs+realMs/node.CatchUpDiv+200 {
		t.Fatalf("a day's clock step moved log time %d ms in %d ms of real time", moved, realMs)
	}
}

func TestLeaderClockStepBackKeepsLogTimeMoving(t *testing.T) {
	clk := &steppedClock{start: time.Now()}
	n := startClockedNode(t, clk)
	clk.offsetMs.Store(-(24 * time.Hour).Milliseconds())
	before := stateNow(n)
	if !clustertest.Poll(5*time.Second, func() bool { return stateNow(n) >= before+1000 }) {
		t.Fatalf("log time froze after the wall clock stepped back: still %d ms past %d", stateNow(n)-before, before)
	}
}
