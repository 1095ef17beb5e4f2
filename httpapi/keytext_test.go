package httpapi

import (
	"reflect"
	"strings"
	"testing"
)

// Free text a client sends (a key's label, an invoice memo, a promoter's
// plan, channel and code label) is kept as it is: in the log, in the state,
// in GET /v1/sessions for every key of the account, in a BOLT11 invoice
// its payer reads. An API key pasted into one would be stored in clear,
// against the rule that a key enters the log only as its hash (the
// idempotency-key and X-Request-Id are already refused or dropped when
// shaped like one). An attacks review (2026-11-27) minted a read-only key
// labelled with the master key: 201, and the master key was then listed
// to every delegate of the account.
func TestAKeyInFreeTextIsRefused(t *testing.T) {
	a, logs, _ := newLoggedAPI(t)
	key, _ := a.signup()
	hex := strings.TrimPrefix(key, keyPrefix)
	promoter := func(plan, url, audience string) map[string]any {
		return map[string]any{"displayName": "Bob", "plan": plan, "jurisdictions": []string{"US"}, "acceptedTermsVersion": "2026-11",
			"channels": []map[string]any{{"kind": "website", "url": url, "audience": audience}}}
	}
	for _, c := range []struct {
		path  string
		body  any
		field string
	}{
		{"/v1/sessions", map[string]any{"label": "backup " + key, "scopes": []string{"read"}}, "label"},
		{"/v1/sessions", map[string]any{"label": strings.ToUpper(key)}, "label"},
		{"/v1/deposit-invoices", map[string]any{"memo": "for " + key}, "memo"},
		{"/v1/promoter/apply", promoter("my key is "+key, "https://example.com/", "devs"), "plan"},
		{"/v1/promoter/apply", promoter("a plan", "https://example.com/?k="+key, "devs"), "channels[0].url"},
		{"/v1/promoter/codes", map[string]any{"code": "ABCD", "label": key, "kickbackQ9": "0"}, "label"},
	} {
		r := a.do(req{method: "POST", path: c.path, key: key, idem: nextIdem(), body: c.body})
		if r.status != 400 || r.code() != "validation" || !strings.Contains(string(r.body), "field "+c.field+":") {
			t.Errorf("POST %s %v: %d %s", c.path, c.field, r.status, r.body)
		}
		if strings.Contains(strings.ToLower(string(r.body)), hex) {
			t.Errorf("POST %s: the refusal echoes the key: %s", c.path, r.body)
		}
	}
	if strings.Contains(strings.ToLower(logs.String()), hex) {
		t.Fatalf("the key reached the log")
	}
	// Text that only looks a little like a key passes.
	if r := a.do(req{method: "POST", path: "/v1/sessions", key: key, idem: nextIdem(),
		body: map[string]any{"label": "pdk_ bot " + hex[:40], "scopes": []string{"read"}}}); r.status != 201 {
		t.Fatalf("a label that is no key: %d %s", r.status, r.body)
	}
	// The order path pays nothing for the check: its request holds no
	// free text.
	if hasFreeText(reflect.TypeOf(OrderRequest{})) {
		t.Fatal("OrderRequest is walked for free text")
	}
	if !hasFreeText(reflect.TypeOf(PromoterApplyRequest{})) {
		t.Fatal("PromoterApplyRequest is not walked")
	}
}

// Free text with control or bidirectional formatting characters is
// refused, naming the field (before, a key's label, an invoice memo or a
// promoter's plan took an escape sequence, a NUL or a right-to-left
// override and showed it to others: to every key of the account, to the
// payer of an invoice, to an operator's terminal). Tab and line breaks
// stay allowed.
func TestControlCharactersInFreeTextAreRefused(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	promoter := func(plan, audience string) map[string]any {
		return map[string]any{"displayName": "Bob", "plan": plan, "jurisdictions": []string{"US"}, "acceptedTermsVersion": "2026-11",
			"channels": []map[string]any{{"kind": "website", "url": "https://example.com/", "audience": audience}}}
	}
	for _, c := range []struct {
		path  string
		body  any
		field string
	}{
		{"/v1/sessions", map[string]any{"label": "bot\x1b[2J\x1b[1;1Hroot", "scopes": []string{"read"}}, "label"},
		{"/v1/sessions", map[string]any{"label": "bot\x00", "scopes": []string{"read"}}, "label"},
		{"/v1/deposit-invoices", map[string]any{"memo": "pay \u202egnp.exe"}, "memo"},
		{"/v1/deposit-invoices", map[string]any{"memo": "next\u0085line"}, "memo"},
		{"/v1/promoter/apply", promoter("a plan", "devs \u2066x\u2069"), "channels[0].audience"},
		{"/v1/promoter/apply", promoter("a\x07plan", "devs"), "plan"},
	} {
		r := a.do(req{method: "POST", path: c.path, key: key, idem: nextIdem(), body: c.body})
		if r.status != 400 || r.code() != "validation" || !strings.Contains(string(r.body), "field "+c.field+":") {
			t.Errorf("POST %s %v: %d %s", c.path, c.field, r.status, r.body)
		}
	}
	if r := a.do(req{method: "POST", path: "/v1/sessions", key: key, idem: nextIdem(),
		body: map[string]any{"label": "bot\tone", "scopes": []string{"read"}}}); r.status != 201 {
		t.Fatalf("a label with a tab: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/promoter/apply", key: key, idem: nextIdem(),
		body: promoter("week one: posts\r\nweek two: a video", "devs")}); r.status != 201 {
		t.Fatalf("a plan over several lines: %d %s", r.status, r.body)
	}
}
