package workload

import (
	"context"
	"strconv"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
)

// Withdrawals: funded withdrawer accounts (Env.Withdrawers, kept apart from
// the register accounts, since withdrawals move their balances) withdraw
// small amounts to a Spark address the simulated rail pays, under a fresh
// idempotency key each. The leader's rail driver pays them (or returns
// them) after the request is applied. A request with an unknown outcome is
// retried after the final heal with the same key and body, like every
// write. Checked by checker.Withdrawals.

// Withdrawal amounts, in whole sats (Spark moves whole sats), well below
// the first-seen confirmation threshold (100,000 sats), so no confirm
// token is needed.
const (
	MinWithdrawSats = 1_000
	MaxWithdrawSats = 20_000
)

// Withdraw requests a withdrawal of a random small amount to the
// withdrawer's destination.
func Withdraw(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	sats := MinWithdrawSats + p.Rand.Int63n(MaxWithdrawSats-MinWithdrawSats+1)
	return WithdrawAmount(ctx, e, p, acct, sats*1000)
}

// WithdrawAmount requests a withdrawal of amountMsat, recording it.
func WithdrawAmount(ctx context.Context, e *Env, p *Process, acct *Account, amountMsat int64) history.Type {
	body := client.WithdrawRequest{AmountMsat: strconv.FormatInt(amountMsat, 10), ToAddress: acct.WithdrawTo}
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FWithdraw, Account: acct.ID,
		IdemKey: idemKey(p.Rand, "wd"), Msat: history.Int64(amountMsat)})
	octx, cancel := opCtx(ctx)
	defer cancel()
	done := history.Op{}
	sendWithdrawal(octx, e, p.Node, acct, inv.IdemKey, body, &done)
	e.Rec.Complete(inv, done)
	if done.Type == history.Info {
		e.AddPending(Pending{Op: inv, Account: acct, Body: body})
	}
	return done.Type
}

// sendWithdrawal posts body under key to node and fills done.
func sendWithdrawal(ctx context.Context, e *Env, node string, acct *Account, key string, body client.WithdrawRequest, done *history.Op) {
	res, a := e.Client.Withdraw(ctx, node, acct.APIKey, key, body)
	res.Fill(done)
	if a != nil {
		done.RailRef = a.RailRef
	}
}
