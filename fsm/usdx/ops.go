package usdx

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perpd/perpd/fsm/wire"
)

// ValidAddress checks a token (Spark) address's shape: 8..128 characters
// of [a-z0-9], as the simulated rail allocates them. A real rail checks
// more (decisions.md).
func ValidAddress(a string) bool {
	if len(a) < 8 || len(a) > AddressLenMax {
		return false
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Withdraw requests a withdrawal of q USDx of accountID to addr under id
// (the client's idempotency key). Not gated by halts. The USDx leaves the
// account at once and is in flight until the token rail reports the
// custody transfer (Paid).
func (s *State) Withdraw(e *Env, accountID, id string, q int64, addr string) (WithdrawalView, *wire.Refusal) {
	if w, ok := s.Withdrawals[id]; ok {
		if w.AccountID != accountID || w.Usdx != q || w.SparkAddress != addr {
			return WithdrawalView{}, wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused, "withdrawal id %q was used for another withdrawal", id)
		}
		return NewWithdrawalView(w), nil
	}
	if id == "" || len(id) > 255 {
		return WithdrawalView{}, bad(wire.CodeValidation, "withdrawal id must be 1..255 characters")
	}
	if !s.Params.Features.Withdraw {
		return WithdrawalView{}, wire.Refuse(http.StatusForbidden, wire.CodeFeatureUnavailable, "USDx withdrawals are switched off")
	}
	if !ValidAddress(addr) {
		return WithdrawalView{}, bad(wire.CodeValidation, "sparkAddress is not a token address")
	}
	if s.IsFrozen(addr) {
		return WithdrawalView{}, wire.Refuse(http.StatusForbidden, wire.CodeComplianceRefused, "address %s is frozen", addr)
	}
	if e.T.Level >= LevelPendingFreezeRefuses && s.freezeRequested(addr) {
		return WithdrawalView{}, wire.Refuse(http.StatusForbidden, wire.CodeComplianceRefused, "a freeze of address %s is waiting for the custody worker", addr)
	}
	if q < 1 {
		return WithdrawalView{}, conflict(wire.CodeUSDxDust, "dust", "the smallest withdrawal is 1 USDx")
	}
	h := s.Holder(accountID)
	if h.Usdx < q {
		return WithdrawalView{}, bad(wire.CodeInsufficientBalance, "holding %d USDx, cannot withdraw %d", h.Usdx, q)
	}
	inFlight := 0
	for _, wid := range h.Withdrawals {
		if w := s.Withdrawals[wid]; w != nil && w.State == WithdrawalRequested {
			inFlight++
		}
	}
	if inFlight >= RequestedPerAccount {
		return WithdrawalView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "at most %d USDx withdrawals in flight per account", RequestedPerAccount)
	}
	hh := s.holder(accountID)
	hh.Usdx -= q
	hh.Withdrawing += q
	w := &Withdrawal{ID: id, AccountID: accountID, Usdx: q, SparkAddress: addr, State: WithdrawalRequested, RequestedTsMs: e.now()}
	s.Withdrawals[id] = w
	s.InFlight = append(s.InFlight, id)
	hh.Withdrawals = append(hh.Withdrawals, id)
	if e.T.Level >= LevelUSDxWithdrawalsHeld {
		s.trimWithdrawalsHeld(hh, e.now())
	} else if len(hh.Withdrawals) > WithdrawalsKept {
		for i, old := range hh.Withdrawals {
			if ow := s.Withdrawals[old]; ow == nil || ow.State != WithdrawalRequested {
				delete(s.Withdrawals, old)
				hh.Withdrawals = append(hh.Withdrawals[:i:i], hh.Withdrawals[i+1:]...)
				break
			}
		}
	}
	s.activity(e, accountID, Activity{Event: "withdrawal", Ref: id, Usdx: q, State: w.State})
	w.Seq = hh.Activity[len(hh.Activity)-1].Seq
	if e.T.Level >= LevelFreshRailIDs {
		w.RailID = id + "." + strconv.FormatUint(w.Seq, 10)
	}
	return NewWithdrawalView(w), nil
}

// LevelPendingFreezeRefuses is the feature level (fsm.FeatureLevel) from
// which a USDx withdrawal is refused (403 compliance_refused) to an
// address whose newest freeze log entry is a freeze still waiting for the
// custody worker, as it is to a frozen address. Below it only an applied
// freeze counted: from the operator's freeze until the issuer applied it
// (a worker pass, or its retries while the issuer refuses), withdrawals to
// the address were accepted and the token rail paid them out to it
// (found by a review on 2026-11-28,
// TestWithdrawalRefusedWhileAFreezeWaits).
const LevelPendingFreezeRefuses uint32 = 8

