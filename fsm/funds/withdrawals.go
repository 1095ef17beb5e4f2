package funds

import (
	"net/http"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

// Withdrawal states (SPEC section 3). requested and queued are open: the
// money sits in ledger.PendingWithdrawals and the leader keeps asking the
// rail. paid and returned are final.
//
//	requested --paid--> paid
//	requested --returned--> returned (amount and fee back to free, exactly)
//	requested --pending--> queued --paid/returned--> paid/returned
//
// A withdrawal is created queued instead of requested when the rail is
// already holding payouts on its path (another withdrawal of that path is
// queued): the create result then says queued: true, meaning "this payout
// waits behind the rail", and false means it was handed to the rail at once.
const (
	StateRequested = "requested"
	StateQueued    = "queued"
	StatePaid      = "paid"
	StateReturned  = "returned"
)

// Withdrawal paths; the strings are the SPEC's wire values.
const (
	PathSpark     = "spark"
	PathLightning = "lightning"
)

// Payout statuses a rail reports.
const (
	PayoutPaid     = "paid"
	PayoutReturned = "returned"
	PayoutPending  = "pending"
)

// MaxReasonBytes bounds a stored rail reason; longer ones are cut at a rune
// boundary.
const MaxReasonBytes = 300

// Withdrawal is one withdrawal record (SPEC section 2).
type Withdrawal struct {
	// Seq is the seq of the withdrawal's creation: its identity, the key of
	// State.Withdrawals. LastSeq is the seq of its latest change (0 while
	// that is the creation): what the view, the events and the history
	// pages show, so a client de-duplicating on seq sees every change.
	Seq            uint64 `cbor:"1,keyasint"`
	AccountID      string `cbor:"2,keyasint"`
	IdempotencyKey string `cbor:"3,keyasint"` // the client's key, unscoped
	AmountMsat     int64  `cbor:"4,keyasint"` // what the destination receives
	FeeMsat        int64  `cbor:"5,keyasint"` // kept by the venue when paid
	State          string `cbor:"6,keyasint"`
	Path           string `cbor:"7,keyasint"`
	Destination    string `cbor:"8,keyasint"` // normalized
	// Reason is the rail's last word: why the payout waits (queued) or why
	// it was returned. Shown as queuedReason.
	Reason        string `cbor:"9,keyasint,omitempty"`
	RailRef       string `cbor:"10,keyasint"`
	RequestedTsMs int64  `cbor:"11,keyasint"`
	PaidTsMs      int64  `cbor:"12,keyasint,omitempty"`
	// ClosedTsMs is when it became paid or returned.
	ClosedTsMs int64 `cbor:"13,keyasint,omitempty"`
	// CreatedQueued is the create result's queued flag.
	CreatedQueued bool   `cbor:"14,keyasint,omitempty"`
	LastSeq       uint64 `cbor:"15,keyasint,omitempty"`
	// PaymentHash is a Lightning invoice's payment hash (64 lowercase
	// hex), recorded from LevelInvoiceHashPaidOnce; "" for Spark and for
	// a withdrawal recorded before the level. omitempty: a record without
	// one encodes to the bytes it had before the field existed.
	PaymentHash string `cbor:"16,keyasint,omitempty"`
}

// ChangeSeq is the seq of the withdrawal's latest change.
func (w *Withdrawal) ChangeSeq() uint64 {
	if w.LastSeq != 0 {
		return w.LastSeq
	}
	return w.Seq
}

// Final reports whether the withdrawal reached paid or returned.
func (w *Withdrawal) Final() bool { return w.State == StatePaid || w.State == StateReturned }

// WithdrawalRequest is what the node serving POST /v1/withdrawals proposes,
// after validating the destination with the rail and quoting the fee.
type WithdrawalRequest struct {
	IdempotencyKey string `cbor:"1,keyasint"`
	AmountMsat     int64  `cbor:"2,keyasint"`
	FeeMsat        int64  `cbor:"3,keyasint"`
	Path           string `cbor:"4,keyasint"`
	Destination    string `cbor:"5,keyasint"`
	// DestExpiresAtMs is a Lightning invoice's expiry (0 for Spark).
	DestExpiresAtMs int64    `cbor:"6,keyasint,omitempty"`
	RailRef         string   `cbor:"7,keyasint"`
	Confirm         *Confirm `cbor:"8,keyasint,omitempty"`
	// PaymentHash is the invoice's payment hash (64 lowercase hex) as the
	// serving node decoded it from Destination; "" for Spark. A build
	// before LevelInvoiceHashPaidOnce ignores the field (an unknown CBOR
	// key), and so does apply below that level.
	PaymentHash string `cbor:"9,keyasint,omitempty"`
}

// PayoutResult is what the rail said about a payout.
type PayoutResult struct {
	RailRef string `cbor:"1,keyasint"`
	Status  string `cbor:"2,keyasint"`
	Reason  string `cbor:"3,keyasint,omitempty"`
}

// idemIndexKey scopes a client idempotency key to its account.
func idemIndexKey(account, key string) string { return account + "\x00" + key }

// PriorWithdrawal returns the withdrawal an earlier request with the same
// client idempotency key created, if any. A retry that differs in amount or
// destination is a reuse of the key.
func (s *State) PriorWithdrawal(account string, r WithdrawalRequest) (*Withdrawal, *wire.Refusal) {
	if r.IdempotencyKey == "" {
		return nil, nil
	}
	seq, ok := s.WithdrawalByIdem[idemIndexKey(account, r.IdempotencyKey)]
	if !ok {
		return nil, nil
	}
	w := s.Withdrawals[seq]
	if w.AmountMsat != r.AmountMsat || w.Destination != r.Destination {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused,
			"idempotency-key was already used with a different withdrawal")
	}
	return w, nil
}

