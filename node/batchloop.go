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

// outTo counts the batches in flight by destination (a few: the leaders
// of the last terms).
type outTo []batchDone

func (o outTo) of(key string) int {
	for _, d := range o {
		if d.key == key {
			return d.n
		}
	}
	return 0
}

func (o outTo) add(key string, delta int) outTo {
	for i := range o {
		if o[i].key == key {
			if o[i].n += delta; o[i].n == 0 {
				return slices.Delete(o, i, i+1)
			}
			return o
		}
	}
	return append(o, batchDone{key: key, n: delta})
}

// next picks the destination of the batch that may go now: the first in
// backlog order with no batch out, or with a full batch waiting and fewer
// than inFlightMax out. It returns the destination and how many of
// backlog's items are bound for it (0: no batch may go now).
func (l *batchLoop[T]) next(backlog []T, out outTo, total int) (string, int) {
	if len(backlog) == 0 || total >= l.outMax() {
		return "", 0
	}
	if l.keyOf == nil {
		if total == 0 || (len(backlog) >= l.max && total < l.inFlightMax) {
			return "", len(backlog)
		}
		return "", 0
	}
	count := func(k string) int {
		c := 0
		for _, it := range backlog {
			if l.keyOf(it) == k {
				c++
			}
		}
		return c
	}
	var blocked []string
	for _, it := range backlog {
		k := l.keyOf(it)
		if slices.Contains(blocked, k) {
			continue
		}
		n := out.of(k)
		if n == 0 {
			return k, count(k)
		}
		if len(backlog) >= l.max && n < l.inFlightMax {
			if c := count(k); c >= l.max {
				return k, c
			}
		}
		blocked = append(blocked, k)
	}
	return "", 0
}

// run is the loop; it alone counts the batches in flight, and it ends
// when stop closes.
func (l *batchLoop[T]) run() {
	var backlog []T
	var out outTo
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
				backlog = append(backlog, it)
			default:
				break take
			}
		}
		if expect > 0 && len(backlog) > had && l.lingerGap > 0 {
			lastArrival = time.Now()
		}
		key, count := l.next(backlog, out, inFlight)
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
			if launched {
				inFlight++
				out = out.add(key, 1)
				if l.launched != nil {
					l.launched(inFlight)
				}
			}
			continue
		}
		// Wait for a batch to finish or an item to arrive; a backlog of a
		// full batch per slot takes no more (the queue holds the rest).
		in := l.in
		if len(backlog) >= l.max*l.inFlightMax {
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
			backlog = append(backlog, it)
			if expect > 0 && l.lingerGap > 0 {
				lastArrival = time.Now()
			}
		}
	}
}
