package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// WithdrawRequest is the body of POST /v1/withdrawals to a Spark address.
type WithdrawRequest struct {
	AmountMsat string `json:"amountMsat"`
	ToAddress  string `json:"toAddress"`
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
	RailRef        *string `json:"railRef"`
	Seq            string  `json:"seq"`
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
