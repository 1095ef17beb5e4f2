package httpapi

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
)

// capHeaders checks a 429 of an hourly cap that apply refused: its
// X-RateLimit headers describe that cap (limit, none remaining, reset when
// the grant or signup that frees a place leaves the hour), not the token
// bucket the request drew, and Reset and Retry-After name the same
// instant. It returns Reset.
func capHeaders(t *testing.T, r resp, limit int, reopensMs int64) int64 {
	t.Helper()
	if r.status != 429 || r.code() != "rate_limited" {
		t.Fatalf("over the cap: %d %s", r.status, r.body)
	}
	h := r.header
	retry, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
	if err != nil {
		t.Fatalf("Retry-After %q", h.Get("Retry-After"))
	}
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		t.Fatalf("X-RateLimit-Reset %q", h.Get("X-RateLimit-Reset"))
	}
	if got := h.Get("X-RateLimit-Limit"); got != strconv.Itoa(limit) {
		t.Errorf("X-RateLimit-Limit %q, want the cap's %d", got, limit)
	}
	if got := h.Get("X-RateLimit-Remaining"); got != "0" {
		t.Errorf("X-RateLimit-Remaining %q on a refusal of the cap, want 0", got)
	}
	if want := (reopensMs + 999) / 1000; reset != want {
		t.Errorf("X-RateLimit-Reset %d, want %d: the second the cap admits again", reset, want)
	}
	if now := time.Now().Unix(); reset < now+retry-2 || reset > now+retry+2 {
		t.Errorf("X-RateLimit-Reset %d is %ds from now, Retry-After says %ds", reset, reset-now, retry)
	}
	return reset
}

// A faucet grant over the hourly cap (3 here) is refused by apply, after
// the read bucket admitted the request: the 429 said Limit 600, Remaining
// 119 and Reset now beside Retry-After ~3600, so a client that trusted the
// rate headers retried at once, over and over.
func TestFaucetCapAnswerDescribesTheCap(t *testing.T) {
	a := newTestAPI(t)
	master, acct := a.signup()
	for range 3 {
		if r := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: nextIdem(), body: "{}"}); r.status != 201 {
			t.Fatalf("grant: %d %s", r.status, r.body)
		}
	}
	r := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: nextIdem(), body: "{}"})
	var oldestMs int64
	a.node.Machine().Read(func(st *fsm.State, _ uint64) { oldestMs = st.Access.Accounts[acct].FaucetGrantsTsMs[0] })
	capHeaders(t, r, 3, oldestMs+time.Hour.Milliseconds())
}

// The venue-wide signup cap, the other 429 apply gives, likewise.
func TestSignupCapAnswerDescribesTheCap(t *testing.T) {
	a, r := signupPastTheCap(t)
	var reopensMs int64
	a.node.Machine().Read(func(st *fsm.State, _ uint64) { reopensMs = st.Access.SignupTsMs[0] + time.Hour.Milliseconds() })
	capHeaders(t, r, 2, reopensMs)
}

// The description says so: the faucet's and signup's 429 name the cap's
// headers, and every 429 declares the rate headers it carries.
func TestCapAnswersAreDescribed(t *testing.T) {
	a := newTestAPI(t)
	doc := a.srv.OpenAPI()
	for _, path := range []string{"/v1/faucet", "/v1/signup"} {
		op := doc["paths"].(map[string]any)[path].(map[string]any)["post"].(map[string]any)
		r429 := op["responses"].(map[string]any)["429"].(map[string]any)
		desc := r429["description"].(string)
		for _, want := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining 0", "X-RateLimit-Reset", "Retry-After"} {
			if !strings.Contains(desc, want) {
				t.Errorf("%s 429 %q does not say what %s is", path, desc, want)
			}
		}
		headers := r429["headers"].(map[string]any)
		for _, h := range []string{"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if headers[h] == nil {
				t.Errorf("%s 429 does not declare %s", path, h)
			}
		}
	}
}