// LevelInvoicePaidOnce is the feature level (fsm.FeatureLevel) from which
// a Lightning withdrawal is refused while the account has another one to
// the same invoice that was not returned. An invoice is paid once: a
// second withdrawal to it (a client retrying under a new idempotency key)
// either fails at the rail or, with an adapter that looks payments up by
// their hash, is reported paid without anything sent, charging the
// account twice. Found by a review on 2026-11-27. It compares invoice
// strings; LevelInvoiceHashPaidOnce adds the payment hash.
const LevelInvoicePaidOnce uint32 = 7

// LevelInvoiceHashPaidOnce is the feature level (fsm.FeatureLevel) from
// which LevelInvoicePaidOnce compares Lightning withdrawals by payment
// hash as well as by invoice string. The payee (here the client itself)
// can sign its invoice again with another description or expiry and the
// same payment hash: a new string for the same payment, which the string
// check let through, and a rail that finds payments by their hash then
// reports the second paid with nothing sent. From the level a request's
// PaymentHash is checked (64 lowercase hex, Lightning only) and recorded
// on the withdrawal; below it the field is ignored, as a build before it
// ignores it. Found by a review on 2026-11-28.
const LevelInvoiceHashPaidOnce uint32 = 8

// LevelReturnedNotHeld is the feature level (fsm.FeatureLevel) from which
// a returned withdrawal past MaxClosedWithdrawalsPerAccount is dropped at
// once, without the WithdrawalRetainMs hold that paid ones get. The hold
// keeps a late retry from paying twice, and a returned withdrawal paid
// nothing; but it also cost nothing, so the hold let an account keep one
// record a request (20 a minute, each with a Lightning invoice of up to
// 7 KB) for two days for free: every testnet Lightning payout is returned
// with a full refund. Found by a review on 2026-11-27.
const LevelReturnedNotHeld uint32 = 8

// MaxOpenWithdrawalsPerAccount bounds an account's open (requested or
// queued) withdrawals from LevelOpenWithdrawalsBounded: past it a new one
// is refused until one is paid or returned. An open withdrawal is never
// dropped, and it holds only its amount and fee (a Lightning one: 1 msat
// plus a 2,001 msat fee, with an invoice of up to 7 KB), which come back
// in full when the rail returns it; a payee holding the payment (a hold
// invoice) keeps it open as long as it likes. 100 is five minutes of the
// withdraw budget, far above what a rail that answers leaves open.
const MaxOpenWithdrawalsPerAccount = 100

