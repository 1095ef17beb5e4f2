// Package par splits index-addressed work over the machine's cores.
//
// The replicated state machine uses it for pure computations too large
// to run on one core inside apply (the Proof of Reserves trees: about
// 400,000 SHA-256 blocks a minute at 100,000 accounts). The work must be
// a function of the index alone, each call writing only its own indices,
// so the result is the same however the chunks are scheduled: that is
// what keeps apply deterministic across replicas with different core
// counts.
package par

import (
	"runtime"
	"sync"
)

// For calls f(lo, hi) over contiguous ranges that cover [0, n) exactly
// once, each at least grain long (the last may be shorter), on up to
// GOMAXPROCS goroutines, and returns when all have. Below 2*grain it calls
// f(0, n) on the caller's goroutine. A panic in any call is raised again
// on the caller's goroutine once every call has returned, so a failed
// invariant still stops the replica where apply can see it.
func For(n, grain int, f func(lo, hi int)) {
	if grain < 1 {
		grain = 1
	}
	workers := min(runtime.GOMAXPROCS(0), n/grain)
	if workers < 2 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failure any
	run := func(lo, hi int) {
		defer func() {
			if r := recover(); r != nil {
				mu.Lock()
				if failure == nil {
					failure = r
				}
				mu.Unlock()
			}
		}()
		f(lo, hi)
	}
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			run(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	run(0, min(chunk, n)) // the caller takes the first chunk itself
	wg.Wait()
	if failure != nil {
		panic(failure) // the same value the call panicked with
	}
}
