package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/perpd/perpd/jepsen/history"
)

// DefaultTimeout bounds one request. It is above the node's own propose
// timeout (5 s), so a write the node gives up on answers 503 before the
// client gives up on it.
const DefaultTimeout = 7 * time.Second

// maxBody bounds an answer the client reads.
const maxBody = 4 << 20

// Client sends requests to perpd nodes.
type Client struct {
	HTTP   *http.Client
	scheme string // "http" unless UseTLS
}

// UseTLS makes c speak HTTPS with cfg (the admin listener under mutual TLS).
func (c *Client) UseTLS(cfg *tls.Config) {
	c.scheme = "https"
	c.HTTP.Transport.(*http.Transport).TLSClientConfig = cfg
}

// New returns a client whose requests time out after timeout.
func New(timeout time.Duration) *Client { return NewFrom(timeout, nil) }

// NewFrom is New whose connections leave from the local address from (nil:
// the system's choice). The venue meters some budgets per client address.
func NewFrom(timeout time.Duration, from net.IP) *Client {
	d := &net.Dialer{Timeout: 2 * time.Second}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	return &Client{HTTP: &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConnsPerHost: 32,
			IdleConnTimeout:     30 * time.Second,
		},
	}}
}

// Close drops idle connections.
func (c *Client) Close() { c.HTTP.CloseIdleConnections() }

// Request is one HTTP call.
type Request struct {
	Method  string
	Addr    string // host:port
	Path    string
	Header  map[string]string
	Body    any // JSON-encoded when not nil
	IsWrite bool
}

// Result is a classified answer.
type Result struct {
	Type      history.Type
	Status    int
	Code      string
	Error     string
	RaftIndex uint64
	Body      []byte
}

// ErrorBody is the refusal body of SPEC section 7.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Do sends req and classifies the answer. A request that never reached the
// node (refused connection) is a fail; a request that may have reached it
// and got no answer is info when it writes and fail when it only reads.
func (c *Client) Do(ctx context.Context, req Request) Result {
	var body io.Reader
	if req.Body != nil {
		b, err := json.Marshal(req.Body)
		if err != nil {
			return Result{Type: history.Fail, Error: err.Error()}
		}
		body = bytes.NewReader(b)
	}
	scheme := c.scheme
	if scheme == "" {
		scheme = "http"
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, scheme+"://"+req.Addr+req.Path, body)
	if err != nil {
		return Result{Type: history.Fail, Error: err.Error()}
	}
	if req.Body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	// Go's transport retries a request that carries an Idempotency-Key
	// header after a network error on a reused connection: the attempt
	// that reached the node may end in an error of the retry's dial. Only
	// a request no attempt ever wrote can be called never sent.
	var wrote atomic.Int32 // attempts written
	hr = hr.WithContext(httptrace.WithClientTrace(hr.Context(), &httptrace.ClientTrace{
		WroteHeaders: func() { wrote.Add(1) },
	}))
	resp, err := c.HTTP.Do(hr)
	if err != nil {
		return Result{Type: transportOutcome(err, req.IsWrite, wrote.Load() > 0), Error: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	res := Result{Status: resp.StatusCode, Body: b}
	res.RaftIndex, _ = strconv.ParseUint(resp.Header.Get("X-Raft-Index"), 10, 64)
	if err != nil {
		res.Type, res.Error = transportOutcome(err, req.IsWrite, true), err.Error()
		return res
	}
	if resp.StatusCode/100 == 2 {
		res.Type = history.OK
		return res
	}
	var eb ErrorBody
	if json.Unmarshal(b, &eb) == nil {
		res.Code, res.Error = eb.Code, eb.Error
	} else {
		res.Error = strings.TrimSpace(string(b))
	}
	res.Type = statusOutcome(resp.StatusCode, req.IsWrite, resp.Header.Get(HeaderNotApplied) == "1" && wrote.Load() == 1)
	return res
}

// HeaderNotApplied is httpapi.HeaderNotApplied: the node refused the
// request before proposing anything (a halted replica, or one that has not
// applied the genesis yet).
const HeaderNotApplied = "X-Not-Applied"

// statusOutcome: a refusal (4xx) was decided before or by the state
// machine, so nothing was applied. A 5xx from a write means the node lost
// track of it (503 unavailable after the propose timeout): it may have
// been committed, unless notApplied: the node said it proposed nothing,
// and the transport sent the request only once (Go's transport resends a
// request with an idempotency key after a network error on a reused
// connection, and an earlier copy may have reached a node and been
// proposed: then the header speaks only for the last copy).
func statusOutcome(status int, isWrite, notApplied bool) history.Type {
	if status >= 500 && isWrite && !notApplied {
		return history.Info
	}
	return history.Fail
}

// transportOutcome classifies a request that got no answer: a read, or a
// write no attempt of which was written to a connection (a refused
// dial), failed; any other write may have been applied.
func transportOutcome(err error, isWrite, written bool) history.Type {
	if !isWrite || (!written && neverSent(err)) {
		return history.Fail
	}
	return history.Info
}

// neverSent reports whether err happened before any byte could reach the
// server: a refused or failed dial.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Decode unmarshals the answer's body.
func (r Result) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %d answer: %w", r.Status, err)
	}
	return nil
}

// Fill copies the result's outcome fields into a history completion.
func (r Result) Fill(op *history.Op) {
	op.Type, op.Status, op.Code, op.Error, op.RaftIndex = r.Type, r.Status, r.Code, r.Error, r.RaftIndex
}
