package httpapi

import "testing"

// TestRepeatedQueryParameterIsRefused: only status (GET /v1/orders) may
// repeat. A repeated single-valued parameter was read as its last value
// and the others were dropped without a word, so state=resting&state=armed
// answered only the armed triggers and limit=abc&limit=5 passed; now it is
// 400 validation, like any other query the route does not define.
func TestRepeatedQueryParameterIsRefused(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	key, _ := a.tradingAccount()
	for _, path := range []string{
		"/v1/orders?state=resting&state=armed",
		"/v1/orders?state=open&state=armed",
		"/v1/orders?limit=abc&limit=5",
		"/v1/orders?beforeSeq=5&beforeSeq=9",
		"/v1/fills?limit=-1&limit=5",
		"/v1/liquidations?beforeSeq=0&beforeSeq=9",
		"/v1/funding?limit=500&limit=5",
	} {
		wantCode(t, a.do(req{method: "GET", path: path, key: key}), 400, "validation")
	}
	// The repeatable one still repeats.
	if r := a.do(req{method: "GET", path: "/v1/orders?status=accepted&status=canceled", key: key}); r.status != 200 {
		t.Fatalf("repeated status: %d %s", r.status, r.body)
	}
}
