package fsm

import (
	"net/http"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/wire"
)

func init() {
	register(CmdDepositSettled, applyDepositSettled)
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

func applyDepositSettled(c *Ctx) (int, any, *wire.Refusal) {
	var p funds.Settlement
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
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
