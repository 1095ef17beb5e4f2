package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestRevokeAllButCurrentKeyReusedFromAnotherKey: which key "all but
// current" spares is the x-api-key's, not the body's. Key A revokes every
// other key under idempotency-key K; key D (minted by A afterwards) sends
// the same body under K. Before, the request hash covered only the body,
// so D got A's stored 200 {revoked: [master]} and A stayed live although
// D was told all but D were revoked. Now it is another request: 409
// idempotency_key_reused, and A's own retry still replays.
func TestRevokeAllButCurrentKeyReusedFromAnotherKey(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	keyA, _ := a.mint(master, "read", "admin-sessions")
	body := map[string]any{"allButCurrent": true}
	first := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: keyA, idem: "rv-1", body: body})
	if first.status != 200 {
		t.Fatalf("first revoke: %d %s", first.status, first.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: keyA, idem: "rv-1", body: body}); r.status != 200 || string(r.body) != string(first.body) {
		t.Fatalf("A's own retry: %d %s, want the stored %s", r.status, r.body, first.body)
	}
	keyD, _ := a.mint(keyA, "read", "admin-sessions")
	r := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: keyD, idem: "rv-1", body: body})
	if r.status != 409 || r.code() != "idempotency_key_reused" {
		t.Errorf("D's allButCurrent under A's key: %d %s, want 409 idempotency_key_reused", r.status, r.body)
	}
	if g := a.do(req{method: "GET", path: "/v1/account", key: keyA}); r.status == 200 && g.status == 200 {
		t.Errorf("D was answered 200 but key A still works")
	}
}

// TestMintUnderAnotherKeysIdempotencyKeyIsAReuse: what a mint makes
// depends on the calling key (its scopes are intersected with the
// minter's, and copied from it when the body names none), which the body
// does not say. The master mints under idempotency-key K; a delegate that
// cannot withdraw sends the same body under K. Before, the request hash
// covered only the body, so the delegate was answered the master's stored
// 201: a key "minted" with withdraw, which the delegate could never mint,
// and no key value. Now it is another request: 409
// idempotency_key_reused, and the master's own retry still replays.
func TestMintUnderAnotherKeysIdempotencyKeyIsAReuse(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	delegate, _ := a.mint(master, "read", "admin-sessions")
	body := map[string]any{"label": "bot"}
	first := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: "mint-1", body: body})
	if first.status != 201 {
		t.Fatalf("master's mint: %d %s", first.status, first.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: "mint-1", body: body}); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("master's own retry: %d %s, want the stored 201", r.status, r.body)
	}
	r := a.do(req{method: "POST", path: "/v1/sessions", key: delegate, idem: "mint-1", body: body})
	if r.status != 409 || r.code() != "idempotency_key_reused" {
		t.Errorf("the delegate's mint under the master's key: %d %s, want 409 idempotency_key_reused", r.status, r.body)
	}
}

// TestIdempotencyKeyGivenTwiceIsRefused: two idempotency-key headers on
// one request were read as the first, while a proxy or an audit log that
// keeps the last saw another key (for an order, another order id). As a
// body field given twice is refused, so is the header given twice: 400,
// nothing applied.
func TestIdempotencyKeyGivenTwiceIsRefused(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	hr, err := http.NewRequest("POST", a.http.URL+"/v1/faucet", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set(KeyHeader, master)
	hr.Header.Add(IdemHeader, "faucet-a")
	hr.Header.Add(IdemHeader, "faucet-b")
	res, err := a.http.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if r := (resp{status: res.StatusCode, body: b}); r.status != 400 || r.code() != "validation" {
		t.Fatalf("two idempotency-key headers: %d %s, want 400 validation", r.status, r.body)
	}
	// Nothing was applied: the first key is still free for a grant.
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: "faucet-a", body: map[string]any{}}); r.status != 201 || r.header.Get("Idempotent-Replayed") == "true" {
		t.Fatalf("faucet under the first key afterwards: %d %s replayed=%q, want a fresh 201", r.status, r.body, r.header.Get("Idempotent-Replayed"))
	}
}

// TestWithdrawalRetryWithAnotherConfirmTokenReplays: a confirmToken says
// "I saw the quote", it is no part of what the withdrawal is (the state
// machine's late-retry check compares amount and destination only). A
// client whose answer was lost cannot tell whether its single-use token
// was spent, so it may quote again and retry with a fresh token, or
// without one. Before, the request hash covered the token: that retry
// was 409 idempotency_key_reused, and a client taking the key for burned
// and retrying under a new one withdrew twice. Now it replays the first
// 201, and the balance moves once.
func TestWithdrawalRetryWithAnotherConfirmTokenReplays(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.funded()
	dest := a.sparkAddr("first-seen-retry")
	amount := strconv.Itoa(overThreshold)
	t1 := a.quote(key, map[string]any{"toAddress": dest, "amountMsat": amount})["confirmToken"]
	t2 := a.quote(key, map[string]any{"toAddress": dest, "amountMsat": amount})["confirmToken"]
	if t1 == nil || t2 == nil || t1 == t2 {
		t.Fatalf("tokens %v, %v", t1, t2)
	}
	free0 := a.free(acct)
	send := func(tok any) resp {
		body := map[string]any{"toAddress": dest, "amountMsat": amount}
		if tok != nil {
			body["confirmToken"] = tok
		}
		return a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: "wd-retry-1", body: body})
	}
	first := send(t1)
	if first.status != 201 {
		t.Fatalf("withdrawal: %d %s", first.status, first.body)
	}
	for _, tok := range []any{t2, nil} {
		if r := send(tok); r.status != 201 || string(r.body) != string(first.body) {
			t.Errorf("retry with token %v: %d %s, want the first 201 %s", tok, r.status, r.body, first.body)
		}
	}
	if got := free0 - a.free(acct); got != int64(overThreshold)+10_000 {
		t.Fatalf("the balance moved %d msat, want one withdrawal and its fee", got)
	}
	// Another amount under the key is still a reuse.
	r := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: "wd-retry-1",
		body: map[string]any{"toAddress": dest, "amountMsat": strconv.Itoa(overThreshold + 1000)}})
	if r.status != 409 || r.code() != "idempotency_key_reused" {
		t.Fatalf("another amount under the key: %d %s", r.status, r.body)
	}
}
