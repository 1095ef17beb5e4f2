package fsm

import (
	"net/http"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// CmdCancelAllAfter arms, refreshes or disarms an account's dead-man
// switch (trading block 80-99).
const CmdCancelAllAfter CmdType = 82

func init() {
	register(CmdCancelAllAfter, applyCancelAllAfter)
	// Decided in log time: every replica fires a deadline at the first
	// entry whose time reaches it, whoever leads.
	registerTimer(func(c *Ctx) { c.St.Trade.FireCancelAfter(c.tradeEnv()) })
}

// CancelAllAfterPayload is the body of POST /v1/cancel-all-after.
type CancelAllAfterPayload struct {
	TimeoutMs int64 `cbor:"1,keyasint"`
}

// applyCancelAllAfter (scope trade): a non-zero timeout arms the switch,
// or refreshes it, at log time + timeoutMs; zero disarms. The bounds are
// checked here too, not only by the HTTP decoder, since the log is the
// authority.
func applyCancelAllAfter(c *Ctx) (int, any, *wire.Refusal) {
	var p CancelAllAfterPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	if p.TimeoutMs != 0 && (p.TimeoutMs < trade.CancelAfterMinMs || p.TimeoutMs > trade.CancelAfterMaxMs) {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation,
			"timeoutMs %d: 0 disarms, otherwise it must be within [%d, %d]", p.TimeoutMs, trade.CancelAfterMinMs, trade.CancelAfterMaxMs)
	}
	if c.St.FeatureLevel >= trade.LevelCancelAfterBudget {
		// Left due by a budgeted timer run: it fires before the refresh.
		c.St.Trade.FireOverdue(c.tradeEnv(), c.Cmd.Account)
	}
	view := c.St.Trade.SetCancelAfter(c.Cmd.Account, c.Now(), p.TimeoutMs)
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusOK, view, nil
}