// freezeRequested reports whether addr's newest freeze log entry is a
// freeze not yet applied.
func (s *State) freezeRequested(addr string) bool {
	for i := len(s.Freezes) - 1; i >= 0; i-- {
		if f := s.Freezes[i]; f.SparkAddress == addr {
			return f.Action == ActionFreeze && f.State == FreezeRequested
		}
	}
	return false
}

// LevelUSDxWithdrawalsHeld is the feature level (fsm.FeatureLevel) from
// which a paid USDx withdrawal is kept at least WithdrawalRetainMs after
// it was paid, however many follow it. Its id comes from the account and
// the client's idempotency key, and the record is what answers a retry
// once the idempotency store has forgotten the key (after its 24 hours,
// or earlier when a flood of other accounts' answers evicts it). Below
// the level the record went as soon as WithdrawalsKept newer ones came,
// and a late retry of the same request made and paid a second
// withdrawal; sats withdrawals were held two days for this reason
// already (funds.WithdrawalRetainMs). Found by a review on 2026-11-28.
const LevelUSDxWithdrawalsHeld uint32 = 8

// WithdrawalRetainMs is how long a paid USDx withdrawal is kept from
// LevelUSDxWithdrawalsHeld: two days, twice the idempotency store's
// retention, as funds.WithdrawalRetainMs for sats.
const WithdrawalRetainMs int64 = 2 * 24 * 60 * 60 * 1000

// WithdrawalsHeldMax bounds the withdrawals an account keeps from
// LevelUSDxWithdrawalsHeld, held ones included: past it the oldest paid
// ones go before their hold ends. A withdrawal can cost next to nothing
// (1 USDx out to the holder's own address, and deposited back), so the
// hold alone let an account keep one record per request of its order
// budget (180 a minute) for two days; 2,000 covers one withdrawal every
// 90 seconds for the two days.
const WithdrawalsHeldMax = 10 * WithdrawalsKept

// trimWithdrawalsHeld drops h's oldest withdrawals past WithdrawalsKept
// that were paid WithdrawalRetainMs ago or more, and past
// WithdrawalsHeldMax the oldest paid ones however recent; requested ones
// are kept. The list is in request order, so one pass finds them oldest
// first.
func (s *State) trimWithdrawalsHeld(h *Holder, nowMs int64) {
	h.Withdrawals = trimHeld(h.Withdrawals, WithdrawalsKept, WithdrawalsHeldMax, func(id string, over bool) bool {
		w := s.Withdrawals[id]
		if w == nil || w.State == WithdrawalPaid && (over || w.PaidTsMs+WithdrawalRetainMs <= nowMs) {
			delete(s.Withdrawals, id)
			return true
		}
		return false
	})
}

// LevelFreezesKeptPending is the feature level (fsm.FeatureLevel) from
// which the freeze log, full at FreezesKept entries, drops its oldest
// applied entry for a new one, never one still waiting for the custody
// worker; with every kept entry waiting, a new request is refused. Below
// it the oldest entry was dropped whatever its state, so a freeze (or an
// unfreeze) behind FreezesKept newer requests was never sent to the
// issuer. Found by a review on 2026-11-27.
const LevelFreezesKeptPending uint32 = 7

// LevelFreshRailIDs is the feature level (fsm.FeatureLevel) from which a
// withdrawal's transfer id on the token rail carries its seq (RailID).
// The id alone comes from the account and the client's idempotency key;
// once the withdrawal was trimmed (WithdrawalsKept) and the idempotency
// store had forgotten the key, the same key made a new withdrawal under
// the same id, the rail (idempotent by id) answered the first transfer's
// ref and moved nothing, and the holder's USDx was marked paid and lost
// (found by a review on 2026-11-27).
const LevelFreshRailIDs uint32 = 6

