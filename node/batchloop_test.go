package node

import (
	"testing"
	"time"
)

// loopHarness runs a batchLoop whose launches are reported on a channel
// and finished by the test.
type loopHarness struct {
	l        *batchLoop[int]
	launches chan []int
	stop     chan struct{}
}

func startLoop(t *testing.T, linger time.Duration) *loopHarness {
	t.Helper()
	return startLoopGap(t, linger, 0)
}

// startLoopGap is startLoop whose linger also ends gap after the last
// arrival.
func startLoopGap(t *testing.T, linger, gap time.Duration) *loopHarness {
	t.Helper()
	h := &loopHarness{launches: make(chan []int, 16), stop: make(chan struct{})}
	h.l = newBatchLoop[int](1024, 256, 4, h.stop)
	h.l.linger, h.l.lingerGap = linger, gap
	h.l.launch = func(backlog []int) (int, bool) {
		h.launches <- append([]int(nil), backlog...)
		return len(backlog), true
	}
	h.l.stopped = func([]int) {}
	done := make(chan struct{})
	go func() { h.l.run(); close(done) }()
	t.Cleanup(func() { close(h.stop); <-done })
	return h
}

func (h *loopHarness) send(from, n int) {
	for i := range n {
		h.l.in <- from + i
	}
}

// next waits for a launch; within says how long it may take.
func (h *loopHarness) next(t *testing.T, within time.Duration) []int {
	t.Helper()
	select {
	case b := <-h.launches:
		return b
	case <-time.After(within):
		t.Fatalf("no batch launched within %v", within)
		return nil
	}
}

func (h *loopHarness) none(t *testing.T, during time.Duration) {
	t.Helper()
	select {
	case b := <-h.launches:
		t.Fatalf("batch of %d launched while it should linger", len(b))
	case <-time.After(during):
	}
}

// After a large batch finishes, the loop waits for its callers' next items
// (as many as it answered plus those already waiting) and sends them all
// in one batch, instead of launching the waiting half alone.
func TestLoopLingersForTheAnsweredCallers(t *testing.T) {
	h := startLoop(t, time.Hour)
	h.send(0, 1)
	if b := h.next(t, time.Second); len(b) != 1 {
		t.Fatalf("first batch %v; a lone item goes at once", b)
	}
	h.send(100, 20) // they arrive while the first batch is in flight
	h.l.finish("", 1)
	if b := h.next(t, time.Second); len(b) != 20 {
		t.Fatalf("second batch has %d items, want the 20 waiting (the finished batch had 1)", len(b))
	}
	h.send(200, 12) // waiting while the 20 are in flight
	h.l.finish("", 20)
	h.none(t, 50*time.Millisecond)
	h.send(300, 19)
	h.none(t, 50*time.Millisecond)
	h.send(400, 1) // 12 waited + 20 answered: all 32 are here
	if b := h.next(t, time.Second); len(b) != 32 {
		t.Fatalf("merged batch has %d items, want 32", len(b))
	}
}

// The wait is bounded by linger: the callers that do not come back do not
// hold the ones that did. The linger is long enough that "at once" below
// (within half of it) holds on a loaded machine too.
func TestLoopLingerEndsAtItsBound(t *testing.T) {
	const linger = time.Second
	h := startLoop(t, linger)
	h.send(0, 10)
	h.next(t, time.Second)
	h.l.finish("", 10)
	start := time.Now()
	h.send(100, 3)
	b := h.next(t, 10*linger)
	if waited := time.Since(start); len(b) != 3 || waited < linger*2/3 {
		t.Fatalf("batch of %d after %v; want the 3 after about %v", len(b), waited, linger)
	}
	// The bound holds again after the next large batch: a lone late item
	// waits at most linger.
	h.l.finish("", 3) // small: no wait
	h.send(200, 1)
	if b := h.next(t, linger/2); len(b) != 1 {
		t.Fatalf("after a small batch, %v; want the lone item at once", b)
	}
}

// With a gap, the wait lasts while the callers keep coming, however long
// that takes within the bound, and ends one gap after the last arrival when
// some never come back.
func TestLoopLingerFollowsArrivalsUntilTheyStop(t *testing.T) {
	// Arrivals are far apart in count but close in time against the gap:
	// a loaded machine that stalls the sender for hundreds of ms between
	// two arrivals still stays within one gap.
	const gap, every, callers, back = 450 * time.Millisecond, 40 * time.Millisecond, 30, 25
	h := startLoopGap(t, time.Hour, gap)
	h.send(0, callers)
	h.next(t, time.Second)
	h.l.finish("", callers) // expects the 30 callers back
	// Twenty-five come back 40 ms apart: a second in all, more than two
	// gaps, never one gap without an arrival.
	for i := range back {
		h.none(t, every)
		h.send(100+i, 1)
	}
	// The last five never come: the wait ends about a gap after the
	// twenty-fifth, not at the hour bound.
	start := time.Now()
	b := h.next(t, 10*gap)
	if waited := time.Since(start); len(b) != back || waited < gap*2/3 {
		t.Fatalf("batch of %d after %v; want the %d about %v after the last", len(b), waited, back, gap)
	}
}

// No linger configured (or a small finished batch) means no wait at all:
// the next batch goes as soon as the last one finishes.
func TestLoopWithoutLingerLaunchesAtOnce(t *testing.T) {
	h := startLoop(t, 0)
	h.send(0, 50)
	h.next(t, time.Second)
	h.send(100, 5)
	h.l.finish("", 50)
	if b := h.next(t, time.Second); len(b) != 5 {
		t.Fatalf("batch %v; want the 5 waiting at once", b)
	}
}

// A full batch never waits, linger or not.
func TestLoopFullBatchDoesNotLinger(t *testing.T) {
	h := startLoop(t, time.Hour)
	h.send(0, 200)
	h.next(t, time.Second)
	h.send(1000, 100)
	h.l.finish("", 200) // expects 300, capped at the 256 of a full batch
	h.send(2000, 156)
	if b := h.next(t, time.Second); len(b) != 256 {
		t.Fatalf("batch of %d; want a full 256 at once", len(b))
	}
}
