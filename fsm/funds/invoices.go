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
	// Validation is over: drop the expired invoices, then record the new one.
	s.dropExpiredInvoices(account, nowMs)
	inv := &Invoice{PaymentRef: p.PaymentRef, AccountID: account, AmountMsat: p.AmountMsat,
		ExpiresAtMs: p.ExpiresAtMs, CreatedTsMs: nowMs}
	s.Invoices[p.PaymentRef] = inv
	s.InvoicesByAccount[account] = append(s.InvoicesByAccount[account], p.PaymentRef)
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

func (s *State) dropExpiredInvoices(account string, nowMs int64) {
	refs := s.InvoicesByAccount[account]
	kept := refs[:0]
	for _, ref := range refs {
		if inv := s.Invoices[ref]; inv != nil && nowMs < inv.ExpiresAtMs {
			kept = append(kept, ref)
			continue
		}
		delete(s.Invoices, ref)
	}
	s.setInvoiceRefs(account, kept)
}

func (s *State) setInvoiceRefs(account string, refs []string) {
	if len(refs) == 0 {
		delete(s.InvoicesByAccount, account)
		return
	}
	s.InvoicesByAccount[account] = refs
}

// CheckInvoicePayment decides whether a Lightning settlement st may credit
// the invoice its rail reference names, at nowMs, and returns the
// settlement with the invoice's account filled in. It changes nothing.
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
	if nowMs >= inv.ExpiresAtMs {
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
