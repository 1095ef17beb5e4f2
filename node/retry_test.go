package node

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// pickKeys runs pick over keys and returns the picked keys.
func pickKeys(s *retrySchedule, keys []string, now time.Time, limit int) []string {
	var out []string
	for _, i := range s.pick(len(keys), func(i int) string { return keys[i] }, now, limit) {
		out = append(out, keys[i])
	}
	return out
}

func newSchedule() *retrySchedule {
	s := &retrySchedule{}
	s.inTerm(1)
	return s
}

// A pass full of items the rail keeps answering "not yet" does not keep a
// later item from the rail: never-asked items come first, in the order
// given, and waiting ones only when their delay is over.
func TestRetryScheduleAsksNewItemsBeforeWaitingOnes(t *testing.T) {
	s, t0 := newSchedule(), time.Unix(1_000, 0)
	open := []string{"a", "b", "c"}
	if got := pickKeys(s, open, t0, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first pass %v, want the first two (the cap)", got)
	}
	s.wait("a", t0)
	s.wait("b", t0)
	open = append(open, "d")
	if got := pickKeys(s, open, t0, 2); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("second pass %v, want the never-asked c, d", got)
	}
	s.wait("c", t0)
	s.wait("d", t0)
	if got := pickKeys(s, open, t0.Add(retryDelayMin-1), 2); len(got) != 0 {
		t.Fatalf("before the delay %v, want nothing", got)
	}
	if got := pickKeys(s, open, t0.Add(retryDelayMin), 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("at the delay %v, want a, b (due, the cap)", got)
	}
	if got := pickKeys(s, open, t0.Add(retryDelayMin), 0); len(got) != 0 {
		t.Fatalf("a cap of 0 picked %v", got)
	}
}

// Items waiting their turn are asked longest due first, so a cap smaller
// than the waiting set rotates through all of them.
func TestRetryScheduleRotatesThroughWaitingItems(t *testing.T) {
	s, t0 := newSchedule(), time.Unix(1_000, 0)
	var open []string
	for i := range 6 {
		open = append(open, fmt.Sprint(i))
	}
	seen := map[string]int{}
	now := t0
	for pass := range 6 {
		got := pickKeys(s, open, now, 2)
		if len(got) != 2 {
			t.Fatalf("pass %d picked %v", pass, got)
		}
		for _, k := range got {
			seen[k]++
			s.wait(k, now)
		}
		now = now.Add(retryDelayMax) // every waiting item is due again
	}
	for _, k := range open {
		if seen[k] != 2 {
			t.Fatalf("6 passes of 2 over 6 items asked %v; want each twice", seen)
		}
	}
}

func TestRetryScheduleBacksOffByDoublingUpToTheMaximum(t *testing.T) {
	s, t0 := newSchedule(), time.Unix(1_000, 0)
	var got []time.Duration
	for range 8 {
		got = append(got, s.wait("a", t0))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		retryDelayMax, retryDelayMax, retryDelayMax}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	s.forget("a")
	if d := s.wait("a", t0); d != retryDelayMin {
		t.Fatalf("a forgotten item starts again at %v, not %v", d, retryDelayMin)
	}
}

// The schedule holds open items only, and a new term (this node leads
// again, after another) starts it empty: every open item is asked at once.
func TestRetryScheduleForgetsClosedItemsAndOtherTerms(t *testing.T) {
	s, t0 := newSchedule(), time.Unix(1_000, 0)
	s.wait("a", t0)
	s.wait("b", t0)
	pickKeys(s, []string{"b"}, t0, 10)
	if _, ok := s.due["a"]; ok || len(s.due) != 1 {
		t.Fatalf("closed item a still scheduled: %v", s.due)
	}
	s.inTerm(1)
	if got := pickKeys(s, []string{"b"}, t0, 10); len(got) != 0 {
		t.Fatalf("same term: %v picked before its delay", got)
	}
	s.inTerm(2)
	if got := pickKeys(s, []string{"b"}, t0, 10); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("new term picked %v, want b at once", got)
	}
}
