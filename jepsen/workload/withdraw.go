package workload

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/node/rail"
)

// Withdrawals: funded withdrawer accounts (Env.Withdrawers, kept apart from
// the register accounts, since withdrawals move their balances) withdraw
// small amounts under a fresh idempotency key each: most to a Spark
// address, which the simulated rail pays, and a share (Env.Payee) to a
// fresh Lightning invoice the harness signs, which the simulated rail
// returns ("unknown payout invoice"), so the venue must give amount and
// fee back. The leader's rail driver pays or returns them after the
// request is applied. A request with an unknown outcome is retried after
// the final heal with the same key and body (the same invoice), like
// every write. Checked by checker.Withdrawals.

// Withdrawal amounts, in whole sats (Spark moves whole sats), well below
// the first-seen confirmation threshold (100,000 sats), so no confirm
// token is needed. A Lightning withdrawal asks for an amount in msat in
// the same range, not a whole number of sats, so the fee's rounding is
// exercised.
const (
	MinWithdrawSats = 1_000
	MaxWithdrawSats = 20_000
)

// InvoiceExpirySeconds is the expiry of the workload's invoices: a day.
// The venue refuses an expired invoice in log time, which runs up to an
// hour ahead of the wall clock (serve --clock-offset), and a request of
// unknown outcome is resent unchanged after the final heal.
const InvoiceExpirySeconds = 24 * 60 * 60

// Payee signs the Lightning invoices the withdrawers withdraw to: a node
// key of the harness's own (not the venue's, whose invoices are deposit
// invoices), on the network the venue serves.
type Payee struct {
	Network rail.Network
	// Percent is the share of withdrawals sent to a Lightning invoice.
	Percent int
	nodeKey []byte
}

// NewPayee draws a node key for invoices on the network of sparkAddress (a
// withdrawer's railAddress: the venue's own network).
func NewPayee(sparkAddress string, percent int) (*Payee, error) {
	a, err := rail.ParseSparkAddress(sparkAddress)
	if err != nil {
		return nil, fmt.Errorf("network of railAddress %q: %w", sparkAddress, err)
	}
	key, err := rail.NewNodeKey(nil)
	if err != nil {
		return nil, err
	}
	return &Payee{Network: a.Network, Percent: percent, nodeKey: key}, nil
}

// Invoice signs a fresh invoice for amountMsat: a new payment hash each
// time, since the venue refuses a second live withdrawal to one invoice.
func (y *Payee) Invoice(amountMsat int64, now time.Time) (string, error) {
	f := rail.InvoiceFields{Network: y.Network, AmountMsat: amountMsat, TimestampSec: now.Unix(),
		Description: "jepsen withdrawal", ExpirySeconds: InvoiceExpirySeconds, MinFinalCLTVExpiry: rail.DefaultMinFinalCLTVExpiry}
	if _, err := rand.Read(f.PaymentHash[:]); err != nil {
		return "", err
	}
	if _, err := rand.Read(f.PaymentSecret[:]); err != nil {
		return "", err
	}
	return rail.EncodeInvoice(f, y.nodeKey)
}

// Withdraw requests a withdrawal of a random small amount: to a Lightning
// invoice Payee.Percent of the time, else to the withdrawer's Spark
// destination.
func Withdraw(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if e.Payee != nil && p.Rand.Intn(100) < e.Payee.Percent {
		msat := MinWithdrawSats*1000 + p.Rand.Int63n((MaxWithdrawSats-MinWithdrawSats)*1000+1)
		return WithdrawLightning(ctx, e, p, acct, msat)
	}
	sats := MinWithdrawSats + p.Rand.Int63n(MaxWithdrawSats-MinWithdrawSats+1)
	return WithdrawAmount(ctx, e, p, acct, sats*1000)
}

// WithdrawAmount requests a Spark withdrawal of amountMsat, recording it.
func WithdrawAmount(ctx context.Context, e *Env, p *Process, acct *Account, amountMsat int64) history.Type {
	body := client.WithdrawRequest{AmountMsat: strconv.FormatInt(amountMsat, 10), ToAddress: acct.WithdrawTo}
	return withdraw(ctx, e, p, acct, body, history.Op{Msat: history.Int64(amountMsat), Path: "spark"})
}

// WithdrawLightning requests a withdrawal of amountMsat to a fresh invoice
// of e.Payee, quoting it first: the quoted fee is recorded with the
// invocation, for the checker to hold the withdrawal to.
func WithdrawLightning(ctx context.Context, e *Env, p *Process, acct *Account, amountMsat int64) history.Type {
	inv, err := e.Payee.Invoice(amountMsat, time.Now())
	if err != nil {
		panic(fmt.Sprintf("jepsen: sign a withdrawal invoice: %v", err)) // the harness's own key and fields
	}
	op := history.Op{Msat: history.Int64(amountMsat), Path: "lightning"}
	qctx, cancel := opCtx(ctx)
	_, q, fee := e.Client.QuoteWithdrawal(qctx, p.Node, acct.APIKey, client.QuoteRequest{Invoice: inv})
	cancel()
	if q != nil && q.Path == "lightning" {
		op.FeeMsat = history.Int64(fee)
	}
	body := client.WithdrawRequest{AmountMsat: strconv.FormatInt(amountMsat, 10), Invoice: inv}
	return withdraw(ctx, e, p, acct, body, op)
}

// withdraw sends body under a fresh key, recording it with what op
// carries (amount, path, quoted fee).
func withdraw(ctx context.Context, e *Env, p *Process, acct *Account, body client.WithdrawRequest, op history.Op) history.Type {
	op.Process, op.Node, op.F, op.Account, op.IdemKey = p.ID, p.Node, history.FWithdraw, acct.ID, idemKey(p.Rand, "wd")
	inv := e.Rec.Invoke(op)
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
