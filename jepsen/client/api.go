package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Consistency headers (SPEC and jepsen/README.md).
const (
	HeaderConsistency = "X-Consistency"
	HeaderMinIndex    = "X-Min-Index"
	Linearizable      = "linearizable"
)

// SignupAnswer is the body of a 201 signup.
type SignupAnswer struct {
	APIKey      string `json:"apiKey"`
	AccountID   string `json:"accountId"`
	RailAddress string `json:"railAddress"`
}

// Signup creates an account.
func (c *Client) Signup(ctx context.Context, addr, idemKey string) (Result, *SignupAnswer) {
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: "/v1/signup",
		Header: map[string]string{"idempotency-key": idemKey}, Body: struct{}{}, IsWrite: true})
	if res.Type != "ok" {
		return res, nil
	}
	var a SignupAnswer
	if err := res.Decode(&a); err != nil || a.APIKey == "" || a.AccountID == "" {
		return malformed(res, err, "signup answer without apiKey or accountId"), nil
	}
	return res, &a
}

// malformed turns an ok answer the client cannot read into info: the
// write happened, but what it returned is unknown.
func malformed(res Result, err error, why string) Result {
	res.Type = "info"
	if err != nil {
		res.Error = err.Error()
	} else {
		res.Error = why
	}
	return res
}

// FaucetAnswer is the body of a 201 faucet grant.
type FaucetAnswer struct {
	CreditedMsat            string `json:"creditedMsat"`
	GrantsRemainingThisHour int    `json:"grantsRemainingThisHour"`
}

// Faucet asks for a testnet grant; it returns the credited amount.
func (c *Client) Faucet(ctx context.Context, addr, apiKey, idemKey string) (Result, int64) {
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: "/v1/faucet",
		Header: map[string]string{"idempotency-key": idemKey, "x-api-key": apiKey}, Body: struct{}{}, IsWrite: true})
	if res.Type != "ok" {
		return res, 0
	}
	var a FaucetAnswer
	if err := res.Decode(&a); err != nil {
		return malformed(res, err, ""), 0
	}
	v, err := strconv.ParseInt(a.CreditedMsat, 10, 64)
	if err != nil || v <= 0 {
		return malformed(res, err, "creditedMsat is not a positive decimal integer"), 0
	}
	return res, v
}

// AccountAnswer is the part of GET /v1/account the harness checks.
type AccountAnswer struct {
	AccountID    string `json:"accountId"`
	FreeMsat     string `json:"freeMsat"`
	ReservedMsat string `json:"reservedMsat"`
}

// Account reads the account's free balance, linearizably when asked, and
// not before the node applied minIndex (0: no minimum).
func (c *Client) Account(ctx context.Context, addr, apiKey string, linearizable bool, minIndex uint64) (Result, int64) {
	h := map[string]string{"x-api-key": apiKey}
	if linearizable {
		h[HeaderConsistency] = Linearizable
	}
	if minIndex > 0 {
		h[HeaderMinIndex] = strconv.FormatUint(minIndex, 10)
	}
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/account", Header: h})
	if res.Type != "ok" {
		return res, 0
	}
	var a AccountAnswer
	if err := res.Decode(&a); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, 0
	}
	v, err := strconv.ParseInt(a.FreeMsat, 10, 64)
	if err != nil {
		res.Type, res.Error = "fail", "freeMsat is not a decimal integer"
		return res, 0
	}
	return res, v
}

// Deposit is one record of GET /v1/deposits.
type Deposit struct {
	AccountID  string `json:"accountId"`
	AmountMsat string `json:"amountMsat"`
	FeeMsat    string `json:"feeMsat"`
	RailRef    string `json:"railRef"`
	Seq        string `json:"seq"`
	TsMs       string `json:"tsMs"`
}