// Paid records the custody transfer of a requested withdrawal: the USDx
// is outside custody from now on. Unknown or already paid: not_found /
// conflict (the rail driver retries harmlessly).
func (s *State) Paid(e *Env, id, issuerRef string) *wire.Refusal {
	w, ok := s.Withdrawals[id]
	if !ok {
		return wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "USDx withdrawal %q not found", id)
	}
	if w.State != WithdrawalRequested {
		return wire.Refuse(http.StatusConflict, wire.CodeConflict, "USDx withdrawal %q is already %s", id, w.State)
	}
	h := s.holder(w.AccountID)
	h.Withdrawing -= w.Usdx
	s.Outside += w.Usdx
	w.State, w.IssuerRef, w.PaidTsMs = WithdrawalPaid, issuerRef, e.now()
	s.dropInFlight(id)
	if len(s.InFlight) == 0 {
		s.InFlight = nil
	}
	s.activity(e, w.AccountID, Activity{Event: "withdrawal", Ref: id, Usdx: w.Usdx, State: w.State})
	w.Seq = h.Activity[len(h.Activity)-1].Seq
	return nil
}

// RequestFreeze logs an operator's freeze or unfreeze of a token address
// (state requested; the custody worker applies it).
func (s *State) RequestFreeze(e *Env, opID, addr, action, reason string) (FreezeView, *wire.Refusal) {
	if action != ActionFreeze && action != ActionUnfreeze {
		return FreezeView{}, bad(wire.CodeValidation, "action must be freeze or unfreeze")
	}
	if !ValidAddress(addr) {
		return FreezeView{}, bad(wire.CodeValidation, "not a token address")
	}
	if action == ActionFreeze && len(s.Frozen) >= FrozenMax {
		return FreezeView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "at most %d frozen addresses", FrozenMax)
	}
	if e.T.Level >= LevelFreezesKeptPending && len(s.Freezes) >= FreezesKept {
		i := slices.IndexFunc(s.Freezes, func(f Freeze) bool { return f.State != FreezeRequested })
		if i < 0 {
			return FreezeView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict,
				"%d freeze log entries wait for the custody worker; retry when it has applied some", len(s.Freezes))
		}
		s.Freezes = slices.Delete(s.Freezes, i, i+1)
	}
	f := Freeze{Seq: e.T.NextSeq(), OpID: opID, SparkAddress: addr, Action: action, State: FreezeRequested, Reason: reason, TsMs: e.now()}
	s.Freezes = append(s.Freezes, f)
	if len(s.Freezes) > FreezesKept {
		s.Freezes = s.Freezes[len(s.Freezes)-FreezesKept:]
	}
	s.FreezeCount++
	return NewFreezeView(f), nil
}

// ApplyFreeze marks a requested freeze log entry applied by the custody
// worker; the address joins or leaves the frozen list. impacted < 0: not
// known.
func (s *State) ApplyFreeze(e *Env, seq uint64, issuerRef string, impacted int64) (FreezeView, *wire.Refusal) {
	for i := range s.Freezes {
		f := &s.Freezes[i]
		if f.Seq != seq {
			continue
		}
		if f.State != FreezeRequested {
			return FreezeView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "freeze %d is already applied", seq)
		}
		f.State, f.IssuerRef, f.AppliedTsMs = FreezeApplied, issuerRef, e.now()
		if impacted >= 0 {
			f.ImpactedMicro, f.HasImpacted = impacted, true
		}
		i := sort.SearchStrings(s.Frozen, f.SparkAddress)
		present := i < len(s.Frozen) && s.Frozen[i] == f.SparkAddress
		switch {
		case f.Action == ActionFreeze && !present:
			s.Frozen = append(s.Frozen, "")
			copy(s.Frozen[i+1:], s.Frozen[i:])
			s.Frozen[i] = f.SparkAddress
		case f.Action == ActionUnfreeze && present:
			s.Frozen = append(s.Frozen[:i], s.Frozen[i+1:]...)
		}
		return NewFreezeView(*f), nil
	}
	return FreezeView{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "no freeze log entry %d", seq)
}

// PendingFreezes lists requested freeze entries (for the custody worker).
func (s *State) PendingFreezes() []Freeze {
	var out []Freeze
	for _, f := range s.Freezes {
		if f.State == FreezeRequested {
			out = append(out, f)
		}
	}
	return out
}

// PendingWithdrawals lists requested withdrawals in request order (for
// the token rail driver).
func (s *State) PendingWithdrawals() []Withdrawal {
	out := make([]Withdrawal, 0, len(s.InFlight))
	for _, id := range s.InFlight {
		out = append(out, *s.Withdrawals[id])
	}
	return out
}

