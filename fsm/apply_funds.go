package fsm

import (
	"net/http"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/wire"
)

// Money rails: command types 41-59 (CmdDepositSettled, 40, is in command.go).
const (
	CmdInvoiceCreated      CmdType = 41 // a node issued a deposit invoice for an account
	CmdWithdrawalRequested CmdType = 42 // a trader asked for a withdrawal
	CmdWithdrawalResult    CmdType = 43 // the rail answered a payout
)

func init() {
	register(CmdDepositSettled, applyDepositSettled)
	register(CmdInvoiceCreated, applyInvoiceCreated)
	register(CmdWithdrawalRequested, applyWithdrawalRequested)
	register(CmdWithdrawalResult, applyWithdrawalResult)
	registerTimer(func(c *Ctx) { c.St.Funds.Prune(c.Now()) })
}

// DepositView is a deposit record on the wire (SPEC section 2).
type DepositView struct {
	AccountID  string   `json:"accountId"`
	AmountMsat wire.Int `json:"amountMsat" unit:"msat"`
	FeeMsat    wire.Int `json:"feeMsat" unit:"msat"`
	RailRef    string   `json:"railRef"`
	Seq        wire.Int `json:"seq" unit:"seq"`
	TsMs       wire.Int `json:"tsMs" unit:"ms"`
}

// NewDepositView renders a deposit record.
func NewDepositView(d *funds.Deposit) DepositView {
	return DepositView{AccountID: d.AccountID, AmountMsat: wire.Int(d.AmountMsat), FeeMsat: wire.Int(d.FeeMsat),
		RailRef: d.RailRef, Seq: wire.Int(d.Seq), TsMs: wire.Int(d.TsMs)}
}

// applyDepositSettled credits what the rail saw arrive. A Lightning
// settlement must match an open invoice (its rail reference is the payment
// ref): the invoice names the account, fixes the amount, and must not have
// expired in log time; once paid it is closed, and the deposit record
// refuses a second payment.
func applyDepositSettled(c *Ctx) (int, any, *wire.Refusal) {
	var p funds.Settlement
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if p.Path == funds.PathLightning {
		checked, ref := c.St.Funds.CheckInvoicePayment(p, c.Now())
		if ref != nil {
			return 0, nil, ref
		}
		p = checked
	}
	if c.St.Access.Accounts[p.AccountID] == nil {
		return 0, nil, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "no such account")
	}
	if _, dup := c.St.Funds.ByRailRef[p.RailRef]; dup {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "deposit %q was already credited", p.RailRef)
	}
	d, ref := settleDeposit(c, p, 0)
	if ref != nil {
		return 0, nil, ref
	}
	if p.Path == funds.PathLightning {
		c.St.Funds.CloseInvoice(p.RailRef)
	}
	return http.StatusOK, NewDepositView(d), nil
}

// settleDeposit is the one path by which deposits are credited: rail
// settlements and faucet grants alike. seq 0 allocates one.
func settleDeposit(c *Ctx, p funds.Settlement, seq uint64) (*funds.Deposit, *wire.Refusal) {
	if seq == 0 {
		seq = c.St.Seq + 1
	}
	d, ref := c.St.Funds.Settle(c.St.Ledger, p, seq, c.Now())
	if ref != nil {
		return nil, ref
	}
	if seq > c.St.Seq {
		c.St.Seq = seq
	}
	c.Emit(Event{Seq: d.Seq, Kind: "deposit", Account: d.AccountID, Data: NewDepositView(d)})
	return d, nil
}

// applyInvoiceCreated records a deposit invoice the proposing node issued
// for the calling account (scope trade).
func applyInvoiceCreated(c *Ctx) (int, any, *wire.Refusal) {
	var p funds.NewInvoice
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	inv, ref := c.St.Funds.AddInvoice(c.Cmd.Account, p, c.Now())
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusCreated, funds.InvoiceCreated{Invoice: p.PaymentRequest, PaymentRef: inv.PaymentRef,
		ExpiresAtMs: wire.Int(inv.ExpiresAtMs)}, nil
}

