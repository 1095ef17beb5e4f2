package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
)

// A write whose group never comes back is given up at its deadline, and
// at once when its caller goes away, whichever is first; the pooled timer
// it waited on holds no tick for the next waiter.
func TestEnqueueWaitsUntilTheDeadlineOrTheCaller(t *testing.T) {
	n := &Node{committer: &committer{batchLoop: newBatchLoop[*queued](16, 8, 1, nil)}} // nobody runs the loop
	cmd := &fsm.Command{Type: fsm.CmdTick}

	start := time.Now()
	_, err := n.enqueue(context.Background(), cmd, start.Add(50*time.Millisecond))
	if waited := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || waited < 40*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("err %v after %v; want DeadlineExceeded after about 50ms", err, waited)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start = time.Now()
	_, err = n.enqueue(ctx, cmd, start.Add(time.Hour))
	if waited := time.Since(start); !errors.Is(err, context.Canceled) || waited > 2*time.Second {
		t.Fatalf("err %v after %v; want Canceled when the caller goes", err, waited)
	}

	// The next waiter gets a whole wait, not a tick left by the last one.
	start = time.Now()
	_, err = n.enqueue(context.Background(), cmd, start.Add(80*time.Millisecond))
	if waited := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || waited < 70*time.Millisecond {
		t.Fatalf("err %v after %v; want DeadlineExceeded after about 80ms", err, waited)
	}

	// An answer wins over both.
	for len(n.committer.in) > 0 { // the earlier waiters' entries
		<-n.committer.in
	}
	go func() {
		q := <-n.committer.in
		q.done <- queuedAnswer{res: &fsm.Result{Status: 200}}
	}()
	res, err := n.enqueue(context.Background(), cmd, time.Now().Add(5*time.Second))
	if err != nil || res == nil || res.Status != 200 {
		t.Fatalf("answer %v, %v; want the committer's", res, err)
	}
}
