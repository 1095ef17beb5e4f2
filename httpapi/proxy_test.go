package httpapi

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/perpd/perpd/node"
)

// tinyOrder makes the order and signup budgets small and slow, so a test's
// count of admitted signups is the burst whatever the machine's speed.
func tinyOrder() map[string]Budget {
	b := map[string]Budget{}
	for k, v := range Budgets {
		b[k] = v
	}
	b["order"] = Budget{Name: "order", PerKeyPerMin: 1, KeyBurst: 5, PerAccountPerMin: 1, AccountBurst: 5}
	// Signups draw a budget of their own, as small.
	b["signup"] = Budget{Name: "signup", PerKeyPerMin: 1, KeyBurst: 5, PerAccountPerMin: 1, AccountBurst: 5}
	return b
}

// signups sends n signups, header(i) naming the headers of the i-th, and
// counts the admitted ones.
func (a *testAPI) signups(n int, header func(i int) map[string]string) int {
	a.t.Helper()
	ok := 0
	for i := 0; i < n; i++ {
		r := a.do(req{method: "POST", path: "/v1/signup", idem: nextIdem(), body: map[string]any{}, header: header(i)})
		switch r.status {
		case 201:
			ok++
		case 429:
		default:
			a.t.Fatalf("signup %d: %d %s", i, r.status, r.body)
		}
	}
	return ok
}

func spoofed(name string) func(i int) map[string]string {
	return func(i int) map[string]string {
		return map[string]string{name: fmt.Sprintf("203.0.%d.%d", i/250, i%250+1)}
	}
}

// Forwarding headers from a peer that is not a configured proxy do not
// name the client: varied X-Forwarded-For or X-Real-IP values get no more
// signups than the same requests without them.
func TestSpoofedForwardingHeadersRaiseNoBudget(t *testing.T) {
	plain := newTestAPIWith(t, []Option{WithBudgets(tinyOrder())})
	base := plain.signups(200, func(int) map[string]string { return nil })
	if base >= 200 {
		t.Fatalf("the budget admitted all %d plain signups", base)
	}
	for _, h := range []string{"X-Forwarded-For", "X-Real-IP"} {
		a := newTestAPIWith(t, []Option{WithBudgets(tinyOrder())})
		if got := a.signups(200, spoofed(h)); got > base {
			t.Fatalf("%s from an untrusted peer: %d of 200 signups admitted, %d without the header", h, got, base)
		}
	}
}

// From a configured proxy, the forwarding headers name the client: each
// forwarded address has its own budget.
func TestTrustedProxyForwardingHeadersAreHonoured(t *testing.T) {
	const n = 12 // more than the burst of one address
	for _, h := range []string{"X-Forwarded-For", "X-Real-IP"} {
		a := newTestAPIWith(t, []Option{WithBudgets(tinyOrder()), WithTrustedProxies([]string{"127.0.0.1"})})
		if got := a.signups(n, spoofed(h)); got != n {
			t.Fatalf("%s from a trusted proxy: %d of %d signups from distinct clients admitted", h, got, n)
		}
		// The proxy's own address still has its single budget.
		if got := a.signups(n, func(int) map[string]string { return nil }); got >= n {
			t.Fatalf("unforwarded requests from the proxy: %d of %d admitted", got, n)
		}
	}
}

func TestValidateTrustedProxies(t *testing.T) {
	if err := ValidateTrustedProxies([]string{"10.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"}); err != nil {
		t.Fatalf("valid list refused: %v", err)
	}
	for _, bad := range []string{"10.0.0", "proxy.local", "10.0.0.0/33", ""} {
		if err := ValidateTrustedProxies([]string{bad}); err == nil {
			t.Errorf("%q accepted as a trusted proxy", bad)
		}
	}
}

// signupPastTheCap fills a node's venue-wide signup cap of 2 and answers
// the signup after it.
func signupPastTheCap(t *testing.T) (*testAPI, resp) {
	t.Helper()
	a := newTestAPI(t, func(c *node.Config) { c.SignupsPerHour = 2 })
	for i := range 2 {
		if r := a.do(req{method: "POST", path: "/v1/signup", idem: fmt.Sprint("cap-", i), body: "{}"}); r.status != 201 {
			t.Fatalf("signup %d within the cap: %d %s", i, r.status, r.body)
		}
	}
	return a, a.do(req{method: "POST", path: "/v1/signup", idem: "cap-over", body: "{}"})
}

// The venue-wide signup cap answers 429 with Retry-After, like every 429,
// saying when the oldest signup leaves the hour.
func TestSignupCapAnswers429WithRetryAfter(t *testing.T) {
	_, r := signupPastTheCap(t)
	if r.status != 429 || r.json(t)["code"] != "rate_limited" {
		t.Fatalf("signup over the cap: %d %s", r.status, r.body)
	}
	if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 3500 || secs > 3600 {
		t.Fatalf("Retry-After %q, want about an hour", r.header.Get("Retry-After"))
	}
}
