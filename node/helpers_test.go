package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// noop is a client-style write: an idempotency key and a request hash.
func noop(key string) *fsm.Command {
	return &fsm.Command{Type: fsm.CmdNoop, IdemKey: key, ReqHash: fsm.RequestHash([]byte(key))}
}

// propose writes cmd through n and fails the test unless it is accepted.
// Only for the test's goroutine; writers use tryPropose.
func propose(t testing.TB, n *node.Node, cmd *fsm.Command) *fsm.Result {
	t.Helper()
	res, err := tryPropose(n, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tryPropose writes cmd through n and reports an error unless it is accepted.
func tryPropose(n *node.Node, cmd *fsm.Command) (*fsm.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := n.Propose(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("propose %q through %s: %w", cmd.IdemKey, n.Config().ID, err)
	}
	if !res.OK() {
		return nil, fmt.Errorf("propose %q refused: %d %s", cmd.IdemKey, res.Status, res.Body)
	}
	return res, nil
}

// record returns the idempotency record of key in n's applied state.
func record(n *node.Node, key string) (fsm.IdemRecord, bool) {
	var rec fsm.IdemRecord
	var ok bool
	n.Machine().Read(func(st *fsm.State, _ uint64) {
		if r := st.Idem.Records[key]; r != nil {
			rec, ok = *r, true
		}
	})
	return rec, ok
}

// orderCount is how many times key appears in n's idempotency order: more
// than once would mean the command was stored (so applied) twice.
func orderCount(n *node.Node, key string) int {
	count := 0
	n.Machine().Read(func(st *fsm.State, _ uint64) {
		for _, k := range st.Idem.Order {
			if k == key {
				count++
			}
		}
	})
	return count
}

// waitApplied waits until n has applied index.
func waitApplied(t testing.TB, n *node.Node, index uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Machine().Applied() < index {
		if time.Now().After(deadline) {
			t.Fatalf("%s applied %d, want %d", n.Config().ID, n.Machine().Applied(), index)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = n.WaitApplied(ctx, index)
		cancel()
	}
}
