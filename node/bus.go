package node

import (
	"sync"

	"github.com/perpd/perpd/fsm"
)

// BusBuffer bounds each subscriber's queue. A subscriber that falls this
// far behind loses events (it is told so) rather than slowing apply.
const BusBuffer = 4096

// Bus fans applied events out to subscribers (the WebSocket layer). Publish
// never blocks the state machine.
type Bus struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
}

// Subscription receives batches of events in apply order.
type Subscription struct {
	C       chan []fsm.Event
	mu      sync.Mutex
	dropped uint64
}

// Dropped returns how many batches were lost because the queue was full.
func (s *Subscription) Dropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscribe registers a new subscriber.
func (b *Bus) Subscribe() *Subscription {
	s := &Subscription{C: make(chan []fsm.Event, BusBuffer)}
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

// Publish hands evs to every subscriber without blocking.
func (b *Bus) Publish(evs []fsm.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case s.C <- evs:
		default:
			s.mu.Lock()
			s.dropped++
			s.mu.Unlock()
		}
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
