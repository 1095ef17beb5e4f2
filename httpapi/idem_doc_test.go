package httpapi

import (
	"strings"
	"testing"
)

// idemParamDoc is the description of a route's idempotency-key header in
// /openapi.json.
func idemParamDoc(t *testing.T, doc map[string]any, method, path string) string {
	t.Helper()
	op := doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		if pm := p.(map[string]any); pm["name"] == IdemHeader {
			return pm["description"].(string)
		}
	}
	t.Fatalf("%s %s has no %s parameter", method, path, IdemHeader)
	return ""
}

// What a retry with the same idempotency-key does, as the server does it,
// is what /openapi.json and llms*.txt say. They promised "a retry with the
// same key and body returns the original answer" on every idem route, but
// a signup retry answers 409 conflict and a mint retry omits the key (a
// key value is returned once and never stored), and a refused request
// binds nothing, so its retry is judged afresh and may succeed. And a
// mint without scopes copies every scope of the minting key, withdraw
// included, which MintRequest did not say.
func TestIdempotencyDescriptionsSayWhatRetriesDo(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	doc := a.srv.OpenAPI()

	// Signup: the retry is 409 conflict, with no key.
	idem := nextIdem()
	if r := a.do(req{method: "POST", path: "/v1/signup", idem: idem, body: "{}"}); r.status != 201 {
		t.Fatalf("signup: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/signup", idem: idem, body: "{}"}); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("signup retry: %d %s", r.status, r.body)
	}
	if d := idemParamDoc(t, doc, "POST", "/v1/signup"); !strings.Contains(d, "409 conflict") || strings.Contains(d, "original answer") {
		t.Errorf("POST /v1/signup idempotency-key: %q does not say a retry answers 409 conflict", d)
	}

	// Mint: the retry replays the 201 without apiKey.
	master, _ := a.tradingAccount()
	idem = nextIdem()
	if r := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: idem, body: `{"label":"bot"}`}); r.status != 201 {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	r := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: idem, body: `{"label":"bot"}`})
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || r.json(t)["apiKey"] != nil {
		t.Fatalf("mint retry: %d %s", r.status, r.body)
	}
	if d := idemParamDoc(t, doc, "POST", "/v1/sessions"); !strings.Contains(d, "without apiKey") || strings.Contains(d, "original answer") {
		t.Errorf("POST /v1/sessions idempotency-key: %q does not say a retry comes without apiKey", d)
	}

	// Scopes omitted: every scope of the minting key, withdraw included.
	scopes := r.json(t)["scopes"].([]any)
	var names []string
	for _, s := range scopes {
		names = append(names, s.(string))
	}
	if !strings.Contains(strings.Join(names, ","), "withdraw") {
		t.Fatalf("a mint without scopes by the master key got %v", names)
	}
	mintReq := doc["components"].(map[string]any)["schemas"].(map[string]any)["MintRequest"].(map[string]any)
	sd, _ := mintReq["properties"].(map[string]any)["scopes"].(map[string]any)["description"].(string)
	if !strings.Contains(sd, "Omitted") || !strings.Contains(sd, "withdraw") {
		t.Errorf("MintRequest.scopes %q does not say an omitted list copies the minting key's scopes, withdraw included", sd)
	}

	// A refusal binds nothing: the same key and body, once the oracle has
	// printed, places the order.
	idem = nextIdem()
	body := orderBody("ETH-PERP", "buy", "market", "1", nil)
	wantCode(t, a.do(req{method: "POST", path: "/v1/orders", key: master, idem: idem, body: body}), 400, "oracle_stale")
	a.freshPrices()
	if r := a.do(req{method: "POST", path: "/v1/orders", key: master, idem: idem, body: body}); r.status != 201 {
		t.Fatalf("retry after the refusal: %d %s", r.status, r.body)
	}
	for _, rt := range a.srv.Routes {
		if !rt.Idem && !rt.IdemOptional {
			continue
		}
		if d := idemParamDoc(t, doc, rt.Method, openapiPath(rt.Path)); !strings.Contains(d, "A refused request does not bind its key") {
			t.Errorf("%s %s idempotency-key: %q does not say a refusal leaves the key free", rt.Method, rt.Path, d)
		}
	}

	// The agent indexes say the same.
	short := string(a.do(req{method: "GET", path: "/llms.txt"}).body)
	full := string(a.do(req{method: "GET", path: "/llms-full.txt"}).body)
	for name, txt := range map[string]string{"llms.txt": short, "llms-full.txt": full} {
		if strings.Contains(txt, "returns the original answer") {
			t.Errorf("%s still promises the original answer on every idem route", name)
		}
		if !strings.Contains(txt, "does not bind its key") {
			t.Errorf("%s does not say a refusal leaves the key free", name)
		}
	}
	for _, want := range []string{"409 conflict", "without apiKey"} {
		if !strings.Contains(full, want) {
			t.Errorf("llms-full.txt lacks %q", want)
		}
	}
}
