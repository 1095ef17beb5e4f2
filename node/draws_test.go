package node

import (
	"fmt"
	"testing"
	"time"
)

// A forwarded draw's admission is remembered for at least the memory's
// span and forgotten within twice it; refusals are never remembered.
func TestDrawMemoryKeepsAdmissionsForItsSpan(t *testing.T) {
	var ds draws
	keep := time.Minute
	t0 := time.Unix(1_800_000_000, 0)
	calls := 0
	admit := func() Verdict { calls++; return Verdict{OK: true, Remaining: calls} }
	refuse := func() Verdict { calls++; return Verdict{RetryAfterMs: 10} }

	if v := ds.take("a", t0, keep, admit); !v.OK || calls != 1 {
		t.Fatalf("first draw: %+v after %d calls", v, calls)
	}
	for _, at := range []time.Duration{0, keep / 2, keep - time.Second, keep, 2*keep - time.Second} {
		if v := ds.take("a", t0.Add(at), keep, admit); calls != 1 || v.Remaining != 1 {
			t.Fatalf("retry at +%v drew again (%d calls, %+v)", at, calls, v)
		}
	}
	if ds.take("a", t0.Add(2*keep), keep, admit); calls != 2 {
		t.Fatalf("after twice the span the admission should be forgotten: %d calls", calls)
	}
	ds.take("r", t0.Add(2*keep), keep, refuse)
	ds.take("r", t0.Add(2*keep), keep, refuse)
	if calls != 4 {
		t.Fatalf("a refusal was remembered: %d calls", calls)
	}
	ds.take("", t0.Add(2*keep), keep, admit)
	ds.take("", t0.Add(2*keep), keep, admit)
	if calls != 6 {
		t.Fatalf("draws without an id must each draw: %d calls", calls)
	}
}

// The memory never holds more than maxRememberedDraws verdicts, however
// fast admissions arrive.
func TestDrawMemoryIsBounded(t *testing.T) {
	var ds draws
	now := time.Unix(1_800_000_000, 0)
	admit := func() Verdict { return Verdict{OK: true} }
	for i := range 3 * maxRememberedDraws {
		ds.take(fmt.Sprint("id-", i), now, time.Hour, admit)
	}
	if n := ds.size(); n > maxRememberedDraws || n < maxRememberedDraws/2 {
		t.Fatalf("remembered %d, want at most %d and at least the newest half", n, maxRememberedDraws)
	}
	calls := 0
	ds.take(fmt.Sprint("id-", 3*maxRememberedDraws-1), now, time.Hour, func() Verdict { calls++; return Verdict{OK: true} })
	if calls != 0 {
		t.Fatal("the newest admission was forgotten")
	}
}
