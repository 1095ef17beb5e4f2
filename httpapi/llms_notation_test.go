package httpapi

import (
	"strings"
	"testing"
)

// TestLLMSFieldNotationIsSpecs: the agent index writes fields in SPEC's
// notation (section 2: "?" after a name means optional, "|null" that the
// value may be null), as /openapi.json declares them. It marked nullable
// response fields with "?" (reason?:string on the order view, which is
// always present and may be null) and left the fields that may be absent
// unmarked (usdx, cooling of the account), so an agent reading it expected
// the opposite of what the wire carries.
func TestLLMSFieldNotationIsSpecs(t *testing.T) {
	a := newTestAPI(t)
	full := a.srv.LLMSText(true)
	line := func(route string) string {
		_, rest, ok := strings.Cut(full, "- "+route+" (")
		if !ok {
			t.Fatalf("no route %s in llms-full.txt", route)
		}
		end := strings.Index(rest, "\n- ")
		if end < 0 {
			end = len(rest)
		}
		return rest[:end]
	}
	for _, c := range []struct{ route, want string }{
		{"GET /v1/account", "autoSweepThresholdMsat:str/msat|null"},
		{"GET /v1/account", "usdx?:string"},
		{"GET /v1/account", "cooling?:[]CoolingView"},
		{"GET /v1/account", "freeMsat:str/msat,"},
		{"GET /v1/orders/{id}", "reason:string|null"},
		{"POST /v1/withdrawals/quote", "confirmToken?:string"},
		{"POST /v1/orders", "marketId!:string"},
		{"POST /v1/leaderboard/settings", "displayName:string|null"},
		{"GET /v1/por/proof", "totalMsat?:str/msat, totalMicro?:str/int"},
		{"GET /v1/por/proof", "treeTsMs:str/ms"},
	} {
		if got := line(c.route); !strings.Contains(got, c.want) {
			t.Errorf("%s: want %q in\n%s", c.route, c.want, got)
		}
	}
	for _, c := range []struct{ route, bad string }{
		{"GET /v1/orders/{id}", "reason?:"},
		{"GET /v1/account", "autoSweepThresholdMsat?:"},
	} {
		if got := line(c.route); strings.Contains(got, c.bad) {
			t.Errorf("%s: still writes %q (a nullable field marked optional)", c.route, c.bad)
		}
	}
	// SPEC's own wording of the USDx refusal: {error; code; reason?; headroom?; limit?; quote?}.
	if got := line("POST /v1/usdx/quotes"); !strings.Contains(got, "409: {error:string, code:string, reason?:string, headroom?:string, limit?:") {
		t.Errorf("POST /v1/usdx/quotes 409 not in SPEC's notation:\n%s", got)
	}
	if !strings.Contains(full, "name?: may be absent") {
		t.Error("llms-full.txt does not say what ? and |null mean")
	}
}
