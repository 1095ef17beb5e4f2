package funds

import (
	"container/heap"
	"math"
	"sort"
)

// Retention: what funds state keeps, and for how long. Every collection
// here is bounded; docs/decisions-domain.md states the rules for clients.
const (
	// MaxDepositsPerAccount is how many deposit records an account's
	// history keeps; the oldest is dropped first. Deposits never change
	// after they are credited, so nothing else depends on an old record.
	MaxDepositsPerAccount = 500
	// MaxClosedWithdrawalsPerAccount is how many paid or returned
	// withdrawals an account's history keeps. Open ones are never dropped
	// and do not count.
	MaxClosedWithdrawalsPerAccount = 500
	// WithdrawalRetainMs is how long a closed withdrawal is kept however
	// many follow it: two days, twice the idempotency store's day, so the
	// record's client key (WithdrawalByIdem) still answers a late retry
	// after the store forgot it, and the retry never pays twice.
	WithdrawalRetainMs int64 = 2 * 24 * 60 * 60 * 1000
	// InvoiceSettleGraceMs is how long an expired invoice is kept: a
	// settlement the rail saw before the expiry may be applied this much
	// later (a leader change, a rail outage) and still credits.
	InvoiceSettleGraceMs int64 = 60 * 60 * 1000
	// RailRefRetentionMs is how long the rail reference of a dropped
	// deposit record still refuses a repeated settlement. Rails must not
	// report a settlement again later than this.
	RailRefRetentionMs int64 = 30 * 24 * 60 * 60 * 1000
)

// InvoiceExpiry is an element of State.InvoiceExpiries.
type InvoiceExpiry struct {
	DropAtMs   int64  `cbor:"1,keyasint"`
	PaymentRef string `cbor:"2,keyasint"`
}

// ForgottenRef is an element of State.ForgottenRefs.
type ForgottenRef struct {
	RailRef  string `cbor:"1,keyasint"`
	DropAtMs int64  `cbor:"2,keyasint"`
}

// Prune applies the time-based retention rules at nowMs: spent confirm
// tokens, expired invoices, old deposit rail references. Each walks an
// ordered structure from its oldest end, so a tick costs O(what expires).
func (s *State) Prune(nowMs int64) {
	s.PruneTokens(nowMs)
	for len(s.InvoiceExpiries) > 0 && s.InvoiceExpiries[0].DropAtMs <= nowMs {
		e := heap.Pop((*expiryHeap)(&s.InvoiceExpiries)).(InvoiceExpiry)
		if inv := s.Invoices[e.PaymentRef]; inv != nil && invoiceDropAt(inv) == e.DropAtMs {
			s.CloseInvoice(e.PaymentRef)
		}
	}
	if len(s.InvoiceExpiries) == 0 {
		s.InvoiceExpiries = nil
	}
	n := 0
	for n < len(s.ForgottenRefs) && s.ForgottenRefs[n].DropAtMs <= nowMs {
		delete(s.ByRailRef, s.ForgottenRefs[n].RailRef)
		n++
	}
	if n > 0 {
		// Re-slice: a tick that forgets one reference must not copy the
		// month kept behind it. The dead prefix goes when the next append
		// moves the list. The content (what the state hash and snapshot
		// see) is the same as a copy's; empty is nil, as before.
		clear(s.ForgottenRefs[:n])
		s.ForgottenRefs = s.ForgottenRefs[n:]
		if len(s.ForgottenRefs) == 0 {
			s.ForgottenRefs = nil
		}
	}
}

// trimDeposits drops account's oldest deposit records past
// MaxDepositsPerAccount. A Lightning record's reference can go with it (its
// invoice is closed, so a repeat finds no invoice) and so can a faucet
// grant's (never reused); any other rail's stays in ByRailRef for
// RailRefRetentionMs.
func (s *State) trimDeposits(account string, nowMs int64) {
	seqs := s.ByAccount[account]
	n := len(seqs) - MaxDepositsPerAccount
	if n <= 0 {
		return
	}
	for _, q := range seqs[:n] {
		d := s.Deposits[q]
		delete(s.Deposits, q)
		if d == nil {
			continue
		}
		if d.Path == PathLightning || d.Path == PathFaucet {
			delete(s.ByRailRef, d.RailRef)
		} else {
			s.ForgottenRefs = append(s.ForgottenRefs, ForgottenRef{RailRef: d.RailRef, DropAtMs: nowMs + RailRefRetentionMs})
		}
	}
	s.ByAccount[account] = append([]uint64(nil), seqs[n:]...)
}

// TrimReturnedWithdrawals drops account's oldest closed withdrawals past
// MaxClosedWithdrawalsPerAccount as trimWithdrawals does, and a returned
// one however recently it closed (LevelReturnedNotHeld): it paid nothing,
// so a retry under its client key that finds it gone pays at most once.
func (s *State) TrimReturnedWithdrawals(account string, nowMs int64) {
	s.trimClosed(account, nowMs, true, math.MaxInt)
}