// LevelOpenWithdrawalsBounded is the feature level (fsm.FeatureLevel)
// from which MaxOpenWithdrawalsPerAccount holds. Below it an account's
// open withdrawals had no bound but its balance: 20 a minute for as long
// as the rail kept them open, 28,800 a day (about 200 MB of State with
// 7 KB Lightning invoices) for 57,600 sats locked, all refunded when the
// rail returns them (found by a review on 2026-11-27).
const LevelOpenWithdrawalsBounded uint32 = 8

// OpenWithdrawals counts account's withdrawals still requested or queued.
// It walks the account's kept withdrawals, as the retention trim does on
// every request.
func (s *State) OpenWithdrawals(account string) int {
	n := 0
	for _, q := range s.WithdrawalsByAccount[account] {
		if w := s.WithdrawalAt(q); w != nil && !w.Final() {
			n++
		}
	}
	return n
}

// LiveWithdrawalTo returns an account's withdrawal to the Lightning
// invoice dest (normalized) that is requested, queued or paid, if any;
// with hash not "", also one that recorded the payment hash hash: the
// same payment under another invoice string. A withdrawal recorded
// without a hash (before LevelInvoiceHashPaidOnce) matches by its string
// only. It walks the account's kept withdrawals (retention.go bounds
// them; a closed one is kept at least WithdrawalRetainMs).
func (s *State) LiveWithdrawalTo(account, dest, hash string) (*Withdrawal, bool) {
	seqs := s.WithdrawalsByAccount[account] // seqs of each one's latest change
	for i := len(seqs) - 1; i >= 0; i-- {
		w := s.WithdrawalAt(seqs[i])
		if w == nil || w.Path != PathLightning || w.State == StateReturned {
			continue
		}
		if w.Destination == dest || (hash != "" && w.PaymentHash == hash) {
			return w, true
		}
	}
	return nil, false
}

// RequestWithdrawal validates r for account at nowMs and, if it passes,
// moves amount + fee from the trader's free balance into
// ledger.PendingWithdrawals and records the withdrawal under seq. Nothing
// changes when it refuses.
func (s *State) RequestWithdrawal(l *ledger.Ledger, account string, r WithdrawalRequest, seq uint64, nowMs int64) (*Withdrawal, *wire.Refusal) {
	if ref := checkRequest(r, nowMs); ref != nil {
		return nil, ref
	}
	if _, dup := s.WithdrawalByRailRef[r.RailRef]; dup {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "railRef %q is already taken", r.RailRef)
	}
	// The balance first: a withdrawal that cannot be paid is not worth
	// confirming.
	total := r.AmountMsat + r.FeeMsat // both bounded by MaxMoneyMsat: no overflow
	if free := l.Balance(ledger.Free(account)); free < total {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeInsufficientBalance,
			"free balance %d msat does not cover amount %d msat plus fee %d msat", free, r.AmountMsat, r.FeeMsat)
	}
	confirmed := s.ConfirmRequired(account, DestinationKey(r.Destination), r.AmountMsat)
	if confirmed {
		if ref := s.checkConfirm(r.Confirm, r.AmountMsat, nowMs); ref != nil {
			return nil, ref
		}
	}
	if err := l.Transfer(ledger.Free(account), ledger.PendingWithdrawals, total); err != nil {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeInsufficientBalance, "cannot reserve the withdrawal: %v", err)
	}
	if confirmed {
		s.useToken(r.Confirm)
	}
	w := &Withdrawal{Seq: seq, AccountID: account, IdempotencyKey: r.IdempotencyKey, AmountMsat: r.AmountMsat,
		FeeMsat: r.FeeMsat, State: StateRequested, Path: r.Path, Destination: r.Destination, RailRef: r.RailRef,
		RequestedTsMs: nowMs, PaymentHash: r.PaymentHash}
	if s.QueuedByPath[r.Path] > 0 {
		w.State, w.CreatedQueued = StateQueued, true
		w.Reason = "waiting behind earlier " + r.Path + " payouts the rail has not confirmed yet"
		s.QueuedByPath[r.Path]++
	}
	s.Withdrawals[seq] = w
	s.WithdrawalsByAccount[account] = append(s.WithdrawalsByAccount[account], seq)
	s.WithdrawalByChange[seq] = seq
	s.WithdrawalByRailRef[r.RailRef] = seq
	if r.IdempotencyKey != "" {
		s.WithdrawalByIdem[idemIndexKey(account, r.IdempotencyKey)] = seq
	}
	s.Open = append(s.Open, seq) // seqs only grow, so Open stays sorted
	s.trimWithdrawals(account, nowMs)
	return w, nil
}

