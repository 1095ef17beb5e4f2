package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node/rail"
)

// Money rails: deposit invoices, withdrawal quotes, withdrawals and their
// history (SPEC sections 2, 4 and 7). The serving node talks to the rail
// (issue an invoice, validate a destination, quote a fee) and proposes what
// it learned; the state machine decides what it does to balances. Payouts
// are sent by the leader's rail driver (node.RailDriver), never here.

func init() { routeSets = append(routeSets, (*Server).railRoutes) }

// DepositInvoiceRequest is the body of POST /v1/deposit-invoices.
type DepositInvoiceRequest struct {
	AmountMsat    *wire.Int `json:"amountMsat" unit:"msat" min:"1" max:"2100000000000000000" doc:"omit for an any-amount invoice"`
	ExpirySeconds *int64    `json:"expirySeconds" min:"1" max:"9007199254740991" doc:"default 3600"`
	Memo          *string   `json:"memo" maxLen:"639" doc:"the invoice description; at most 639 bytes of UTF-8"`
}

// DepositInvoiceView is the deposit invoice result.
type DepositInvoiceView struct {
	Invoice     string           `json:"invoice"`
	PaymentRef  string           `json:"paymentRef"`
	ExpiresAtMs wire.Int         `json:"expiresAtMs" unit:"ms"`
	DepositFees []DepositFeeView `json:"depositFees"`
}

// QuoteRequest is the body of POST /v1/withdrawals/quote.
type QuoteRequest struct {
	Invoice    *string   `json:"invoice" maxLen:"7089" doc:"a Lightning payment request (BOLT11)"`
	ToAddress  *string   `json:"toAddress" maxLen:"7089" doc:"a Spark address"`
	AmountMsat *wire.Int `json:"amountMsat" unit:"msat" doc:"required unless the invoice carries an amount"`
}

// QuoteView is the quote result.
type QuoteView struct {
	Path                 string   `json:"path" enum:"spark,lightning"`
	FeeMsat              wire.Int `json:"feeMsat" unit:"msat"`
	FirstSeen            bool     `json:"firstSeen"`
	ConfirmRequired      bool     `json:"confirmRequired"`
	ConfirmThresholdMsat wire.Int `json:"confirmThresholdMsat" unit:"msat"`
	ConfirmToken         string   `json:"confirmToken,omitempty"`
}

// WithdrawRequest is the body of POST /v1/withdrawals.
type WithdrawRequest struct {
	AmountMsat   wire.Int `json:"amountMsat" unit:"msat" req:"true" doc:"what the destination receives; the fee comes on top"`
	ToAddress    *string  `json:"toAddress" maxLen:"7089" doc:"a Spark address"`
	Invoice      *string  `json:"invoice" maxLen:"7089" doc:"a Lightning payment request, instead of toAddress"`
	ConfirmToken *string  `json:"confirmToken" maxLen:"256" doc:"from the quote, for a first-seen destination at or above confirmThresholdMsat"`
}

// ConfirmationRequiredBody is the 428 body of SPEC section 7.
type ConfirmationRequiredBody struct {
	Error                string   `json:"error" enum:"confirmation_required"`
	Code                 string   `json:"code,omitempty"`
	Reason               string   `json:"reason"`
	FirstSeen            bool     `json:"firstSeen"`
	ConfirmThresholdMsat wire.Int `json:"confirmThresholdMsat" unit:"msat"`
}

// WithdrawalsPage is a page of withdrawals, newest first.
type WithdrawalsPage struct {
	Withdrawals   []funds.WithdrawalView `json:"withdrawals"`
	NextBeforeSeq *wire.Int              `json:"nextBeforeSeq" unit:"seq"`
}

