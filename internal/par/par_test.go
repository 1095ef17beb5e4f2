package par

import (
	"runtime"
	"sync/atomic"
	"testing"
)

func TestForCoversEveryIndexOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, c := range []struct{ n, grain int }{{0, 1}, {1, 1}, {7, 1}, {7, 3}, {8, 4}, {1000, 10}, {1001, 1000}, {100_003, 4096}, {5, 0}} {
		hits := make([]int32, c.n)
		var calls atomic.Int32
		For(c.n, c.grain, func(lo, hi int) {
			calls.Add(1)
			if lo >= hi {
				t.Errorf("n=%d grain=%d: empty range [%d, %d)", c.n, c.grain, lo, hi)
			}
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&hits[i], 1)
			}
		})
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("n=%d grain=%d: index %d covered %d times", c.n, c.grain, i, h)
			}
		}
		if c.n >= 2*max(c.grain, 1) && calls.Load() < 2 {
			t.Errorf("n=%d grain=%d: one call, want the work split", c.n, c.grain)
		}
		if c.n < 2*max(c.grain, 1) && c.n > 0 && calls.Load() != 1 {
			t.Errorf("n=%d grain=%d: %d calls, want one below two grains", c.n, c.grain, calls.Load())
		}
	}
}

// A panic in a worker's chunk reaches the caller, with its own value,
// after every chunk has returned: apply's recover turns it into a halt.
func TestForRaisesAWorkersPanicOnTheCaller(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var done atomic.Int32
	defer func() {
		p := recover()
		if p != "broken at 900" {
			t.Fatalf("recovered %v, want the worker's value", p)
		}
		if done.Load() != 3 {
			t.Fatalf("%d other chunks finished before the panic surfaced, want 3", done.Load())
		}
	}()
	For(1000, 100, func(lo, hi int) {
		if lo <= 900 && 900 < hi {
			panic("broken at 900")
		}
		done.Add(1)
	})
	t.Fatal("For returned after a panic")
}
