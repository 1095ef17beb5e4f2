package node

import (
	"sync"
	"sync/atomic"

	"github.com/perpd/perpd/fsm"
)

// BusBuffer bounds each subscriber's queue. A subscriber that falls this
// far behind loses events rather than slowing apply, and is told so: its
// Lost channel closes at the first batch it misses.
const BusBuffer = 4096

// Bus fans applied events out to subscribers (the WebSocket layer, the
// payout driver). Publish never blocks the state machine.
type Bus struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
	buffer int

	dropped   atomic.Uint64
	overflows atomic.Uint64
}

// Subscription receives batches of events in apply order. After Lost
// closes, the stream has a gap; the subscription stays open (C keeps
// delivering later batches) so the subscriber chooses how to recover.
type Subscription struct {
	C        chan []fsm.Event
	lost     chan struct{}
	lostOnce sync.Once
	dropped  atomic.Uint64
}

// Dropped returns how many batches were lost because the queue was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Lost is closed when the subscription first misses a batch.
func (s *Subscription) Lost() <-chan struct{} { return s.lost }

// NewBus returns an empty bus with BusBuffer-deep queues.
func NewBus() *Bus { return NewBusBuffer(BusBuffer) }

// NewBusBuffer returns an empty bus whose subscribers queue up to buffer
// batches.
func NewBusBuffer(buffer int) *Bus {
	return &Bus{subs: map[*Subscription]struct{}{}, buffer: buffer}
}

// Dropped counts batches lost by any subscriber since the bus started.
func (b *Bus) Dropped() uint64 { return b.dropped.Load() }

// Overflows counts subscriptions that lost events (each counted once).
func (b *Bus) Overflows() uint64 { return b.overflows.Load() }

// Subscribe registers a new subscriber.
func (b *Bus) Subscribe() *Subscription {
	s := &Subscription{C: make(chan []fsm.Event, b.buffer), lost: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.C)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Unsubscribe removes s and closes its channel.
func (b *Bus) Unsubscribe(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.C)
	}
}

// Publish hands evs to every subscriber without blocking. A subscriber
// whose queue is full misses evs: it is counted and its Lost channel
// closes.
func (b *Bus) Publish(evs []fsm.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case s.C <- evs:
		default:
			s.dropped.Add(1)
			b.dropped.Add(1)
			s.lostOnce.Do(func() {
				b.overflows.Add(1)
				close(s.lost)
			})
		}
	}
}

// Gap tells every subscriber that the stream skipped events without a
// full queue: the state machine was replaced by a snapshot (a follower's
// install from the leader, an operator's restore), so the entries it
// covers were never applied here and emitted nothing. Each subscriber's
// Lost closes, as for an overflow.
func (b *Bus) Gap() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.lostOnce.Do(func() { close(s.lost) })
	}
}

// Close ends every subscription.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		close(s.C)
		delete(b.subs, s)
	}
}