// LevelClosedWithdrawalsCapped is the feature level (fsm.FeatureLevel)
// from which the closed withdrawals an account holds are capped at
// MaxClosedWithdrawalsHeld, held ones included (CapHeldWithdrawals). The
// two-day hold alone let one account keep a record per request of its
// withdraw budget (20 a minute: about 57,600 in two days), and every
// withdrawal request of the account walks that history: 24 ms of apply on
// every replica per request at 50,000 held, against 0.3 ms at 1,000
// (BenchmarkWithdrawWithHeldHistory), and the records grew the state
// without a count bound. Found by a review on 2026-11-28.
const LevelClosedWithdrawalsCapped uint32 = 8

// MaxClosedWithdrawalsHeld bounds an account's closed withdrawals from
// LevelClosedWithdrawalsCapped: past it the oldest go before their hold
// ends. 2,000 is one withdrawal every 86 seconds for the whole two days;
// a client that withdraws faster loses the late-retry answer (the hold's
// purpose) only for its oldest ones, which its idempotency store answers
// for their first day anyway.
const MaxClosedWithdrawalsHeld = 4 * MaxClosedWithdrawalsPerAccount

// CapHeldWithdrawals drops account's oldest closed withdrawals past
// MaxClosedWithdrawalsHeld however recently they closed, and any past
// MaxClosedWithdrawalsPerAccount whose hold ended
// (LevelClosedWithdrawalsCapped; the caller checks the level).
func (s *State) CapHeldWithdrawals(account string, nowMs int64) {
	s.trimClosed(account, nowMs, false, MaxClosedWithdrawalsHeld)
}

// trimWithdrawals drops account's oldest closed withdrawals past
// MaxClosedWithdrawalsPerAccount, once they closed WithdrawalRetainMs ago.
func (s *State) trimWithdrawals(account string, nowMs int64) {
	s.trimClosed(account, nowMs, false, math.MaxInt)
}

// trimClosed drops account's oldest closed withdrawals past
// MaxClosedWithdrawalsPerAccount that closed WithdrawalRetainMs ago, or
// were returned when returnedNow, or, while more than heldMax are closed,
// however recently. The index is in order of latest change and a closed
// record never changes again, so the oldest closed ones are at its front.
// The index is rewritten only when something goes: a request whose
// history is all held copies nothing.
func (s *State) trimClosed(account string, nowMs int64, returnedNow bool, heldMax int) {
	seqs := s.WithdrawalsByAccount[account]
	closed := 0
	for _, q := range seqs {
		if w := s.WithdrawalAt(q); w != nil && w.Final() {
			closed++
		}
	}
	excess := closed - MaxClosedWithdrawalsPerAccount
	if excess <= 0 {
		return
	}
	over := closed - heldMax
	var kept []uint64
	dropping := false
	for i, q := range seqs {
		w := s.WithdrawalAt(q)
		if excess > 0 && w != nil && w.Final() &&
			(over > 0 || w.ClosedTsMs+WithdrawalRetainMs <= nowMs || returnedNow && w.State == StateReturned) {
			if !dropping {
				kept, dropping = append(make([]uint64, 0, len(seqs)-1), seqs[:i]...), true
			}
			s.dropWithdrawal(w)
			excess--
			over--
			continue
		}
		if dropping {
			kept = append(kept, q)
		}
	}
	if dropping {
		s.WithdrawalsByAccount[account] = kept
	}
}

func (s *State) dropWithdrawal(w *Withdrawal) {
	delete(s.Withdrawals, w.Seq)
	delete(s.WithdrawalByChange, w.ChangeSeq())
	delete(s.WithdrawalByRailRef, w.RailRef)
	if w.IdempotencyKey != "" {
		delete(s.WithdrawalByIdem, idemIndexKey(w.AccountID, w.IdempotencyKey))
	}
}

func (s *State) scheduleInvoiceDrop(inv *Invoice) {
	heap.Push((*expiryHeap)(&s.InvoiceExpiries), InvoiceExpiry{DropAtMs: invoiceDropAt(inv), PaymentRef: inv.PaymentRef})
}

// invoiceDropAt is when inv is forgotten; SPEC allows expiries near the
// int64 limit, so the grace saturates instead of overflowing.
func invoiceDropAt(inv *Invoice) int64 {
	if inv.ExpiresAtMs > math.MaxInt64-InvoiceSettleGraceMs {
		return math.MaxInt64
	}
	return inv.ExpiresAtMs + InvoiceSettleGraceMs
}

// rebuildInvoiceExpiries fills the heap from Invoices (older snapshots),
// in payment-ref order so every replica builds the same heap.
func (s *State) rebuildInvoiceExpiries() {
	refs := make([]string, 0, len(s.Invoices))
	for ref := range s.Invoices {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		s.scheduleInvoiceDrop(s.Invoices[ref])
	}
}

// expiryHeap orders by drop time, then payment ref: a total order, so
// the heap's layout is the same on every replica.
type expiryHeap []InvoiceExpiry

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	if h[i].DropAtMs != h[j].DropAtMs {
		return h[i].DropAtMs < h[j].DropAtMs
	}
	return h[i].PaymentRef < h[j].PaymentRef
}
func (h expiryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)   { *h = append(*h, x.(InvoiceExpiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
