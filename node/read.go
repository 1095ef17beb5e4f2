package node

import (
	"context"
	"errors"
	"time"
)

// MaxReadWait bounds how long a read waits for X-Min-Index or a
// linearizable read index before answering 503.
const MaxReadWait = 3 * time.Second

// ErrReadTimeout means the node did not reach the wanted index in time.
var ErrReadTimeout = errors.New("node has not applied the requested index in time")

// WaitApplied blocks until the node has applied index, the context ends, or
// MaxReadWait passes.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if n.machine.Applied() >= index {
		return nil // the usual case, a write answered on its leader: no timer
	}
	ctx, cancel := context.WithTimeout(ctx, MaxReadWait)
	defer cancel()
	for {
		ch := n.fsm.changed()
		if n.machine.Applied() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ErrReadTimeout
		}
	}
}
