package funds

import "github.com/perpd/perpd/fsm/wire"

// WithdrawalView is the Withdrawal resource of SPEC section 2.
type WithdrawalView struct {
	IdempotencyKey string    `json:"idempotencyKey"`
	AmountMsat     wire.Int  `json:"amountMsat" unit:"msat"`
	FeeMsat        *wire.Int `json:"feeMsat" unit:"msat" doc:"the fee taken with the amount at the request; a returned withdrawal gave both back"`
	State          string    `json:"state" enum:"requested,queued,paid,returned"`
	Path           string    `json:"path" enum:"spark,lightning"`
	QueuedReason   *string   `json:"queuedReason" doc:"the rail's last word: why it is queued, or why it was returned (on testnet every Lightning payout is returned as an unknown payout invoice); null otherwise"`
	RailRef        *string   `json:"railRef"`
	RequestedTsMs  wire.Int  `json:"requestedTsMs" unit:"ms"`
	PaidTsMs       *wire.Int `json:"paidTsMs" unit:"ms"`
	// Seq is the seq of the record's latest change (additive to SPEC
	// section 2): a paid or returned withdrawal shows a newer seq than
	// when it was requested, the one its event carried.
	Seq wire.Int `json:"seq" unit:"seq"`
}

// NewWithdrawalView renders a withdrawal record. feeMsat and railRef are
// always known here (the fee is quoted and the railRef drawn before the
// record exists), so they are never null; queuedReason is the rail's last
// word while queued or once returned, and null otherwise.
func NewWithdrawalView(w *Withdrawal) WithdrawalView {
	v := WithdrawalView{IdempotencyKey: w.IdempotencyKey, AmountMsat: wire.Int(w.AmountMsat),
		FeeMsat: wire.Ptr(w.FeeMsat), State: w.State, Path: w.Path, RequestedTsMs: wire.Int(w.RequestedTsMs),
		Seq: wire.Int(w.ChangeSeq())}
	if w.Reason != "" {
		r := w.Reason
		v.QueuedReason = &r
	}
	if w.RailRef != "" {
		r := w.RailRef
		v.RailRef = &r
	}
	if w.PaidTsMs != 0 {
		v.PaidTsMs = wire.Ptr(w.PaidTsMs)
	}
	return v
}

// WithdrawalCreated is the create result of SPEC section 2.
type WithdrawalCreated struct {
	RailRef string `json:"railRef"`
	Queued  bool   `json:"queued"`
}

// InvoiceCreated is the state machine's part of the deposit invoice
// result; the HTTP layer adds depositFees, which the rail describes.
type InvoiceCreated struct {
	Invoice     string   `json:"invoice"`
	PaymentRef  string   `json:"paymentRef"`
	ExpiresAtMs wire.Int `json:"expiresAtMs" unit:"ms"`
}

// RailRefString is the view's railRef, "" when null.
func (v WithdrawalView) RailRefString() string {
	if v.RailRef == nil {
		return ""
	}
	return *v.RailRef
}
