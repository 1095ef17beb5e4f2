package workload

import (
	"context"
	"fmt"
	"strings"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
)

// Faucet asks for a grant and records the credited amount.
func Faucet(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FFaucet, Account: acct.ID,
		IdemKey: idemKey(p.Rand, "faucet")})
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, credited := e.Client.Faucet(octx, p.Node, acct.APIKey, inv.IdemKey)
	done := history.Op{}
	res.Fill(&done)
	if res.Type == history.OK {
		done.Msat = history.Int64(credited)
	}
	e.Rec.Complete(inv, done)
	if res.Type == history.Info {
		e.AddPending(Pending{Op: inv, Account: acct, Body: struct{}{}})
	}
	return res.Type
}

// ReadBalance reads the account's free balance.
func ReadBalance(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	t, _ := ReadBalanceValue(ctx, e, p, acct)
	return t
}

// ReadBalanceValue is ReadBalance that also returns the balance read (nil
// unless ok).
func ReadBalanceValue(ctx context.Context, e *Env, p *Process, acct *Account) (history.Type, *int64) {
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FRead, Account: acct.ID})
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, free := e.Client.Account(octx, p.Node, acct.APIKey, e.Linearizable, e.MinIndex)
	done := history.Op{}
	res.Fill(&done)
	if res.Type == history.OK {
		done.Msat = history.Int64(free)
	}
	e.Rec.Complete(inv, done)
	return res.Type, done.Msat
}

// ListDeposits reads the newest page of deposits (a read the checkers do
// not model; it exercises the listing under faults).
func ListDeposits(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FListDeposits, Account: acct.ID})
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, page := e.Client.Deposits(octx, p.Node, acct.APIKey, "", 20, 0)
	done := history.Op{}
	res.Fill(&done)
	if page != nil {
		done.Detail = fmt.Sprintf("%d deposits", len(page.Deposits))
	}
	e.Rec.Complete(inv, done)
	return res.Type
}

// MintKey mints a read-only delegate key labelled with its idempotency
// key, so the final listing can match every mint exactly.
func MintKey(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if acct.mints.Add(1) > MaxMintsPerAccount {
		return ReadBalance(ctx, e, p, acct)
	}
	key := idemKey(p.Rand, "mint")
	body := client.MintRequest{Label: key, Scopes: []string{"read"}}
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FMint, Account: acct.ID, IdemKey: key})
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, minted := e.Client.MintSession(octx, p.Node, acct.APIKey, key, body)
	done := history.Op{}
	res.Fill(&done)
	if minted != nil {
		done.KeyID = minted.KeyID
	}
	e.Rec.Complete(inv, done)
	if res.Type == history.Info {
		e.AddPending(Pending{Op: inv, Account: acct, Body: body})
	}
	return res.Type
}

// Retry resends a pending write with its idempotency key to node and
// records the attempt as resolving the original. It returns the attempt's
// completion; whether it settles the original is the checker's rule
// (checker.Settles).
func Retry(ctx context.Context, e *Env, pid int, node string, pend Pending) history.Op {
	return retry(ctx, e, pid, node, pend, false)
}

// retry is Retry; inRun marks an attempt sent while the clients run
// (history.Op.InRun), which only an acknowledgement lets settle the
// original.
func retry(ctx context.Context, e *Env, pid int, node string, pend Pending, inRun bool) history.Op {
	inv := e.Rec.Invoke(history.Op{Process: pid, Node: node, F: pend.Op.F, Account: pend.Op.Account,
		IdemKey: pend.Op.IdemKey, Order: pend.Op.Order, TimeoutMs: pend.Op.TimeoutMs, Msat: pend.Op.Msat, Path: pend.Op.Path,
		Resolves: pend.Op.ID, InRun: inRun})
	octx, cancel := opCtx(ctx)
	defer cancel()
	done := history.Op{}
	switch pend.Op.F {
	case history.FFaucet:
		res, credited := e.Client.Faucet(octx, node, pend.Account.APIKey, pend.Op.IdemKey)
		res.Fill(&done)
		if res.Type == history.OK {
			done.Msat = history.Int64(credited)
		}
	case history.FMint:
		res, minted := e.Client.MintSession(octx, node, pend.Account.APIKey, pend.Op.IdemKey, pend.Body.(client.MintRequest))
		res.Fill(&done)
		if minted != nil {
			done.KeyID = minted.KeyID
		}
	case history.FOrder, history.FCancel:
		retryTrade(octx, e, node, pend, &done)
	case history.FCancelAfter:
		retryCancelAfter(octx, e, node, pend, &done)
	case history.FWithdraw:
		sendWithdrawal(octx, e, node, pend.Account, pend.Op.IdemKey, pend.Body.(client.WithdrawRequest), &done)
	default:
		done.Type, done.Error = history.Info, "no retry for "+pend.Op.F
	}
	return e.Rec.Complete(inv, done)
}

// Signup creates one account, recording the attempt. An attempt whose
// outcome is unknown cannot be recovered (the key is returned only once),
// so the caller simply tries again with a new key.
func Signup(ctx context.Context, e *Env, pid int, node, key string) (*Account, history.Type, string) {
	inv := e.Rec.Invoke(history.Op{Process: pid, Node: node, F: history.FSignup, IdemKey: key})
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, a := e.signupClient().Signup(octx, node, key)
	done := history.Op{}
	res.Fill(&done)
	if a != nil {
		done.Account = a.AccountID
	}
	e.Rec.Complete(inv, done)
	if a == nil {
		return nil, res.Type, strings.TrimSpace(fmt.Sprintf("%d %s %s", res.Status, res.Code, res.Error))
	}
	return &Account{ID: a.AccountID, APIKey: a.APIKey, RailAddress: a.RailAddress}, res.Type, ""
}