func (s *Server) railRoutes() []*Route {
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/deposit-invoices", Summary: "Issue a Lightning deposit invoice for the caller's account",
			Auth: Keyed, Scope: "trade", Budget: "read", Idem: true, Request: DepositInvoiceRequest{},
			Responses: map[int]any{201: DepositInvoiceView{}}, Handler: s.createDepositInvoice},
		{Method: http.MethodPost, Path: "/v1/withdrawals/quote", Summary: "Quote a withdrawal: path, fee, and whether the destination needs confirmation",
			Auth: Keyed, Scope: "trade", Budget: "read", Request: QuoteRequest{},
			Responses: map[int]any{200: QuoteView{}}, Handler: s.quoteWithdrawal},
		{Method: http.MethodPost, Path: "/v1/withdrawals", Summary: "Withdraw to a Spark address or a Lightning invoice (works in every halt mode)",
			Auth: Keyed, Scope: "withdraw", Budget: "withdraw", Idem: true, Request: WithdrawRequest{},
			Responses: map[int]any{201: funds.WithdrawalCreated{}, 409: wire.ErrorBody{}, 428: ConfirmationRequiredBody{}},
			Refuses:   map[int][]string{409: {wire.CodeInsufficientBalance}, 428: {wire.CodeConfirmationNeeded}},
			IdemRetry: idemReplay + " The confirmToken is not part of the body compared: a retry with a fresh token, or " +
				"none, is the same withdrawal. After the 24 hours the withdrawal keeps its key: the same key with the same amount and " +
				"destination answers 201 with the original railRef and queued for as long as the withdrawal is kept, and pays nothing; " +
				"another amount or destination is 409 idempotency_key_reused.",
			Notes: map[int]string{201: "The outcome follows in GET /v1/withdrawals and on the account channel: paid, or returned " +
				"(amount and fee given back, queuedReason says why). On testnet and local the rail is simulated: a Spark payout is paid " +
				"at once and lands nowhere, another account's railAddress included (no deposit follows; fund a test account with its " +
				"faucet), and every Lightning payout is returned as an unknown payout invoice"},
			Handler: s.createWithdrawal},
		{Method: http.MethodGet, Path: "/v1/withdrawals", Summary: "Withdrawals, newest first",
			Auth: Keyed, Scope: "read", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: WithdrawalsPage{}}, Handler: s.withdrawals},
	}
}

// nowMs is this node's clock for rail calls, never behind the log's.
func (s *Server) nowMs() int64 {
	now := time.Now().UnixMilli()
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { now = max(now, st.NowMs) })
	return now
}

// logNowMs is this node's estimate of log time, the clock the state
// machine judges a confirmToken's expiry by. It is not the calendar: log
// time lags it after an outage and leads it after a wall-clock step back.
func (s *Server) logNowMs() int64 {
	now := s.Node.ClockMs()
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { now = max(now, st.NowMs) })
	return now
}

func (s *Server) createDepositInvoice(c *gin.Context) {
	var req DepositInvoiceRequest
	if !s.decode(c, &req) {
		return
	}
	ir := rail.InvoiceRequest{AccountID: callerOf(c).AccountID, NowMs: s.nowMs()}
	if req.AmountMsat != nil {
		ir.AmountMsat = int64(*req.AmountMsat)
	}
	if req.ExpirySeconds != nil {
		ir.ExpirySeconds = *req.ExpirySeconds
	}
	if req.Memo != nil {
		ir.Memo = *req.Memo
	}
	inv, err := s.Rail.CreateInvoice(ir)
	if err != nil {
		s.railFailure(c, err)
		return
	}
	p := funds.NewInvoice{PaymentRequest: inv.PaymentRequest, PaymentRef: inv.PaymentRef,
		AmountMsat: ir.AmountMsat, ExpiresAtMs: inv.ExpiresAtMs}
	res, ok := s.submit(c, fsm.CmdInvoiceCreated, p, req)
	if !ok {
		return
	}
	// A retry with the same idempotency-key gets the stored invoice (the
	// one issued just now is never recorded, so it can never be credited).
	out, ok := storedResult[funds.InvoiceCreated](c, res)
	if !ok {
		return
	}
	c.JSON(res.Status, DepositInvoiceView{Invoice: out.Invoice, PaymentRef: out.PaymentRef,
		ExpiresAtMs: out.ExpiresAtMs, DepositFees: s.depositFees()})
}