// applyWithdrawalRequested reserves a withdrawal (scope withdraw). It never
// looks at halts or trading state: withdrawals work in every halt mode.
func applyWithdrawalRequested(c *Ctx) (int, any, *wire.Refusal) {
	var p funds.WithdrawalRequest
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeWithdraw); ref != nil {
		return 0, nil, ref
	}
	acct := c.Cmd.Account
	// The idempotency store answers retries for a day; past that, the
	// withdrawal the key created still answers, so a late retry never pays
	// twice.
	prior, ref := c.St.Funds.PriorWithdrawal(acct, p)
	if ref != nil {
		return 0, nil, ref
	}
	if prior != nil {
		return http.StatusCreated, funds.WithdrawalCreated{RailRef: prior.RailRef, Queued: prior.CreatedQueued}, nil
	}
	if c.St.FeatureLevel < funds.LevelInvoiceHashPaidOnce {
		p.PaymentHash = "" // ignored, as a build before the level ignores it
	} else if ref := funds.CheckPaymentHash(p); ref != nil {
		return 0, nil, ref
	}
	if c.St.FeatureLevel >= funds.LevelInvoicePaidOnce && p.Path == funds.PathLightning {
		if other, ok := c.St.Funds.LiveWithdrawalTo(acct, p.Destination, p.PaymentHash); ok {
			if other.Destination != p.Destination { // the same payment hash, another invoice string
				return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
					"this Lightning invoice's payment hash already has a withdrawal (railRef %s, %s), under another invoice: a payment is made once",
					other.RailRef, other.State)
			}
			return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
				"this Lightning invoice already has a withdrawal (railRef %s, %s): an invoice is paid once", other.RailRef, other.State)
		}
	}
	if c.St.FeatureLevel >= funds.LevelOpenWithdrawalsBounded && c.St.Funds.OpenWithdrawals(acct) >= funds.MaxOpenWithdrawalsPerAccount {
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"this account has %d open withdrawals, the most it may have: wait until one is paid or returned", funds.MaxOpenWithdrawalsPerAccount)
	}
	w, ref := c.St.Funds.RequestWithdrawal(c.St.Ledger, acct, p, c.St.Seq+1, c.Now())
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Seq = w.Seq
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	c.emitWithdrawal(w)
	return http.StatusCreated, funds.WithdrawalCreated{RailRef: w.RailRef, Queued: w.CreatedQueued}, nil
}

// applyWithdrawalResult applies the rail's answer to a payout. The leader
// proposes it; a repeat for a withdrawal already paid or returned is
// refused and changes nothing.
func applyWithdrawalResult(c *Ctx) (int, any, *wire.Refusal) {
	var p funds.PayoutResult
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	seq := c.St.Seq + 1
	w, ref := c.St.Funds.ApplyPayout(c.St.Ledger, p, seq, c.Now())
	if ref != nil {
		return 0, nil, ref
	}
	if w.ChangeSeq() == seq { // a change, not a repeat of what is known
		c.St.Seq = seq
		// Only a result closes a withdrawal, so only here can the closed
		// ones exceed their bound.
		if w.Final() && c.St.FeatureLevel >= funds.LevelReturnedNotHeld {
			c.St.Funds.TrimReturnedWithdrawals(w.AccountID, c.Now())
		}
		if w.Final() && c.St.FeatureLevel >= funds.LevelClosedWithdrawalsCapped {
			c.St.Funds.CapHeldWithdrawals(w.AccountID, c.Now())
		}
		c.emitWithdrawal(w)
	}
	return http.StatusOK, funds.NewWithdrawalView(w), nil
}

// emitWithdrawal announces w's latest change under the seq it took.
func (c *Ctx) emitWithdrawal(w *funds.Withdrawal) {
	c.Emit(Event{Seq: w.ChangeSeq(), Kind: "withdrawal", Account: w.AccountID, Data: funds.NewWithdrawalView(w)})
}