func checkRequest(r WithdrawalRequest, nowMs int64) *wire.Refusal {
	bad := func(format string, args ...any) *wire.Refusal {
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, format, args...)
	}
	switch {
	case r.Path != PathSpark && r.Path != PathLightning:
		return bad("withdrawal path must be spark or lightning")
	case r.Destination == "" || r.RailRef == "":
		return bad("withdrawal needs a destination and a railRef")
	case r.AmountMsat <= 0 || r.AmountMsat > MaxMoneyMsat:
		return bad("amountMsat must be between 1 and %d", MaxMoneyMsat)
	case r.FeeMsat < 0 || r.FeeMsat > MaxMoneyMsat:
		return bad("withdrawal fee out of range")
	case r.Path == PathSpark && r.AmountMsat%1000 != 0:
		return bad("Spark transfers move whole sats: amountMsat must be a multiple of 1000")
	case r.DestExpiresAtMs != 0 && nowMs >= r.DestExpiresAtMs:
		return bad("the invoice expired at %d ms: ask the payee for a new one", r.DestExpiresAtMs)
	}
	return CheckPaymentHash(r)
}

// CheckPaymentHash refuses a request whose PaymentHash is neither empty
// nor 64 lowercase hex, or that carries one on a path other than
// Lightning: the serving node writes it from the decoded invoice, so a
// malformed one is a broken proposer, refused rather than recorded.
func CheckPaymentHash(r WithdrawalRequest) *wire.Refusal {
	switch {
	case r.PaymentHash == "":
		return nil
	case r.Path != PathLightning:
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "a paymentHash is only for a Lightning withdrawal")
	case !isHex64(r.PaymentHash):
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "paymentHash must be 64 lowercase hex digits")
	}
	return nil
}

// ApplyPayout records a rail's answer about the withdrawal with railRef at
// nowMs. A change takes seq (fresh from the shared space); an answer that
// changes nothing (pending again, same reason) leaves the record and its
// seq as they were, and the caller tells the two apart by ChangeSeq.
// paid takes the amount out of the venue and the fee into fee revenue; returned gives amount and fee back to the trader's free balance;
// pending queues it. A final withdrawal refuses any further result, so a
// repeated answer never moves money twice.
func (s *State) ApplyPayout(l *ledger.Ledger, p PayoutResult, seq uint64, nowMs int64) (*Withdrawal, *wire.Refusal) {
	id, ok := s.WithdrawalByRailRef[p.RailRef]
	if !ok {
		return nil, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "no withdrawal has railRef %q", p.RailRef)
	}
	w := s.Withdrawals[id]
	if w.Final() {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "withdrawal %s is already %s", p.RailRef, w.State)
	}
	reason := CleanReason(p.Reason)
	if p.Status == PayoutPending {
		reason = PendingReason(p.Reason)
	}
	if p.Status == PayoutPending && w.State == StateQueued && w.Reason == reason {
		return w, nil // nothing new: no change, no seq
	}
	switch p.Status {
	case PayoutPaid:
		// PendingWithdrawals holds at least amount + fee of every open
		// withdrawal, so neither leg can fail; a failure is a broken
		// invariant and must stop this replica rather than lose money.
		if err := l.Debit(ledger.PendingWithdrawals, w.AmountMsat); err != nil {
			panic("withdrawal payout debit: " + err.Error())
		}
		if w.FeeMsat > 0 {
			if err := l.Transfer(ledger.PendingWithdrawals, ledger.FeeRevenue, w.FeeMsat); err != nil {
				panic("withdrawal fee transfer: " + err.Error())
			}
		}
		s.close(w, StatePaid, "", nowMs)
		w.PaidTsMs = nowMs
		s.rememberDestination(w.AccountID, DestinationKey(w.Destination))
	case PayoutReturned:
		if reason == "" {
			reason = "the rail returned the payout"
		}
		if err := l.Transfer(ledger.PendingWithdrawals, ledger.Free(w.AccountID), w.AmountMsat+w.FeeMsat); err != nil {
			panic("withdrawal refund: " + err.Error())
		}
		s.close(w, StateReturned, reason, nowMs)
	case PayoutPending:
		if w.State != StateQueued {
			s.QueuedByPath[w.Path]++
		}
		w.State, w.Reason = StateQueued, reason
	default:
		return nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "payout status must be paid, returned or pending")
	}
	s.rekeyWithdrawal(w, seq)
	if w.Final() {
		s.trimWithdrawals(w.AccountID, nowMs)
	}
	return w, nil
}

