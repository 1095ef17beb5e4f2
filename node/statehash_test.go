package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowHasher is a stateHasher whose hashes wait for release, counting them.
type slowHasher struct {
	*stateHasher
	calls   atomic.Int64
	release chan struct{}
}

func newSlowHasher() *slowHasher {
	s := &slowHasher{release: make(chan struct{})}
	s.stateHasher = &stateHasher{hashAt: func(index uint64) (string, error) {
		s.calls.Add(1)
		<-s.release
		if index == 13 {
			return "", errors.New("shadow cannot reach 13")
		}
		return fmt.Sprintf("h%d", index), nil
	}}
	return s
}

func (s *slowHasher) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		idle := s.flight == nil
		s.mu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the hash never finished")
		}
		time.Sleep(time.Millisecond)
	}
}

// The soak's finding: a poller asking once a second and giving up after a
// few started one full encoding per request, queued behind each other.
// Now callers who leave stop waiting and start nothing more: one hash ran.
func TestStateHashCallersThatLeaveDoNotPileUpWork(t *testing.T) {
	s := newSlowHasher()
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, _, err := s.recentOrAt(ctx, uint64(100+i)) // the applied index moves on
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("caller %d: %v, want its deadline", i, err)
		}
	}
	close(s.release)
	s.waitIdle(t)
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("%d hashes computed for 20 callers who all left, want 1", n)
	}
	// The work that ran is kept: its index is answered without hashing.
	if idx, h, err := s.recentOrAt(context.Background(), 100); err != nil || idx != 100 || h != "h100" || s.calls.Load() != 1 {
		t.Fatalf("asked again at 100: %d %q %v after %d hashes", idx, h, err, s.calls.Load())
	}
}

// Callers at one index (the replicas check asks every member at one index;
// an operator repeats `admin state` on a quiet cluster) share one hash.
func TestStateHashAtOneIndexIsComputedOnce(t *testing.T) {
	s := newSlowHasher()
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i], _ = s.at(context.Background(), 7)
		}(i)
	}
	time.Sleep(20 * time.Millisecond)
	close(s.release)
	wg.Wait()
	for i, h := range got {
		if h != "h7" {
			t.Fatalf("caller %d got %q", i, h)
		}
	}
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("%d hashes for 8 callers at one index, want 1", n)
	}
}

// A caller that wants an exact index waits out a hash running at another
// one, then has its own computed: never the other index's hash.
func TestStateHashAtAnotherIndexWaitsItsTurn(t *testing.T) {
	s := newSlowHasher()
	s.mu.Lock()
	first := s.startLocked(5)
	s.mu.Unlock()
	done := make(chan string)
	go func() {
		h, _ := s.at(context.Background(), 6)
		done <- h
	}()
	time.Sleep(10 * time.Millisecond)
	close(s.release)
	<-first.done
	if h := <-done; h != "h6" {
		t.Fatalf("asked at 6, got %q", h)
	}
	if n := s.calls.Load(); n != 2 {
		t.Fatalf("%d hashes, want 2 (5, then 6)", n)
	}
	// The joiner's form takes whichever runs; with none running it hashes
	// the index asked, or answers from memory.
	if idx, h, _ := s.recentOrAt(context.Background(), 5); idx != 5 || h != "h5" || s.calls.Load() != 2 {
		t.Fatalf("recent at 5: %d %q after %d hashes", idx, h, s.calls.Load())
	}
}

// A failed hash is reported to its callers and not remembered: the next
// caller tries again.
func TestStateHashFailureIsNotRemembered(t *testing.T) {
	s := newSlowHasher()
	close(s.release)
	if _, err := s.at(context.Background(), 13); err == nil {
		t.Fatal("the failing index hashed")
	}
	if _, err := s.at(context.Background(), 13); err == nil || s.calls.Load() != 2 {
		t.Fatalf("second ask: %v after %d hashes, want a fresh failure", err, s.calls.Load())
	}
}

// The memory is a ring of hashCacheSize pairs: the oldest goes first.
func TestStateHashMemoryIsBounded(t *testing.T) {
	s := newSlowHasher()
	close(s.release)
	for i := uint64(1); i <= hashCacheSize+1; i++ {
		if _, err := s.at(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	before := s.calls.Load()
	if _, err := s.at(context.Background(), hashCacheSize+1); err != nil || s.calls.Load() != before {
		t.Fatal("the newest pair was not remembered")
	}
	if _, err := s.at(context.Background(), 1); err != nil || s.calls.Load() != before+1 {
		t.Fatal("the oldest pair was still remembered past the ring's size")
	}
}
