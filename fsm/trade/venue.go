package trade

import (
	"fmt"

	"github.com/perpd/perpd/fsm/ledger"
)

// MoveMargin moves msat between an open position's margin and its owner's
// free balance: delta > 0 adds margin from free, delta < 0 takes margin
// back to free. Only the venue's own USDx hedge uses it (fsm/usdx: its
// funding waterfall keeps the hedge's margin where the mints put it); the
// caller has checked both balances, so a failure is a bug and halts the
// replica. The position's liquidation level follows its margin.
func (s *State) MoveMargin(env *Env, accountID, marketID string, delta int64) {
	if delta == 0 {
		return
	}
	a, ok := s.Accounts[accountID]
	if !ok || a.Positions[marketID] == nil {
		panic(fmt.Sprintf("trade: move margin: %s has no position in %s", accountID, marketID))
	}
	pos := a.Positions[marketID]
	free, margin := ledger.Free(accountID), ledger.Margin(accountID, marketID)
	if delta > 0 {
		transfer(env.Ledger, free, margin, delta)
	} else {
		if pos.MarginMsat+delta <= 0 {
			panic(fmt.Sprintf("trade: move margin: %s %s holds %d, cannot give %d", accountID, marketID, pos.MarginMsat, -delta))
		}
		transfer(env.Ledger, margin, free, -delta)
	}
	pos.MarginMsat += delta
	s.indexPosition(env, accountID, marketID)
}

// venueAccounts are trading accounts of the venue itself. Auto-deleveraging
// never picks them: closing the USDx hedge outside a redemption would break
// its backing identity (supply == hedge contracts); what the other
// profitable positions cannot cover stays with the house book, as it does
// when none exist.
var venueAccounts = map[string]bool{}

// RegisterVenueAccount marks a venue trading account; call it from an init
// function only (the set is the same on every replica).
func RegisterVenueAccount(id string) { venueAccounts[id] = true }