// rekeyWithdrawal gives w's latest change the seq seq: its entry in the
// account's history index moves to the end (seq is the largest yet), so
// pages ordered by seq list the most recently changed first.
func (s *State) rekeyWithdrawal(w *Withdrawal, seq uint64) {
	old := w.ChangeSeq()
	s.WithdrawalsByAccount[w.AccountID] = append(removeSeq(s.WithdrawalsByAccount[w.AccountID], old), seq)
	delete(s.WithdrawalByChange, old)
	s.WithdrawalByChange[seq] = w.Seq
	w.LastSeq = seq
}

// WithdrawalAt finds a withdrawal by the seq of its latest change, as
// listed in WithdrawalsByAccount.
func (s *State) WithdrawalAt(changeSeq uint64) *Withdrawal {
	id, ok := s.WithdrawalByChange[changeSeq]
	if !ok {
		return nil
	}
	return s.Withdrawals[id]
}

// removeSeq removes q from the ascending list seqs, in place.
func removeSeq(seqs []uint64, q uint64) []uint64 {
	i := sort.Search(len(seqs), func(i int) bool { return seqs[i] >= q })
	if i < len(seqs) && seqs[i] == q {
		return append(seqs[:i], seqs[i+1:]...)
	}
	return seqs
}

// close moves an open withdrawal to a final state.
func (s *State) close(w *Withdrawal, state, reason string, nowMs int64) {
	if w.State == StateQueued {
		if s.QueuedByPath[w.Path]--; s.QueuedByPath[w.Path] <= 0 {
			delete(s.QueuedByPath, w.Path)
		}
	}
	w.State, w.Reason, w.ClosedTsMs = state, reason, nowMs
	s.dropOpen(w.Seq)
	if len(s.Open) == 0 {
		s.Open = nil
	}
}

// PendingReason is how a rail's reason for a pending payout is stored: as
// CleanReason, and a default when the rail gave none. The payout driver
// compares with it to tell a repeated answer from news.
func PendingReason(r string) string {
	if r = CleanReason(r); r == "" {
		return "the rail has not confirmed the payout yet"
	}
	return r
}

// CleanReason is how a rail reason is stored: valid UTF-8, at most
// MaxReasonBytes, cut at a rune boundary.
func CleanReason(r string) string {
	if !utf8.ValidString(r) {
		r = "the rail gave an unreadable reason"
	}
	if len(r) <= MaxReasonBytes {
		return r
	}
	cut := MaxReasonBytes
	for cut > 0 && !utf8.RuneStart(r[cut]) {
		cut--
	}
	return r[:cut]
}

// dropOpen removes seq from Open in place, found by binary search (Open
// is ascending). It moves the shorter side: the rail pays roughly oldest
// first, so a close near the head costs a re-slice, not a copy of every
// open withdrawal behind it. It used to copy the whole list into a new
// array on every close: O(open withdrawals) per paid or returned payout,
// 80 GB of copies to drain 100,000 of them. Open's content (what the
// state hash and snapshot see) is the same.
func (s *State) dropOpen(seq uint64) {
	i, ok := slices.BinarySearch(s.Open, seq)
	if !ok {
		// Not where order puts it (a state Open was never sorted in):
		// look everywhere, as before.
		if i = slices.Index(s.Open, seq); i < 0 {
			return
		}
	}
	if i < len(s.Open)/2 {
		copy(s.Open[1:i+1], s.Open[:i])
		s.Open = s.Open[1:]
		return
	}
	s.Open = slices.Delete(s.Open, i, i+1)
}
