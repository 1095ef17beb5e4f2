package funds

import (
	"net/http"

	"github.com/perpd/perpd/fsm/wire"
)

// MaxOpenInvoicesPerAccount bounds the unpaid, unexpired deposit invoices
// an account holds. Expired ones are dropped first; past the bound a new
// invoice is refused rather than an old one forgotten, since forgetting an
// open invoice would leave a payer's money uncredited.
const MaxOpenInvoicesPerAccount = 100

// MaxListedInvoicesPerAccount bounds an account's invoices kept at all:
// open ones plus expired ones still in their settlement grace.
const MaxListedInvoicesPerAccount = 2 * MaxOpenInvoicesPerAccount

// Invoice is an issued deposit invoice that has not been paid yet. Its
// payment request is not kept: the payment ref (the hex payment hash) is
// what a settlement is matched against.
type Invoice struct {
	PaymentRef  string `cbor:"1,keyasint"`
	AccountID   string `cbor:"2,keyasint"`
	AmountMsat  int64  `cbor:"3,keyasint"` // 0 = any amount
	ExpiresAtMs int64  `cbor:"4,keyasint"`
	CreatedTsMs int64  `cbor:"5,keyasint"`
}

// NewInvoice is what the node that issued an invoice proposes.
type NewInvoice struct {
	PaymentRequest string `cbor:"1,keyasint"`
	PaymentRef     string `cbor:"2,keyasint"`
	AmountMsat     int64  `cbor:"3,keyasint"`
	ExpiresAtMs    int64  `cbor:"4,keyasint"`
}

// AddInvoice records an issued invoice for account.
func (s *State) AddInvoice(account string, p NewInvoice, nowMs int64) (*Invoice, *wire.Refusal) {
	if !isHex64(p.PaymentRef) || p.PaymentRequest == "" {
		return nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "invoice needs a payment request and a 32-byte hex payment ref")
	}
	if p.AmountMsat < 0 || p.AmountMsat > MaxMoneyMsat || p.ExpiresAtMs <= 0 {
		return nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "invoice amount or expiry out of range")
	}
	if _, dup := s.Invoices[p.PaymentRef]; dup {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "invoice %s is already recorded", p.PaymentRef)
	}
	if _, paid := s.ByRailRef[p.PaymentRef]; paid {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "invoice %s was already paid", p.PaymentRef)
	}
	open := s.liveInvoices(account, nowMs)
	if len(open) >= MaxOpenInvoicesPerAccount {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"this account already has %d open deposit invoices; pay them or let them expire", MaxOpenInvoicesPerAccount)
	}
	// Expired invoices stay until the timer drops them (after
	// InvoiceSettleGraceMs), so a settlement seen before the expiry and
	// applied after it still finds its invoice; an account that fills its
	// list with expired ones loses the grace of the oldest.
	if refs := s.InvoicesByAccount[account]; len(refs) >= MaxListedInvoicesPerAccount {
		for _, ref := range refs {
			if nowMs >= s.Invoices[ref].ExpiresAtMs {
				s.CloseInvoice(ref)
				break
			}
		}
	}
	inv := &Invoice{PaymentRef: p.PaymentRef, AccountID: account, AmountMsat: p.AmountMsat,
		ExpiresAtMs: p.ExpiresAtMs, CreatedTsMs: nowMs}
	s.Invoices[p.PaymentRef] = inv
	s.InvoicesByAccount[account] = append(s.InvoicesByAccount[account], p.PaymentRef)
	s.scheduleInvoiceDrop(inv)
	return inv, nil
}

// liveInvoices lists account's invoices that have not expired at nowMs.
func (s *State) liveInvoices(account string, nowMs int64) []string {
	var out []string
	for _, ref := range s.InvoicesByAccount[account] {
		if inv := s.Invoices[ref]; inv != nil && nowMs < inv.ExpiresAtMs {
			out = append(out, ref)
		}
	}
	return out
}

func (s *State) setInvoiceRefs(account string, refs []string) {
	if len(refs) == 0 {
		delete(s.InvoicesByAccount, account)
		return
	}
	s.InvoicesByAccount[account] = refs
}

// SettledClockSkewMs is how far a rail's settlement time may lie ahead of
// the entry's log time: the rail's clock and the leader's differ a little.
const SettledClockSkewMs int64 = 5_000

// CheckInvoicePayment decides whether a Lightning settlement st may credit
// the invoice its rail reference names, in an entry applied at nowMs, and
// returns the settlement with the invoice's account filled in. The expiry
// is judged at the rail's settlement time, which must lie between the
// invoice's creation and nowMs + SettledClockSkewMs. It changes nothing.
func (s *State) CheckInvoicePayment(st Settlement, nowMs int64) (Settlement, *wire.Refusal) {
	inv := s.Invoices[st.RailRef]
	if inv == nil {
		if _, paid := s.ByRailRef[st.RailRef]; paid {
			return st, wire.Refuse(http.StatusConflict, wire.CodeConflict, msgAlreadySettled, st.RailRef)
		}
		return st, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "unknown invoice %q: no open deposit invoice has this payment ref", st.RailRef)
	}
	if st.AccountID != "" && st.AccountID != inv.AccountID {
		return st, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "invoice %s was issued to another account", st.RailRef)
	}
	settledMs := st.SettledTsMs
	if settledMs == 0 {
		settledMs = nowMs
	}
	if settledMs < inv.CreatedTsMs || settledMs > nowMs+SettledClockSkewMs {
		return st, wire.Refuse(http.StatusBadRequest, wire.CodeValidation,
			"settlement time %d ms lies outside the invoice's life (created %d ms, log time %d ms)", settledMs, inv.CreatedTsMs, nowMs)
	}
	if settledMs >= inv.ExpiresAtMs {
		return st, wire.Refuse(http.StatusConflict, wire.CodeConflict, "invoice %s expired at %d ms", st.RailRef, inv.ExpiresAtMs)
	}
	if inv.AmountMsat != 0 && st.AmountMsat != inv.AmountMsat {
		return st, wire.Refuse(http.StatusBadRequest, wire.CodeValidation,
			"paid amount %d msat does not match the invoice's %d msat", st.AmountMsat, inv.AmountMsat)
	}
	st.AccountID = inv.AccountID
	return st, nil
}

// CloseInvoice forgets a paid invoice; its deposit record, found by the
// same rail reference, now refuses a second payment.
func (s *State) CloseInvoice(ref string) {
	inv := s.Invoices[ref]
	if inv == nil {
		return
	}
	delete(s.Invoices, ref)
	refs := s.InvoicesByAccount[inv.AccountID]
	kept := refs[:0]
	for _, r := range refs {
		if r != ref {
			kept = append(kept, r)
		}
	}
	s.setInvoiceRefs(inv.AccountID, kept)
	// The heap entry of a paid invoice is skipped when popped; rebuild the
	// heap once such entries outnumber the live ones, so it stays O(open).
	if len(s.InvoiceExpiries) > 2*len(s.Invoices)+64 {
		s.InvoiceExpiries = nil
		s.rebuildInvoiceExpiries()
	}
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
