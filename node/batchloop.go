package node

import "time"

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
	// finished gets one signal per launched batch once its answers are
	// out, carrying how many items it answered; its capacity is
	// inFlightMax, so a sender never blocks.
	finished chan int
	// linger, when positive, lets the loop wait up to that long after a
	// batch of at least LingerFrom finishes for its callers' next items
	// (group.go explains why); lingerGap, when positive, ends that wait
	// early once no item has arrived for so long.
	linger, lingerGap time.Duration
	// launch sends a batch from the head of backlog (at most max items)
	// and reports how many items it took and whether a batch is now in
	// flight (which then signals finished).
	launch func(backlog []T) (taken int, launched bool)
	// launched, if set, sees the number in flight after each launch.
	launched func(inFlight int)
	// stopped answers whatever is still queued when the node stops.
	stopped func(backlog []T)
}

func newBatchLoop[T any](queue, max, inFlightMax int, stop <-chan struct{}) *batchLoop[T] {
	return &batchLoop[T]{in: make(chan T, queue), stop: stop, max: max, inFlightMax: inFlightMax,
		finished: make(chan int, inFlightMax)}
}

// run is the loop; it alone counts the batches in flight, and it ends
// when stop closes.
func (l *batchLoop[T]) run() {
	var backlog []T
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
		ready := len(backlog) > 0 && (inFlight == 0 || (len(backlog) >= l.max && inFlight < l.inFlightMax))
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
			taken, launched := l.launch(backlog[:min(len(backlog), l.max)])
			backlog = append(backlog[:0:0], backlog[taken:]...)
			if launched {
				inFlight++
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
		case n := <-l.finished:
			inFlight--
			if l.linger > 0 && inFlight == 0 && n >= LingerFrom {
				now := time.Now()
				expect, deadline, lastArrival = min(len(backlog)+n, l.max), now.Add(l.linger), now
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