// railFailure answers a rail error: its refusal of the input is a 400 with
// the rail's own words; anything else is the rail being unavailable.
func (s *Server) railFailure(c *gin.Context, err error) {
	if rail.IsValidation(err) {
		invalid(c, err.Error())
		return
	}
	s.log.Warn("rail call failed", "err", err)
	unavailable(c, "the payment rail is unavailable; retry with the same idempotency-key")
}

// target resolves a withdrawal's destination and amount, answering 400
// itself when they do not make a withdrawal. bodyAmount is nil when the
// body has none. It leaves an invoice's expiry to the caller.
func (s *Server) target(c *gin.Context, invoice, toAddress *string, bodyAmount *int64) (rail.Destination, int64, bool) {
	fail := func(format string, args ...any) (rail.Destination, int64, bool) {
		invalid(c, fmt.Sprintf(format, args...))
		return rail.Destination{}, 0, false
	}
	if (invoice == nil) == (toAddress == nil) {
		return fail("give exactly one destination: invoice (a Lightning payment request) or toAddress (a Spark address)")
	}
	raw, field := "", "toAddress"
	if invoice != nil {
		raw, field = *invoice, "invoice"
	} else {
		raw = *toAddress
	}
	d, err := s.Rail.ParseDestination(raw)
	if err != nil {
		if rail.IsValidation(err) {
			return fail("field %s: %s", field, err.Error())
		}
		s.railFailure(c, err)
		return rail.Destination{}, 0, false
	}
	switch {
	case invoice != nil && d.Path != rail.PathLightning:
		return fail("field invoice: this is a %s address; send it as toAddress", d.Path)
	case toAddress != nil && d.Path == rail.PathLightning:
		return fail("field toAddress: this is a Lightning payment request; send it as invoice")
	}
	amount := d.AmountMsat
	switch {
	case bodyAmount != nil && amount != 0 && *bodyAmount != amount:
		return fail("field amountMsat: %d differs from the invoice's amount %d", *bodyAmount, amount)
	case bodyAmount != nil:
		amount = *bodyAmount
	case amount == 0:
		return fail("field amountMsat: is required (the destination carries no amount)")
	}
	switch {
	case amount <= 0 || amount > funds.MaxMoneyMsat:
		return fail("field amountMsat: must be between 1 and %d", funds.MaxMoneyMsat)
	case d.Path == rail.PathSpark && amount%1000 != 0:
		return fail("field amountMsat: Spark transfers move whole sats; use a multiple of 1000 msat")
	}
	return d, amount, true
}

func (s *Server) quoteWithdrawal(c *gin.Context) {
	var req QuoteRequest
	if !s.decode(c, &req) {
		return
	}
	var bodyAmount *int64
	if req.AmountMsat != nil {
		v := int64(*req.AmountMsat)
		bodyAmount = &v
	}
	d, amount, ok := s.target(c, req.Invoice, req.ToAddress, bodyAmount)
	if !ok {
		return
	}
	// A quote is only a preview, so the wall clock may refuse it. A
	// withdrawal may not: see createWithdrawal.
	if d.Expired(s.nowMs()) {
		invalid(c, fmt.Sprintf("field invoice: the invoice expired at %d ms; ask the payee for a new one", d.ExpiresAtMs))
		return
	}
	acct := callerOf(c).AccountID
	key := funds.DestinationKey(d.Normalized)
	var known bool
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { known = st.Funds.DestinationKnown(acct, key) })
	q := QuoteView{Path: d.Path, FeeMsat: wire.Int(s.Rail.QuoteFee(d.Path, amount)), FirstSeen: !known,
		ConfirmRequired: !known && amount >= funds.ConfirmThresholdMsat, ConfirmThresholdMsat: wire.Int(funds.ConfirmThresholdMsat)}
	if q.ConfirmRequired {
		// On the log's clock: the state machine refuses an expiry more
		// than the lifetime and a minute ahead of log time, so a wall-clock
		// expiry was refused whenever log time lagged by over a minute.
		tok, err := s.mintConfirmToken(acct, d.Normalized, amount, s.logNowMs()+funds.ConfirmTokenTTLMs)
		if err != nil {
			unavailable(c, err.Error())
			return
		}
		q.ConfirmToken = tok
	}
	c.JSON(http.StatusOK, q)
}

