package httpapi

import (
	"regexp"
	"strings"
	"testing"
)

// TestLLMSFullDefinesEveryShape: llms-full.txt is "the agent index with
// every field", but an agent reading it (review of 2026-11-29) found no
// shape at all for GET /v1/markets, GET /v1/positions, GET /v1/orders and
// GET /v1/markets/{id}/funding (an array or a choice of pages was left
// out), and names such as FillView, OrderBracket or MarketView that it
// never defined, so a fill's fields or a bracket's were nowhere to be
// read; GET /v1/usdx/withdrawals and GET /v1/withdrawals both answered
// "[]WithdrawalView", two different shapes under one name; and the PoR
// snapshot was typed "interface", a Go word. Every JSON success body is
// now written, every named shape is defined once under "## Types" with
// the name /openapi.json gives it in components/schemas, and no Go kind
// leaks.
func TestLLMSFullDefinesEveryShape(t *testing.T) {
	a := newTestAPI(t)
	full := a.srv.LLMSText(true)
	block := func(route string) string {
		_, rest, ok := strings.Cut(full, "\n- "+route+" (")
		if !ok {
			t.Fatalf("no route %s in llms-full.txt", route)
		}
		if end := strings.Index(rest, "\n- "); end >= 0 {
			rest = rest[:end]
		}
		if end := strings.Index(rest, "\n## "); end >= 0 {
			rest = rest[:end]
		}
		return rest
	}
	for _, c := range []struct{ route, want string }{
		{"GET /v1/markets", "200: []MarketView"},
		{"GET /v1/markets/{id}/funding", "200: []FundingEntryView"},
		{"GET /v1/positions", "200: []PositionView"},
		{"GET /v1/orders", "200: OrdersPage | TriggersPage"},
		{"GET /v1/orders", "status:[]string(accepted|filled|canceled|rejected)"},
	} {
		if got := block(c.route); !strings.Contains(got, c.want) {
			t.Errorf("%s: want %q in\n%s", c.route, c.want, got)
		}
	}

	_, types, ok := strings.Cut(full, "\n## Types\n")
	if !ok {
		t.Fatal("llms-full.txt has no Types section")
	}
	if end := strings.Index(types, "\n## "); end >= 0 {
		types = types[:end]
	}
	defs := map[string]string{}
	for _, line := range strings.Split(types, "\n") {
		if name, fields, ok := strings.Cut(strings.TrimPrefix(line, "- "), ": {"); ok && strings.HasPrefix(line, "- ") {
			if _, dup := defs[name]; dup {
				t.Errorf("type %s defined twice", name)
			}
			defs[name] = "{" + fields
		}
	}
	schemas := a.srv.OpenAPI()["components"].(map[string]any)["schemas"].(map[string]any)
	// Every capitalised name a field, a body or an alternative refers to.
	ref := regexp.MustCompile(`(?:: ?|\| |\[\])([A-Z][A-Za-z0-9_]*)`)
	shapeLine := regexp.MustCompile(`^(  (query|body|[0-9]{3}): |- [A-Za-z0-9_]+: \{)`)
	var shapes []string
	for _, line := range strings.Split(full, "\n") {
		if shapeLine.MatchString(line) {
			shapes = append(shapes, line)
		}
	}
	for _, m := range ref.FindAllStringSubmatch(strings.Join(shapes, "\n"), -1) {
		name := m[1]
		if _, ok := defs[name]; !ok {
			t.Errorf("llms-full.txt refers to %s but never defines it", name)
			continue
		}
		if _, ok := schemas[name]; !ok {
			t.Errorf("llms-full.txt's %s is not a schema of /openapi.json", name)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"FillView", "execPriceQ8:str/q8"},
		{"OrderBracket", "entryKind!:string(market|trigger)"},
		{"MarketView", "tickSizeQ8:str/q8"},
		{"PositionView", "entryPriceQ8:str/q8"},
	} {
		if !strings.Contains(defs[c.name], c.want) {
			t.Errorf("type %s: want %q in %s", c.name, c.want, defs[c.name])
		}
	}
	// The sats and the USDx withdrawal are two shapes under two names.
	satsName := regexp.MustCompile(`withdrawals:\[\]([A-Za-z_]+)`).FindStringSubmatch(block("GET /v1/withdrawals"))
	usdxName := regexp.MustCompile(`withdrawals:\[\]([A-Za-z_]+)`).FindStringSubmatch(block("GET /v1/usdx/withdrawals"))
	if satsName == nil || usdxName == nil || satsName[1] == usdxName[1] {
		t.Fatalf("withdrawal shapes not told apart: %v %v", satsName, usdxName)
	}
	if !strings.Contains(defs[satsName[1]], "amountMsat:str/msat") || !strings.Contains(defs[usdxName[1]], "sparkAddress:string") {
		t.Errorf("withdrawal definitions: %s = %s; %s = %s", satsName[1], defs[satsName[1]], usdxName[1], defs[usdxName[1]])
	}
	for _, bad := range []string{":interface", ":uint8", ":map", "[]uint8"} {
		if strings.Contains(full, bad) {
			t.Errorf("llms-full.txt writes the Go kind %q", bad)
		}
	}
	if !strings.Contains(block("GET /por"), "snapshot:any") {
		t.Errorf("GET /por: the snapshot is SPEC's \"any\":\n%s", block("GET /por"))
	}
}

// TestSignupResultAlwaysCarriesTheKey: SPEC's signup result is {apiKey:
// string; accountId; railAddress; ...}, and every 201 carries the key, but
// the description declared apiKey optional (llms-full.txt: apiKey?:string),
// the stored answer's shape, which never holds it: an agent's generated
// client had to handle a signup without a key.
func TestSignupResultAlwaysCarriesTheKey(t *testing.T) {
	a := newTestAPI(t)
	r := a.do(req{method: "POST", path: "/v1/signup", idem: nextIdem(), body: map[string]any{}})
	if r.status != 201 || r.json(t)["apiKey"] == "" {
		t.Fatalf("signup: %d %s", r.status, r.body)
	}
	schemas := a.srv.OpenAPI()["components"].(map[string]any)["schemas"].(map[string]any)
	sr, _ := schemas["SignupResult"].(map[string]any)
	req, _ := sr["required"].([]string)
	if !strings.Contains(strings.Join(req, ","), "apiKey") {
		t.Errorf("SignupResult does not require apiKey: %v", sr)
	}
	full := a.srv.LLMSText(true)
	_, rest, _ := strings.Cut(full, "- POST /v1/signup (")
	if end := strings.Index(rest, "\n- "); end >= 0 {
		rest = rest[:end]
	}
	if !strings.Contains(rest, "201: {apiKey:string,") {
		t.Errorf("llms-full.txt signup:\n%s", rest)
	}
}
