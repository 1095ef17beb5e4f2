package httpapi

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
)

// probeBody is a body each keyed write route refuses with 400 once past
// authentication, so the matrix can tell "allowed" without side effects
// that would skew later rows (like filling the live-key cap).
var probeBody = map[string]string{
	"/v1/sessions":        `{"scopes":[]}`,
	"/v1/sessions/revoke": `{}`,
}

// TestAuthorizationMatrix walks every keyed route with a key of every scope
// combination and checks 401 without or with a bad key, 403
// insufficient_scope without the route's scope, and admission with it.
func TestAuthorizationMatrix(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	type keyed struct {
		key    string
		scopes access.Scope
	}
	var keys []keyed
	for combo := access.Scope(1); combo <= access.ScopeAll; combo++ {
		k, _ := a.mint(master, combo.Names()...)
		keys = append(keys, keyed{k, combo})
	}
	checked, routes := 0, 0
	for _, r := range a.srv.Routes {
		if r.Auth != Keyed {
			continue
		}
		routes++
		path := strings.ReplaceAll(r.Path, ":id", "x")
		body := probeBody[r.Path]
		if body == "" && r.Method != "GET" {
			body = `{}`
		}
		if st := a.do(req{method: r.Method, path: path, idem: nextIdem(), body: body}); st.status != 401 || st.code() != "unauthorized" {
			t.Errorf("%s %s without key: %d %s", r.Method, path, st.status, st.body)
		}
		if st := a.do(req{method: r.Method, path: path, key: "pdk_not_a_key", idem: nextIdem(), body: body}); st.status != 401 {
			t.Errorf("%s %s with a bad key: %d", r.Method, path, st.status)
		}
		need := access.ParseScope(r.Scope)
		for _, k := range keys {
			st := a.do(req{method: r.Method, path: path, key: k.key, idem: nextIdem(), body: body})
			allowed := k.scopes.Has(need)
			switch {
			case allowed && (st.status == 401 || st.status == 403):
				t.Errorf("%s %s with scopes %v: refused %d %s", r.Method, path, k.scopes, st.status, st.body)
			case !allowed && (st.status != 403 || st.code() != "insufficient_scope"):
				t.Errorf("%s %s with scopes %v: want 403 insufficient_scope, got %d %s", r.Method, path, k.scopes, st.status, st.body)
			}
			checked++
		}
	}
	if routes < 7 || checked != routes*15 {
		t.Fatalf("matrix incomplete: %d routes, %d checks", routes, checked)
	}
}

// TestScopesAreIndependent: trade does not imply read (SPEC section 5).
func TestScopesAreIndependent(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	trade, _ := a.mint(master, "trade")
	if r := a.do(req{method: "GET", path: "/v1/account", key: trade}); r.status != 403 || r.code() != "insufficient_scope" {
		t.Fatalf("a trade-only key read the account: %d %s", r.status, r.body)
	}
}

// TestDelegateCannotMintMoreCapableKey: minting intersects scopes.
func TestDelegateCannotMintMoreCapableKey(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	admin, _ := a.mint(master, "read", "admin-sessions")
	r := a.do(req{method: "POST", path: "/v1/sessions", key: admin, idem: nextIdem(),
		body: map[string]any{"scopes": []string{"read", "trade", "withdraw"}}})
	if r.status != 201 {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	got := r.json(t)["scopes"].([]any)
	if len(got) != 1 || got[0] != "read" {
		t.Fatalf("scopes not intersected with the minter's: %v", got)
	}
	rt := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: nextIdem(), body: map[string]any{}})
	if rt.status != 201 || len(rt.json(t)["scopes"].([]any)) != 4 {
		t.Fatalf("omitted scopes must copy the minter's: %d %s", rt.status, rt.body)
	}
}

// TestKeyInURLRefused: a key in the query string is refused, never honoured.
func TestKeyInURLRefused(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	for _, q := range []string{"api_key", "apiKey", "x-api-key", "key"} {
		r := a.do(req{method: "GET", path: "/v1/account?" + q + "=" + master})
		if r.status != 401 || r.code() != "unauthorized" {
			t.Errorf("?%s=: %d %s", q, r.status, r.body)
		}
		r = a.do(req{method: "GET", path: "/v1/account?" + q + "=" + master, key: master})
		if r.status != 401 {
			t.Errorf("?%s= with a header key too must still be refused: %d", q, r.status)
		}
	}
}
