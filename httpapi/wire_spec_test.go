package httpapi

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// specNumberFields are the only fields SPEC section 1 (wire encoding, rule
// 2) lets a JSON number carry, plus the Merkle leaf's `index`, which
// section 2 types as "integer" by name. Every other integer is a decimal
// string.
var specNumberFields = map[string]bool{
	"prints": true, "fills": true, "leafCount": true, "limitPerMin": true, "burst": true,
	"remaining": true, "expirySeconds": true, "grantsRemainingThisHour": true,
	"freezeCount": true, "frozenCount": true, "interval": true,
	"index": true,
}

// TestJSONNumbersOnlyWhereSpecAllowsThem walks every schema of the
// description: an integer-typed field outside SPEC's list breaks wire rule
// 2 ("JSON numbers appear only for plain counters and small integers: ...").
func TestJSONNumbersOnlyWhereSpecAllowsThem(t *testing.T) {
	var bad []string
	for name, props := range schemaProperties(t) {
		for field, p := range props {
			if hasType(p["type"], "integer") || hasType(p["type"], "number") {
				if !specNumberFields[field] {
					bad = append(bad, name+"."+field)
				}
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("JSON numbers outside SPEC's list (wire rule 2): %v", bad)
	}
}

// TestEveryUnitFieldIsADecimalString: a field the description marks with a
// numeric x-svc-unit is, by wire rule 1, a decimal string matching
// ^-?[0-9]+$, and the description says so with that pattern.
func TestEveryUnitFieldIsADecimalString(t *testing.T) {
	var bad []string
	for name, props := range schemaProperties(t) {
		for field, p := range props {
			if _, ok := p["x-svc-unit"]; ok && hasType(p["type"], "string") && p["pattern"] != "^-?[0-9]+$" {
				bad = append(bad, name+"."+field)
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("unit fields without the decimal-string pattern: %v", bad)
	}
}

func hasType(v any, want string) bool {
	switch t := v.(type) {
	case string:
		return t == want
	case []any:
		for _, x := range t {
			if x == want {
				return true
			}
		}
	}
	return false
}

// TestPromoterCodeListCountsAreStrings: GET /v1/promoter/codes answers
// codesMax as a decimal string (str/int), like `codes` in the profile.
func TestPromoterCodeListCountsAreStrings(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	r := a.do(req{method: "GET", path: "/v1/promoter/codes", key: key})
	if r.status != 200 {
		t.Fatalf("codes: %d %s", r.status, r.body)
	}
	if got := r.json(t)["codesMax"]; got != "20" {
		t.Fatalf("codesMax %#v (%T), SPEC wire rule 2 wants the string \"20\"", got, got)
	}
}

// TestLeaderboardSettingsDisplayNameNullable: SPEC section 4 gives the
// body {optedOut?: boolean; displayName?: string or null}. The server
// accepts null (it clears the name), and the description must say so, in
// /openapi.json and in /llms-full.txt.
func TestLeaderboardSettingsDisplayNameNullable(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(),
		body: map[string]any{"displayName": "Sats Stacker"}}); r.status != 200 || r.json(t)["displayName"] != "Sats Stacker" {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(),
		body: map[string]any{"displayName": nil}}); r.status != 200 || r.json(t)["displayName"] != nil {
		t.Fatalf("clear with null: %d %s", r.status, r.body)
	}
	doc := loadDoc(t, a.srv)
	sc := doc.Components.Schemas["LeaderboardSettingsRequest"]
	if sc == nil || sc.Value.Properties["displayName"] == nil {
		t.Fatal("no LeaderboardSettingsRequest.displayName in the description")
	}
	dn := sc.Value.Properties["displayName"].Value
	if !dn.Type.Includes("null") || !dn.Type.Includes("string") {
		t.Fatalf("displayName types %v, SPEC: string or null", dn.Type)
	}
	if _, ok := sc.Value.Properties["optedOut"]; !ok || sc.Value.Properties["optedOut"].Value.Type.Includes("null") {
		t.Fatal("optedOut must stay a plain optional boolean")
	}
	llms := a.do(req{method: "GET", path: "/llms-full.txt"})
	if !strings.Contains(string(llms.body), "body: {optedOut:bool, displayName:string|null}") {
		t.Fatalf("llms-full.txt does not say displayName may be null")
	}
}

// schemaProperties is every component schema of the served description,
// by name, as its properties' raw JSON objects.
func schemaProperties(t *testing.T) map[string]map[string]map[string]any {
	t.Helper()
	a := newTestAPI(t)
	b, _ := json.Marshal(a.srv.OpenAPI())
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]map[string]map[string]any, len(doc.Components.Schemas))
	for name, sc := range doc.Components.Schemas {
		out[name] = sc.Properties
	}
	return out
}
