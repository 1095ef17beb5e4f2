package node

import (
	"slices"
	"time"
)

// batchLoop is the no-timer batching rule the leader's committer and a
// follower's forward batcher share: items queue on in; one batch goes out
// whenever none is in flight, and another beside it only while a full
// batch (max) waits, up to inFlightMax. Fuller batches carry more writes
// for the same per-batch cost (an fsync and a replication round per raft
// entry, a round trip per forward call), and a lone item still goes at
// once.
type batchLoop[T any] struct {
	in          chan T
	stop        <-chan struct{}
	max         int
	inFlightMax int
	// keyOf, when set, names each item's destination (the forward
	// batcher's leader address): a batch holds one destination's items,
	// and the rule above holds per destination, so a batch stuck on one
	// (a leader that died mid-call holds the call until its timeout)
	// never holds back the items bound for another (the leader elected
	// meanwhile). Then up to outMax batches are out in all. Nil: one
	// destination.
	keyOf func(T) string
	// finished gets one signal per launched batch once its answers are
	// out (finish); its capacity is outMax, so a sender never blocks.
	finished chan batchDone
	// linger, when positive, lets the loop wait up to that long after a
	// batch of at least LingerFrom finishes for its callers' next items
	// (group.go explains why); lingerGap, when positive, ends that wait
	// early once no item has arrived for so long.
	linger, lingerGap time.Duration
	// launch sends a batch from the head of backlog (at most max items,
	// all bound for one destination) and reports how many items it took
	// and whether a batch is now in flight (which then signals finished).
	launch func(backlog []T) (taken int, launched bool)
	// launched, if set, sees the number in flight after each launch.
	launched func(inFlight int)
	// stopped answers whatever is still queued when the node stops.
	stopped func(backlog []T)
}

// batchDone is a finished batch: its destination and the items it
// answered.
type batchDone struct {
	key string
	n   int
}

func newBatchLoop[T any](queue, max, inFlightMax int, stop <-chan struct{}) *batchLoop[T] {
	return &batchLoop[T]{in: make(chan T, queue), stop: stop, max: max, inFlightMax: inFlightMax,
		finished: make(chan batchDone, 2*inFlightMax)}
}

// outMax bounds the batches out at once: inFlightMax, or with
// destinations twice that, so that a new leader gets as many calls as the
// dead one holds.
func (l *batchLoop[T]) outMax() int {
	if l.keyOf == nil {
		return l.inFlightMax
	}
	return 2 * l.inFlightMax
}

// finish signals that a launched batch bound for key (keyOf; "" without
// destinations) has answered its n items.
func (l *batchLoop[T]) finish(key string, n int) { l.finished <- batchDone{key: key, n: n} }

// byKey counts batches out, or items waiting, by destination (a few:
// the leaders of the last terms), in the order the destinations came.
type byKey []batchDone

func (c byKey) of(key string) int {
	for _, d := range c {
		if d.key == key {
			return d.n
		}
	}
	return 0
}

func (c byKey) add(key string, delta int) byKey {
	for i := range c {
		if c[i].key == key {
			if c[i].n += delta; c[i].n == 0 {
				return slices.Delete(c, i, i+1)
			}
			return c
		}
	}
	return append(c, batchDone{key: key, n: delta})
}

// next picks the destination of the batch that may go now: the first
// with no batch out, or with a full batch waiting and fewer than
// inFlightMax out. It returns the destination and how many items wait for
// it (0: no batch may go now).
func (l *batchLoop[T]) next(backlog int, out, waiting byKey, inFlight int) (string, int) {
	if backlog == 0 || inFlight >= l.outMax() {
		return "", 0
	}
	if l.keyOf == nil {
		if inFlight == 0 || (backlog >= l.max && inFlight < l.inFlightMax) {
			return "", backlog
		}
		return "", 0
	}
	for _, w := range waiting {
		if n := out.of(w.key); n == 0 || (w.n >= l.max && n < l.inFlightMax) {
			return w.key, w.n
		}
	}
	return "", 0
}

// backlogMax is the backlog past which the loop takes no more items (the
// queue holds the rest): a full batch per slot, or with destinations the
// queue's size, so that the items bound for a new destination reach the
// backlog while a stuck one's wait.
func (l *batchLoop[T]) backlogMax() int {
	if l.keyOf == nil {
		return l.max * l.inFlightMax
	}
	return cap(l.in)
}

// run is the loop; it alone counts the batches in flight, and it ends
// when stop closes.
func (l *batchLoop[T]) run() {
	var backlog []T
	// out and waiting are the batches out and the items of backlog by
	// destination (kept only with keyOf).
	var out, waiting byKey
	push := func(it T) {
		backlog = append(backlog, it)
		if l.keyOf != nil {
			waiting = waiting.add(l.keyOf(it), 1)
		}
	}
	inFlight := 0
	// expect is the backlog worth waiting for until deadline: what waited
	// when the last batch finished plus the callers it just answered;
	// lastArrival is when the wait began or an item last joined it.
	expect, deadline, lastArrival := 0, time.Time{}, time.Time{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lingering <-chan time.Time
	for {
		had := len(backlog)
	take:
		for len(backlog) < l.max {
			select {
			case it := <-l.in:
				push(it)
			default:
				break take
			}
		}
		if expect > 0 && len(backlog) > had && l.lingerGap > 0 {
			lastArrival = time.Now()
		}
		key, count := l.next(len(backlog), out, waiting, inFlight)
		ready := count > 0
		if ready && inFlight == 0 && len(backlog) < expect {
			wait := time.Until(deadline)
			if l.lingerGap > 0 {
				wait = min(wait, time.Until(lastArrival.Add(l.lingerGap)))
			}
			if wait > 0 {
				ready = false
				timer.Reset(wait)
				lingering = timer.C
			}
		}
		if ready {
			if lingering != nil {
				timer.Stop()
				lingering = nil
			}
			expect = 0
			if count < len(backlog) {
				// This destination's items first, the rest after in
				// their order: the loop drops the first `taken`.
				mine := make([]T, 0, len(backlog))
				var rest []T
				for _, it := range backlog {
					if l.keyOf(it) == key {
						mine = append(mine, it)
					} else {
						rest = append(rest, it)
					}
				}
				backlog = append(mine, rest...)
			}
			taken, launched := l.launch(backlog[:min(count, l.max)])
			backlog = append(backlog[:0:0], backlog[taken:]...)
			if l.keyOf != nil {
				waiting = waiting.add(key, -taken)
			}
			if launched {
				inFlight++
				out = out.add(key, 1)
				if l.launched != nil {
					l.launched(inFlight)
				}
			}
			continue
		}
		// Wait for a batch to finish or an item to arrive.
		in := l.in
		if len(backlog) >= l.backlogMax() {
			in = nil
		}
		select {
		case <-l.stop:
			l.stopped(backlog)
			return
		case d := <-l.finished:
			inFlight--
			out = out.add(d.key, -1)
			if l.linger > 0 && inFlight == 0 && d.n >= LingerFrom {
				now := time.Now()
				expect, deadline, lastArrival = min(len(backlog)+d.n, l.max), now.Add(l.linger), now
			}
		case <-lingering:
			lingering = nil
		case it := <-in:
			push(it)
			if expect > 0 && l.lingerGap > 0 {
				lastArrival = time.Now()
			}
		}
	}
}
