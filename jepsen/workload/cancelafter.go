package workload

import (
	"context"

	"github.com/perpd/perpd/jepsen/history"
)

// The dead-man switch: a trader arms POST /v1/cancel-all-after with a
// short timeout, refreshes it now and then, and sometimes disarms it. The
// timeouts are short (1-3 s) and a trader calls it every few seconds on
// average, so deadlines really pass during the run, between faults and
// across leader changes, and the switch cancels orders the trader still
// has resting. Checked by checker.Trading (see checker/cancelafter.go).

const (
	caaMinTimeoutMs = 1_000
	caaMaxTimeoutMs = 3_000
	// caaDisarmOneIn: one call in this many disarms.
	caaDisarmOneIn = 5
)

// CancelAllAfter arms or refreshes the trader's switch with a random
// short timeout, or disarms it.
func CancelAllAfter(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if e.NoCancelAfter {
		return PlaceLimit(ctx, e, p, acct)
	}
	var timeoutMs int64
	if p.Rand.Intn(caaDisarmOneIn) != 0 {
		timeoutMs = caaMinTimeoutMs + p.Rand.Int63n(caaMaxTimeoutMs-caaMinTimeoutMs+1)
	}
	return cancelAfter(ctx, e, p, acct, timeoutMs)
}

func cancelAfter(ctx context.Context, e *Env, p *Process, acct *Account, timeoutMs int64) history.Type {
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FCancelAfter, Account: acct.ID,
		IdemKey: idemKey(p.Rand, "caa"), TimeoutMs: history.Int64(timeoutMs)})
	octx, cancel := opCtx(ctx)
	defer cancel()
	done := history.Op{}
	retryCancelAfter(octx, e, p.Node, Pending{Op: inv, Account: acct}, &done)
	e.Rec.Complete(inv, done)
	if done.Type == history.Info {
		e.AddPending(Pending{Op: inv, Account: acct})
	}
	return done.Type
}

// retryCancelAfter sends the call of pend (its key and timeout) to node.
func retryCancelAfter(ctx context.Context, e *Env, node string, pend Pending, done *history.Op) {
	res, a := e.Client.CancelAllAfter(ctx, node, pend.Account.APIKey, pend.Op.IdemKey, *pend.Op.TimeoutMs)
	res.Fill(done)
	if a != nil {
		done.Armed = &a.Armed
		done.DeadlineTsMs = a.DeadlineTsMs
	}
}