func (s *Server) createWithdrawal(c *gin.Context) {
	var req WithdrawRequest
	if !s.decode(c, &req) {
		return
	}
	bodyAmount := int64(req.AmountMsat)
	d, amount, ok := s.target(c, req.Invoice, req.ToAddress, &bodyAmount)
	if !ok {
		return
	}
	// An expired invoice is not refused here but by the state machine, in
	// log time and after its idempotency replay: a client retrying a
	// withdrawal it created before the invoice expired must get the stored
	// 201, or it believes the withdrawal failed (it exists, and may be
	// paid) and may withdraw again.
	//
	// The payment hash lets the state machine tell the same payment under
	// a re-signed invoice (funds.LevelInvoiceHashPaidOnce).
	acct := callerOf(c).AccountID
	clientKey, _ := idemKeyOf(c)
	p := funds.WithdrawalRequest{IdempotencyKey: clientKey, AmountMsat: amount,
		FeeMsat: s.Rail.QuoteFee(d.Path, amount), Path: d.Path, Destination: d.Normalized,
		DestExpiresAtMs: d.ExpiresAtMs, PaymentHash: d.PaymentRef, RailRef: "wd_" + randomID(12)}
	if req.ConfirmToken != nil {
		p.Confirm = s.readConfirmToken(*req.ConfirmToken, acct, d.Normalized)
	}
	// The request hash leaves the confirmToken out: it says the client
	// saw the quote, not what the withdrawal is (PriorWithdrawal compares
	// amount and destination only). A client whose answer was lost cannot
	// tell whether its single-use token was spent and may retry with a
	// fresh one, or none: that is the same withdrawal, answered as stored,
	// not 409 idempotency_key_reused, which could send it to a new key and
	// a second withdrawal. With the token nil the hash is the bytes it
	// always was for a request sent without one.
	hashed := req
	hashed.ConfirmToken = nil
	res, ok := s.submit(c, fsm.CmdWithdrawalRequested, p, hashed)
	if !ok {
		return
	}
	if res.Code == wire.CodeConfirmationNeeded {
		var e wire.ErrorBody
		_ = res.Decode(&e)
		c.JSON(http.StatusPreconditionRequired, ConfirmationRequiredBody{Error: wire.CodeConfirmationNeeded,
			Code: wire.CodeConfirmationNeeded, Reason: e.Error, FirstSeen: true,
			ConfirmThresholdMsat: wire.Int(funds.ConfirmThresholdMsat)})
		return
	}
	respond(c, res)
}

func (s *Server) withdrawals(c *gin.Context) {
	limit, before, ok := s.pageQuery(c)
	if !ok {
		return
	}
	acct := callerOf(c).AccountID
	page := WithdrawalsPage{Withdrawals: []funds.WithdrawalView{}}
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		seqs, next := pageSeqs(st.Funds.WithdrawalsByAccount[acct], before, limit)
		for _, q := range seqs {
			page.Withdrawals = append(page.Withdrawals, funds.NewWithdrawalView(st.Funds.WithdrawalAt(q)))
		}
		page.NextBeforeSeq = next
	})
	c.JSON(http.StatusOK, page)
}