// LedgerSupply and LedgerCustody are what an issuer attestation is
// compared with: every USDx is a token; custody holds all but the ones
// withdrawn to addresses.
func (s *State) LedgerCustody() int64 { return s.Supply - s.Outside }

// Attest compares the issuer's report with the ledger. A mismatch halts
// mints (reason attestation_failed) until an operator resumes them after a
// later attestation passes; a pass never resumes by itself.
func (s *State) Attest(e *Env, a Attestation) AttestationView {
	a.LedgerSupply, a.LedgerCustody = s.Supply, s.LedgerCustody()
	a.OK = a.IssuerSupply == a.LedgerSupply && a.IssuerCustody == a.LedgerCustody && a.IssuerIssued-a.IssuerBurned == a.IssuerSupply
	s.Attested = &a
	if !a.OK && (s.Halt == nil || !s.Halt.Attestation) {
		s.Halt = &Halt{Reason: "attestation_failed", SinceMs: e.now(), Attestation: true}
	}
	return NewAttestationView(a)
}

// SetHalt halts mints (halt true, with a reason) or resumes them. Resuming
// an attestation halt needs the last attestation to have passed.
func (s *State) SetHalt(e *Env, halt bool, reason string) *wire.Refusal {
	if halt {
		reason = strings.TrimSpace(reason)
		if reason == "" || len(reason) > 200 {
			return bad(wire.CodeValidation, "a halt needs a reason of 1..200 characters")
		}
		if s.Halt != nil && s.Halt.Attestation {
			return wire.Refuse(http.StatusConflict, wire.CodeConflict, "mints are already halted by a failed attestation")
		}
		s.Halt = &Halt{Reason: reason, SinceMs: e.now()}
		return nil
	}
	if s.Halt == nil {
		return wire.Refuse(http.StatusConflict, wire.CodeConflict, "mints are not halted")
	}
	if s.Halt.Attestation && (s.Attested == nil || !s.Attested.OK) {
		return wire.Refuse(http.StatusConflict, wire.CodeConflict, "the last issuer attestation failed; resume after one passes")
	}
	s.Halt = nil
	return nil
}

// DepositRefsKept bounds the token deposits remembered for idempotency
// (the newest are kept; a rail reports a transfer once, retries within
// minutes).
const DepositRefsKept = 10_000

// Deposit credits q USDx that arrived at accountID's deposit address
// (reported by the token rail under issuerRef, once). Only tokens outside
// custody can arrive: a deposit beyond them is refused, as the issuer
// never made those tokens.
func (s *State) Deposit(e *Env, accountID string, q int64, issuerRef string) *wire.Refusal {
	if accountID == "" || issuerRef == "" || len(issuerRef) > 255 {
		return bad(wire.CodeValidation, "a token deposit needs an account and an issuer ref of 1..255 characters")
	}
	if _, seen := s.DepositRefs[issuerRef]; seen {
		return wire.Refuse(http.StatusConflict, wire.CodeConflict, "token deposit %q was already credited", issuerRef)
	}
	if q < 1 || q > s.Outside {
		return bad(wire.CodeValidation, "a token deposit of %d USDx, with %d outside custody", q, s.Outside)
	}
	h := s.holder(accountID)
	h.Usdx += q
	s.Outside -= q
	s.DepositRefs[issuerRef] = e.now()
	s.DepositOrder = append(s.DepositOrder, issuerRef)
	if len(s.DepositOrder) > DepositRefsKept {
		delete(s.DepositRefs, s.DepositOrder[0])
		s.DepositOrder = s.DepositOrder[1:]
	}
	s.activity(e, accountID, Activity{Event: "deposit", Ref: issuerRef, Usdx: q, State: "credited"})
	return nil
}

// dropInFlight removes id from InFlight in place, moving the shorter side:
// the custody worker pays oldest first, so a payment found near the head
// costs a re-slice. It used to copy the whole list into a new array on
// every payment (O(withdrawals in flight across all accounts)). The
// content, what the state hash and snapshot see, is the same.
func (s *State) dropInFlight(id string) {
	i := slices.Index(s.InFlight, id)
	switch {
	case i < 0:
	case i < len(s.InFlight)/2:
		copy(s.InFlight[1:i+1], s.InFlight[:i])
		s.InFlight[0] = ""
		s.InFlight = s.InFlight[1:]
	default:
		s.InFlight = slices.Delete(s.InFlight, i, i+1)
	}
}
