package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// WithdrawRequest is the body of POST /v1/withdrawals: exactly one of
// ToAddress (a Spark address) and Invoice (a Lightning payment request,
// whose amount AmountMsat repeats).
type WithdrawRequest struct {
	AmountMsat string `json:"amountMsat"`
	ToAddress  string `json:"toAddress,omitempty"`
	Invoice    string `json:"invoice,omitempty"`
}

// QuoteRequest is the body of POST /v1/withdrawals/quote.
type QuoteRequest struct {
	Invoice    string `json:"invoice,omitempty"`
	ToAddress  string `json:"toAddress,omitempty"`
	AmountMsat string `json:"amountMsat,omitempty"`
}

// Quote is the body of a 200 withdrawal quote.
type Quote struct {
	Path            string `json:"path"`
	FeeMsat         string `json:"feeMsat"`
	FirstSeen       bool   `json:"firstSeen"`
	ConfirmRequired bool   `json:"confirmRequired"`
}

// QuoteWithdrawal asks what a withdrawal would cost (a read: no log
// entry, no idempotency key).
func (c *Client) QuoteWithdrawal(ctx context.Context, addr, apiKey string, body QuoteRequest) (Result, *Quote, int64) {
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: "/v1/withdrawals/quote",
		Header: map[string]string{"x-api-key": apiKey}, Body: body})
	if res.Type != "ok" {
		return res, nil, 0
	}
	var q Quote
	err := res.Decode(&q)
	var fee int64
	if err == nil {
		fee, err = strconv.ParseInt(q.FeeMsat, 10, 64)
	}
	if err != nil {
		res.Type, res.Error = "fail", fmt.Sprintf("quote: %v", err)
		return res, nil, 0
	}
	return res, &q, fee
}

// WithdrawAnswer is the body of a 201 withdrawal.
type WithdrawAnswer struct {
	RailRef string `json:"railRef"`
	Queued  bool   `json:"queued"`
}

// Withdraw requests a withdrawal under idemKey.
func (c *Client) Withdraw(ctx context.Context, addr, apiKey, idemKey string, body WithdrawRequest) (Result, *WithdrawAnswer) {
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: "/v1/withdrawals",
		Header: map[string]string{"idempotency-key": idemKey, "x-api-key": apiKey}, Body: body, IsWrite: true})
	if res.Type != "ok" {
		return res, nil
	}
	var a WithdrawAnswer
	if err := res.Decode(&a); err != nil || a.RailRef == "" {
		return malformed(res, err, "withdrawal answer without railRef"), nil
	}
	return res, &a
}

// Withdrawal is one record of GET /v1/withdrawals.
type Withdrawal struct {
	IdempotencyKey string  `json:"idempotencyKey"`
	AmountMsat     string  `json:"amountMsat"`
	FeeMsat        *string `json:"feeMsat"`
	State          string  `json:"state"`
	Path           string  `json:"path"`
	QueuedReason   *string `json:"queuedReason"`
	RailRef        *string `json:"railRef"`
	Seq            string  `json:"seq"`
	RequestedTsMs  string  `json:"requestedTsMs"`
}

// Amounts parses the record's amount and fee (a null fee is 0).
func (w Withdrawal) Amounts() (amount, fee int64, err error) {
	if amount, err = strconv.ParseInt(w.AmountMsat, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("amountMsat %q: %w", w.AmountMsat, err)
	}
	if w.FeeMsat != nil {
		if fee, err = strconv.ParseInt(*w.FeeMsat, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("feeMsat %q: %w", *w.FeeMsat, err)
		}
	}
	return amount, fee, nil
}

// WithdrawalsPage is the body of GET /v1/withdrawals.
type WithdrawalsPage struct {
	Withdrawals   []Withdrawal `json:"withdrawals"`
	NextBeforeSeq *string      `json:"nextBeforeSeq"`
}

// Withdrawals reads one page, newest first, not before minIndex.
func (c *Client) Withdrawals(ctx context.Context, addr, apiKey, beforeSeq string, limit int, minIndex uint64) (Result, *WithdrawalsPage) {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(limit))
	if beforeSeq != "" {
		q.Set("beforeSeq", beforeSeq)
	}
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/withdrawals?" + q.Encode(), Header: readHeader(apiKey, minIndex)})
	if res.Type != "ok" {
		return res, nil
	}
	var p WithdrawalsPage
	if err := res.Decode(&p); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, nil
	}
	return res, &p
}
