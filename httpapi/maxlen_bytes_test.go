package httpapi

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// TestStringLimitsSayBytes: the decoder bounds a string field by its
// length in bytes (UTF-8), but /openapi.json wrote only JSON Schema's
// maxLength, which counts characters: an agent that checked a label of 40
// "é" (40 characters, 80 bytes) against maxLength 64 had it refused with
// "field label: is longer than 64" (review of 2026-11-29). Every bounded
// request string now says its bound is in bytes, and so does the refusal.
func TestStringLimitsSayBytes(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	r := a.do(req{method: "POST", path: "/v1/sessions", key: key, idem: nextIdem(),
		body: map[string]any{"label": strings.Repeat("é", 40), "scopes": []string{"read"}}})
	if r.status != 400 || r.code() != wire.CodeValidation || !strings.Contains(string(r.body), "64 bytes") {
		t.Fatalf("80-byte label: %d %s", r.status, r.body)
	}
	r = a.do(req{method: "POST", path: "/v1/sessions", key: key, idem: nextIdem(),
		body: map[string]any{"label": strings.Repeat("é", 32), "scopes": []string{"read"}}})
	if r.status != 201 {
		t.Fatalf("64-byte label: %d %s", r.status, r.body)
	}

	schemas := a.srv.OpenAPI()["components"].(map[string]any)["schemas"].(map[string]any)
	checked := 0
	for name, sc := range schemas {
		props, _ := sc.(map[string]any)["properties"].(map[string]any)
		for field, p := range props {
			ps, _ := p.(map[string]any)
			if _, bounded := ps["maxLength"]; !bounded {
				continue
			}
			checked++
			if d, _ := ps["description"].(string); !strings.Contains(d, "bytes") {
				t.Errorf("%s.%s: maxLength %v without saying the bound is in bytes (description %q)", name, field, ps["maxLength"], d)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no bounded string in the description")
	}
}
