package loadgen

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Headers of the public API (SPEC sections 4 and 5).
const (
	keyHeader  = "x-api-key"
	idemHeader = "idempotency-key"
)

// maxAnswerBytes bounds what is read of one answer; a fills page is far
// smaller.
const maxAnswerBytes = 1 << 20

// defaultRetryAfter is the wait on a 429 without a usable Retry-After.
const defaultRetryAfter = time.Second

// client sends one trader's calls and records each attempt.
type client struct {
	http    *http.Client
	rec     *recorder
	timeout time.Duration // per request
}

// call is one API request.
type call struct {
	op     string // what the attempt is recorded under
	method string
	base   string // node base URL
	path   string
	key    string // API key, or "" for public routes
	write  bool   // sends an idempotency-key: idem, or a fresh one per attempt
	idem   string
	body   any // JSON-encoded when set
}

// outcome is what an attempt came to.
type outcome struct {
	ok bool
	// code is the refusal's code ("" when ok).
	code string
	// retryAfter is how long the server asked to wait (429 only).
	retryAfter time.Duration
	// aborted: the run was interrupted mid-request; nothing was recorded.
	aborted bool
}

// do sends c, decodes a 2xx answer into out (when set), and records the
// attempt: ok with its round trip, or an error under the body's `code`
// (http_<status> without one; CodeTransport without an answer).
func (cl *client) do(ctx context.Context, c call, out any) outcome {
	var body io.Reader
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			panic("loadgen: request body: " + err.Error())
		}
		body = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, c.method, c.base+c.path, body)
	if err != nil {
		panic("loadgen: request: " + err.Error())
	}
	req.Header.Set("User-Agent", "perpd-bench/1")
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set(keyHeader, c.key)
	}
	if c.write {
		k := c.idem
		if k == "" {
			k = newIdemKey()
		}
		req.Header.Set(idemHeader, k)
	}
	began := time.Now()
	res, err := cl.http.Do(req)
	var raw []byte
	if err == nil {
		raw, err = io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	elapsed := time.Since(began)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{aborted: true}
		}
		cl.rec.fail(c.op, CodeTransport)
		return outcome{code: CodeTransport}
	}
	if res.StatusCode/100 == 2 {
		if out != nil && json.Unmarshal(raw, out) != nil {
			cl.rec.fail(c.op, CodeMalformed)
			return outcome{code: CodeMalformed}
		}
		cl.rec.ok(c.op, elapsed)
		return outcome{ok: true}
	}
	o := outcome{code: refusalCode(res.StatusCode, raw)}
	if res.StatusCode == http.StatusTooManyRequests {
		o.retryAfter = retryAfter(res.Header.Get("Retry-After"))
	}
	cl.rec.fail(c.op, o.code)
	return o
}

// refusalCode is the `code` of an error body, or http_<status>.
func refusalCode(status int, body []byte) string {
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return e.Code
	}
	return "http_" + strconv.Itoa(status)
}

// retryAfter reads a Retry-After of whole seconds (what perpd sends).
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || s < 0 {
		return defaultRetryAfter
	}
	return max(time.Duration(s)*time.Second, defaultRetryAfter)
}

// newIdemKey is a fresh idempotency-key: 16 random bytes, never from the
// seed, so a rerun with the same seed never replays an earlier run's write.
func newIdemKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("loadgen: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// NormalizeNodes turns a --nodes list (http(s) URLs or host:port) into
// base URLs without a trailing slash.
func NormalizeNodes(list []string) ([]string, error) {
	var out []string
	for _, n := range list {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !strings.Contains(n, "://") {
			n = "http://" + n
		}
		u, err := url.Parse(n)
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", n, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("node %q is not host:port or an http(s) base URL", n)
		}
		out = append(out, strings.TrimRight(u.String(), "/"))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nodes given")
	}
	return out, nil
}
