package trade

import (
	"fmt"
	"slices"

	"github.com/tidwall/btree"

	"github.com/perpd/perpd/fsm/wire"
)

// The dead-man switch (SPEC: POST /v1/cancel-all-after). An account holds
// at most one deadline (Account.CancelAfterTsMs); when log time reaches it
// the engine cancels the account's resting orders and disarms. The switch
// belongs to the account, not to the key that armed it: any trade key of
// the account refreshes or disarms it, and revoking the arming key leaves
// it armed (a client whose key was revoked has gone dark, which is what
// the switch is for).
const (
	// CancelAfterMinMs is the shortest non-zero timeout. Log time moves by
	// the leader's one-second ticks, so a shorter deadline cannot be kept
	// more precisely; and a timeout given in seconds by mistake ("60")
	// would otherwise cancel every order at the next tick.
	CancelAfterMinMs = 1_000
	// CancelAfterMaxMs is the longest timeout (24 h): a switch is meant to
	// be refreshed by a live client.
	CancelAfterMaxMs = 86_400_000
	// ReasonCancelAllAfter is the reason of an order the switch canceled.
	ReasonCancelAllAfter = "cancel_all_after"
)

// CancelAfterView is SPEC's answer to POST /v1/cancel-all-after.
type CancelAfterView struct {
	Armed        bool      `json:"armed"`
	DeadlineTsMs *wire.Int `json:"deadlineTsMs" unit:"ms" doc:"null when disarmed"`
}

// deadline is one armed switch in the ordered set of deadlines.
type deadline struct {
	tsMs    int64
	account string
}

func deadlineLess(a, b deadline) bool {
	if a.tsMs != b.tsMs {
		return a.tsMs < b.tsMs
	}
	return a.account < b.account
}

// deadlineSet returns the ordered set of armed deadlines. Accounts'
// CancelAfterTsMs is the canonical content a snapshot carries; the B-tree
// is derived from it on first use after a decode and never serialised.
func (s *State) deadlineSet() *btree.BTreeG[deadline] {
	if s.deadlines == nil {
		s.deadlines = btree.NewBTreeGOptions(deadlineLess, btree.Options{NoLocks: true})
		for id, a := range s.Accounts {
			if a.CancelAfterTsMs != 0 {
				s.deadlines.Set(deadline{tsMs: a.CancelAfterTsMs, account: id})
			}
		}
	}
	return s.deadlines
}

// CancelAfter answers the account's switch as it stands.
func (s *State) CancelAfter(accountID string) CancelAfterView {
	if a, ok := s.Accounts[accountID]; ok && a.CancelAfterTsMs != 0 {
		return CancelAfterView{Armed: true, DeadlineTsMs: wire.Ptr(a.CancelAfterTsMs)}
	}
	return CancelAfterView{}
}

// SetCancelAfter arms the switch at nowMs+timeoutMs (a refresh moves the
// deadline, earlier or later), or disarms it when timeoutMs is zero. The
// caller has checked timeoutMs against the bounds.
func (s *State) SetCancelAfter(accountID string, nowMs, timeoutMs int64) CancelAfterView {
	set := s.deadlineSet()
	if a, ok := s.Accounts[accountID]; ok && a.CancelAfterTsMs != 0 {
		set.Delete(deadline{tsMs: a.CancelAfterTsMs, account: accountID})
		a.CancelAfterTsMs = 0
	}
	if timeoutMs == 0 {
		return CancelAfterView{}
	}
	a := s.account(accountID)
	a.CancelAfterTsMs = nowMs + timeoutMs
	set.Set(deadline{tsMs: a.CancelAfterTsMs, account: accountID})
	return s.CancelAfter(accountID)
}

// CancelAfterFireBudget bounds the orders the switches cancel in one
// entry from LevelCancelAfterBudget: a switch is fired whole, and the
// first due one always fires, so an entry cancels at most this many plus
// RestingOrdersPerAccountMax. Every switch's deadline is the client's to
// choose (the arm answers it in log time), so thousands of accounts, each
// with its 200 orders, could be made due at once: 880,000 cancels held
// apply on every replica for 5.8 s (resource review, 2026-11-29). At about
// 6 us a cancel the budget is about 0.1 s of apply.
const CancelAfterFireBudget = 20_000

// LevelCancelAfterBudget is the feature level (fsm.FeatureLevel) from
// which FireCancelAfter stops at CancelAfterFireBudget and leaves the due
// switches after it to the next entries that advance log time.
const LevelCancelAfterBudget uint32 = 12

// FireCancelAfter runs when log time advances: every switch whose
// deadline has come disarms and cancels its account's resting orders, in
// (deadline, account) order. Only due deadlines are touched. From
// LevelCancelAfterBudget one run stops before the switch that would take
// it past CancelAfterFireBudget cancels (never at the first); the switches
// left stay due, in order, and fire at the next entries that advance log
// time (a tick a second when nothing else comes).
func (s *State) FireCancelAfter(env *Env) {
	set := s.deadlineSet()
	spent := 0
	for {
		d, ok := set.Min()
		if !ok || d.tsMs > env.NowMs {
			return
		}
		if env.Level >= LevelCancelAfterBudget {
			n := len(s.Accounts[d.account].Live)
			if spent > 0 && spent+n > CancelAfterFireBudget {
				return
			}
			spent += n
		}
		set.Delete(d)
		s.Accounts[d.account].CancelAfterTsMs = 0
		s.cancelResting(env, d.account, ReasonCancelAllAfter)
	}
}

// FireOverdue fires the account's switch if its deadline has passed but a
// budgeted run (LevelCancelAfterBudget) left it for a later entry. The
// refresh of such a switch calls it first: a refresh that arrives after
// the deadline must find the switch fired, as it would have without the
// budget, not rescue the orders.
func (s *State) FireOverdue(env *Env, accountID string) {
	a, ok := s.Accounts[accountID]
	if !ok || a.CancelAfterTsMs == 0 || a.CancelAfterTsMs > env.NowMs {
		return
	}
	s.deadlineSet().Delete(deadline{tsMs: a.CancelAfterTsMs, account: accountID})
	a.CancelAfterTsMs = 0
	s.cancelResting(env, accountID, ReasonCancelAllAfter)
}

// cancelResting cancels every live order and trigger of the account
// through the same path as a client's cancel (reservation released through
// the ledger, a fresh seq and an event each), in placement order. A
// bracket entry's cancel takes its waiting legs along; they are skipped
// when their turn comes.
func (s *State) cancelResting(env *Env, accountID, reason string) {
	a, ok := s.Accounts[accountID]
	if !ok || a.Resting == 0 {
		return
	}
	// In placement order (Live is sorted); a copy, as cancels edit it.
	for _, no := range slices.Clone(a.Live) {
		if o := s.Orders[no]; o.Status == StatusAccepted {
			s.finish(env, o, StatusCanceled, reason)
		}
	}
}

// checkDeadlines verifies that the ordered set holds exactly the armed
// accounts' deadlines (for CheckInvariants).
func (s *State) checkDeadlines() error {
	set := s.deadlineSet()
	armed := 0
	for id, a := range s.Accounts {
		if a.CancelAfterTsMs == 0 {
			continue
		}
		armed++
		if _, ok := set.Get(deadline{tsMs: a.CancelAfterTsMs, account: id}); !ok {
			return fmt.Errorf("account %s: cancel-all-after deadline %d is not in the ordered set", id, a.CancelAfterTsMs)
		}
	}
	if set.Len() != armed {
		return fmt.Errorf("cancel-all-after: %d deadlines ordered, %d accounts armed", set.Len(), armed)
	}
	return nil
}
