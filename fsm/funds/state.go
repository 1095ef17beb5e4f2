package funds

// State is the funds part of the replicated state: deposits, open deposit
// invoices, withdrawals, and what withdrawal confirmation remembers.
//
// Every map is keyed for lookup only; anything listed or walked in order
// has its own ordered slice, so map iteration order never reaches state or
// output.
type State struct {
	Deposits map[uint64]*Deposit `cbor:"1,keyasint"`
	// ByAccount lists each account's deposit seqs in ascending order, so
	// newest-first pages are a walk from the end.
	ByAccount map[string][]uint64 `cbor:"2,keyasint"`
	// ByRailRef makes settlement idempotent: a rail reference credits once.
	// A paid invoice's rail reference is its payment ref, so this is also
	// what refuses paying one invoice twice.
	ByRailRef map[string]uint64 `cbor:"3,keyasint"`

	// Invoices are the issued deposit invoices not yet paid, by payment
	// ref; InvoicesByAccount lists each account's refs oldest first.
	Invoices          map[string]*Invoice `cbor:"4,keyasint"`
	InvoicesByAccount map[string][]string `cbor:"5,keyasint"`

	Withdrawals map[uint64]*Withdrawal `cbor:"6,keyasint"`
	// WithdrawalsByAccount lists each account's withdrawal seqs ascending.
	WithdrawalsByAccount map[string][]uint64 `cbor:"7,keyasint"`
	// WithdrawalByRailRef finds a withdrawal from a payout result.
	WithdrawalByRailRef map[string]uint64 `cbor:"8,keyasint"`
	// WithdrawalByIdem maps account + client idempotency key to the
	// withdrawal it created: the backstop that keeps a retry from paying
	// twice after the idempotency store has forgotten the key.
	WithdrawalByIdem map[string]uint64 `cbor:"9,keyasint"`
	// Open lists, ascending, the withdrawals still in requested or queued:
	// the leader's payout work list.
	Open []uint64 `cbor:"10,keyasint"`
	// QueuedByPath counts open withdrawals in state queued per path.
	QueuedByPath map[string]int64 `cbor:"11,keyasint"`

	// KnownDests holds, per account, the hashes of destinations a
	// withdrawal was paid to, oldest first, at most MaxKnownDestinations.
	KnownDests map[string][]string `cbor:"12,keyasint"`
	// UsedTokens maps a spent confirmToken's id to its expiry; UsedOrder
	// lists the ids in the order they were spent, for pruning.
	UsedTokens map[string]int64 `cbor:"13,keyasint"`
	UsedOrder  []string         `cbor:"14,keyasint"`

	// WithdrawalByChange maps the seq of each withdrawal's latest change
	// (what WithdrawalsByAccount lists) to its creation seq.
	WithdrawalByChange map[uint64]uint64 `cbor:"15,keyasint"`
	// InvoiceExpiries is a min-heap of open invoices by the time they are
	// forgotten (expiry plus InvoiceSettleGraceMs), so the timer drops
	// them without scanning; a paid invoice's entry is skipped when popped.
	InvoiceExpiries []InvoiceExpiry `cbor:"16,keyasint"`
	// ForgottenRefs lists, oldest first, rail references of deposits whose
	// record retention dropped but whose settlement a rail might still
	// repeat: ByRailRef keeps them until RailRefRetentionMs has passed.
	ForgottenRefs []ForgottenRef `cbor:"17,keyasint"`
}

// NewState returns empty funds state.
func NewState() *State {
	s := &State{}
	s.FillNil()
	return s
}

// FillNil repairs nil maps after decoding an older snapshot.
func (s *State) FillNil() {
	if s.Deposits == nil {
		s.Deposits = map[uint64]*Deposit{}
	}
	if s.ByAccount == nil {
		s.ByAccount = map[string][]uint64{}
	}
	if s.ByRailRef == nil {
		s.ByRailRef = map[string]uint64{}
	}
	if s.Invoices == nil {
		s.Invoices = map[string]*Invoice{}
	}
	if s.InvoicesByAccount == nil {
		s.InvoicesByAccount = map[string][]string{}
	}
	if s.Withdrawals == nil {
		s.Withdrawals = map[uint64]*Withdrawal{}
	}
	if s.WithdrawalsByAccount == nil {
		s.WithdrawalsByAccount = map[string][]uint64{}
	}
	if s.WithdrawalByRailRef == nil {
		s.WithdrawalByRailRef = map[string]uint64{}
	}
	if s.WithdrawalByIdem == nil {
		s.WithdrawalByIdem = map[string]uint64{}
	}
	if s.QueuedByPath == nil {
		s.QueuedByPath = map[string]int64{}
	}
	if s.KnownDests == nil {
		s.KnownDests = map[string][]string{}
	}
	if s.UsedTokens == nil {
		s.UsedTokens = map[string]int64{}
	}
	if s.InvoiceExpiries == nil && len(s.Invoices) > 0 {
		s.rebuildInvoiceExpiries()
	}
	if s.WithdrawalByChange == nil {
		// Older snapshots: every listed seq is still a creation seq.
		s.WithdrawalByChange = map[uint64]uint64{}
		for id, w := range s.Withdrawals {
			s.WithdrawalByChange[w.ChangeSeq()] = id
		}
	}
}
