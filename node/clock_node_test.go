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

func startClockedNode(t *testing.T, clk node.Clock, beforeStart ...func(*node.Node)) *node.Node {
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
	for _, f := range beforeStart {
		f(n)
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

// firstBatchHold holds the state machine before its first batch until
// released: a restarted node that has applied nothing of its log yet.
type firstBatchHold struct {
	once     atomic.Bool
	entered  chan struct{}
	release  chan struct{}
	released atomic.Bool
}

func (h *firstBatchHold) before() {
	if h.once.Swap(true) {
		return
	}
	close(h.entered)
	<-h.release
}

func (h *firstBatchHold) let() {
	if !h.released.Swap(true) {
		close(h.release)
	}
}

// A node restarted without a snapshot and elected before it replayed its
// log had no log time; its first stamp took its calendar, as a new
// cluster's does, and a calendar three hours ahead dragged log time there
// a minute an entry (the Jepsen clock nemesis found it). A new leader now
// stamps nothing until it has applied the log it inherited, and log time
// goes on from where it was.
func TestNewLeaderStampsNothingBeforeApplyingItsLog(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := func(clk node.Clock, hold *firstBatchHold) *node.Node {
		n, err := node.New(node.Config{ID: "n1", DataDir: dir, RaftAddr: addr, Bootstrap: true,
			AdminToken: "t", Logger: hclog.NewNullLogger(), Clock: clk, TickInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if hold != nil {
			// Before anything is applied: a restarted node applies its
			// log only once it leads and commits.
			n.SetBeforeBatch(hold.before)
		}
		n.Start()
		return n
	}
	first := start(&steppedClock{start: time.Now()}, nil)
	if !clustertest.Poll(10*time.Second, func() bool { return stateNow(first) > 0 }) {
		t.Fatal("no tick applied")
	}
	time.Sleep(300 * time.Millisecond)
	was, stopped := stateNow(first), time.Now()
	if err := first.Shutdown(); err != nil {
		t.Fatal(err)
	}

	ahead := &steppedClock{start: time.Now()}
	ahead.offsetMs.Store((3 * time.Hour).Milliseconds())
	hold := &firstBatchHold{entered: make(chan struct{}), release: make(chan struct{})}
	n := start(ahead, hold)
	t.Cleanup(func() { hold.let(); _ = n.Shutdown() })
	select {
	case <-hold.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted node never began applying its log")
	}
	if stateNow(n) != 0 {
		t.Fatal("the held node has log time already")
	}
	time.Sleep(300 * time.Millisecond) // its drivers tick meanwhile
	hold.let()
	if !clustertest.Poll(5*time.Second, func() bool { return stateNow(n) > was+300 }) {
		t.Fatalf("log time did not go on after the replay: %d, was %d", stateNow(n), was)
	}
	time.Sleep(500 * time.Millisecond)
	moved, realMs := stateNow(n)-was, time.Since(stopped).Milliseconds()
	if moved > realMs+realMs/node.CatchUpDiv+1000 {
		t.Fatalf("log time moved %d ms in %d ms of real time under a calendar 3 h ahead", moved, realMs)
	}
}
