package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/node"
)

// slowMeter admits every draw after a delay: it stands for whatever holds
// a forwarded write up before it reaches the leader's queue (a backlogged
// forward batch, a slow network, a busy leader).
type slowMeter struct{ delay time.Duration }

func (m slowMeter) Take(node.Draw) node.Verdict {
	time.Sleep(m.delay)
	return node.Verdict{OK: true}
}

func (m slowMeter) Remaining(node.Draw) int { return 0 }

// A forwarded write whose caller's deadline has passed by the time the
// leader would queue it is not written: the follower has already answered
// 503 ("retry with the same idempotency-key"), and the client's retry may
// already have been judged. Applied late, the original could succeed
// after the retry was refused, and the client would be told the opposite
// of what happened.
func TestForwardedWriteIsNotAppliedAfterItsCallerGaveUp(t *testing.T) {
	const delay = 400 * time.Millisecond
	c := clustertest.Start(t, 3, clustertest.OnNode(func(n *node.Node) { n.SetMeter(slowMeter{delay}) }))
	leader, f := c.Leader(), c.Followers()[0]

	ctx, cancel := context.WithTimeout(context.Background(), delay/4)
	defer cancel()
	d := &node.Draw{ID: "late-1", Budget: "order", Subject: "key:k1"}
	cmd := noop("acct1:late")
	_, err := f.Node.Propose(node.WithDraw(ctx, d), cmd)
	if !errors.Is(err, node.ErrUnavailable) {
		t.Fatalf("the follower answered %v; want ErrUnavailable at its caller's deadline", err)
	}
	// A later write through the same leader: once it is applied, anything
	// queued before it is applied too.
	after := propose(t, leader.Node, noop("acct1:after"))
	time.Sleep(2 * delay)
	propose(t, leader.Node, noop("acct1:after-2"))
	if rec, ok := record(leader.Node, cmd.IdemKey); ok {
		t.Fatalf("the write was applied at index %d (a write after it at %d), after its caller was answered 503", rec.Index, after.Index)
	}
}
