package node

import (
	"testing"

	"github.com/perpd/perpd/fsm"
)

// A subscriber that overflows is told (Lost closes) and the loss is
// counted; a subscriber that keeps up is untouched.
func TestBusOverflowIsSignalledAndCounted(t *testing.T) {
	b := NewBusBuffer(2)
	slow, fast := b.Subscribe(), b.Subscribe()
	batch := []fsm.Event{{Kind: "deposit", Account: "a"}}
	for i := 0; i < 2; i++ {
		b.Publish(batch)
		<-fast.C
	}
	select {
	case <-slow.Lost():
		t.Fatal("lost signalled before any batch was dropped")
	default:
	}
	b.Publish(batch)
	b.Publish(batch)
	<-fast.C
	<-fast.C
	select {
	case <-slow.Lost():
	default:
		t.Fatal("a full subscriber was not told it lost events")
	}
	if slow.Dropped() != 2 || b.Dropped() != 2 || b.Overflows() != 1 {
		t.Fatalf("dropped %d (bus %d), overflows %d; want 2, 2, 1", slow.Dropped(), b.Dropped(), b.Overflows())
	}
	select {
	case <-fast.Lost():
		t.Fatal("a subscriber that kept up was flagged")
	default:
	}
	if fast.Dropped() != 0 || len(slow.C) != 2 {
		t.Fatalf("fast dropped %d, slow queue %d", fast.Dropped(), len(slow.C))
	}
	b.Unsubscribe(slow)
	b.Close()
}

// A gap (a snapshot installed in place of log entries) tells every
// subscriber that its stream skipped events, without counting a drop.
func TestBusGapIsSignalled(t *testing.T) {
	b := NewBusBuffer(2)
	s := b.Subscribe()
	b.Gap()
	select {
	case <-s.Lost():
	default:
		t.Fatal("a subscriber was not told of the gap")
	}
	b.Gap() // again: Lost is already closed, no panic
	if b.Dropped() != 0 || s.Dropped() != 0 {
		t.Fatalf("dropped %d/%d", b.Dropped(), s.Dropped())
	}
	b.Close()
}