// CreditedMsat is what the deposit added to the free balance.
func (d Deposit) CreditedMsat() (int64, error) {
	a, err := strconv.ParseInt(d.AmountMsat, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amountMsat %q: %w", d.AmountMsat, err)
	}
	f := int64(0)
	if d.FeeMsat != "" {
		if f, err = strconv.ParseInt(d.FeeMsat, 10, 64); err != nil {
			return 0, fmt.Errorf("feeMsat %q: %w", d.FeeMsat, err)
		}
	}
	return a - f, nil
}

// DepositsPage is the body of GET /v1/deposits.
type DepositsPage struct {
	Deposits      []Deposit `json:"deposits"`
	NextBeforeSeq *string   `json:"nextBeforeSeq"`
}

// Deposits reads one page, newest first.
func (c *Client) Deposits(ctx context.Context, addr, apiKey, beforeSeq string, limit int, minIndex uint64) (Result, *DepositsPage) {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(limit))
	if beforeSeq != "" {
		q.Set("beforeSeq", beforeSeq)
	}
	h := map[string]string{"x-api-key": apiKey}
	if minIndex > 0 {
		h[HeaderMinIndex] = strconv.FormatUint(minIndex, 10)
	}
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/deposits?" + q.Encode(), Header: h})
	if res.Type != "ok" {
		return res, nil
	}
	var p DepositsPage
	if err := res.Decode(&p); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, nil
	}
	return res, &p
}

// MintAnswer is the body of a 201 session mint.
type MintAnswer struct {
	APIKey string   `json:"apiKey"`
	KeyID  string   `json:"keyId"`
	Scopes []string `json:"scopes"`
}

// MintRequest is the body of POST /v1/sessions.
type MintRequest struct {
	Label  string   `json:"label"`
	Scopes []string `json:"scopes"`
}

// MintSession mints a delegate key.
func (c *Client) MintSession(ctx context.Context, addr, apiKey, idemKey string, body MintRequest) (Result, *MintAnswer) {
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: "/v1/sessions",
		Header: map[string]string{"idempotency-key": idemKey, "x-api-key": apiKey}, Body: body, IsWrite: true})
	if res.Type != "ok" {
		return res, nil
	}
	var a MintAnswer
	if err := res.Decode(&a); err != nil || a.KeyID == "" {
		return malformed(res, err, "mint answer without keyId"), nil
	}
	return res, &a
}

// Session is one listed key.
type Session struct {
	KeyID       string   `json:"keyId"`
	AccountID   string   `json:"accountId"`
	Label       string   `json:"label"`
	Scopes      []string `json:"scopes"`
	CreatedTsMs string   `json:"createdTsMs"`
	RevokedTsMs *string  `json:"revokedTsMs"`
}

// SessionsList is the body of GET /v1/sessions.
type SessionsList struct {
	Sessions []Session `json:"sessions"`
}

// Sessions lists the account's keys.
func (c *Client) Sessions(ctx context.Context, addr, apiKey string, minIndex uint64) (Result, *SessionsList) {
	h := map[string]string{"x-api-key": apiKey}
	if minIndex > 0 {
		h[HeaderMinIndex] = strconv.FormatUint(minIndex, 10)
	}
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/sessions", Header: h})
	if res.Type != "ok" {
		return res, nil
	}
	var l SessionsList
	if err := res.Decode(&l); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, nil
	}
	return res, &l
}

// Healthz asks whether the node knows a leader.
func (c *Client) Healthz(ctx context.Context, addr string) Result {
	return c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/healthz"})
}

// Probe reports whether a public route exists (anything but 404 on an
// unknown route), to find which endpoints the build under test serves.
func (c *Client) Probe(ctx context.Context, addr, method, path string) bool {
	res := c.Do(ctx, Request{Method: method, Addr: addr, Path: path, Body: struct{}{}})
	return res.Status != 0 && !(res.Status == http.StatusNotFound && res.Code == "not_found" && strings.Contains(res.Error, "route"))
}
