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

// TestMalformedQueryIsRefused: the query was read with URL.Query, which
// drops every pair it cannot parse (a bad %-escape, a ';' separator) and
// says so only in an error nobody looked at: limit=%zz answered with the
// default page, state=resting;x with every order, and
// limit=1;limit=500 slipped past the repeated-parameter rule. A query
// that does not parse is now 400 validation, on every route that reads one.
func TestMalformedQueryIsRefused(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	key, _ := a.tradingAccount()
	for _, path := range []string{
		"/v1/orders?limit=%zz",
		"/v1/orders?state=resting;x",
		"/v1/orders?status=filled%",
		"/v1/fills?limit=1;limit=500",
		"/v1/fills?beforeSeq=%G1",
		"/v1/leaderboard?board=roi&window=%zz",
		"/v1/markets/BTC-PERP/candles?interval=3600;",
		"/v1/usdx/history?limit=%",
		"/v1/por/proof?asset=usdx%",
		"/v1/promoter/stats?days=1;x",
	} {
		wantCode(t, a.do(req{method: "GET", path: path, key: key}), 400, "validation")
	}
	// A well-formed query still reads, escapes included.
	if r := a.do(req{method: "GET", path: "/v1/orders?status=accepted&status=%63anceled&limit=%35", key: key}); r.status != 200 {
		t.Fatalf("well-formed query: %d %s", r.status, r.body)
	}
}

// TestLooseButWellFormedQueryIsRead pins what the malformed-query refusal
// must not catch: an empty query, a trailing or doubled '&' and escapes
// all parse (url.ParseQuery skips empty pairs), so a client building its
// query string loosely still gets 200, not 400.
func TestLooseButWellFormedQueryIsRead(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	key, _ := a.tradingAccount()
	for _, path := range []string{
		"/v1/fills?",
		"/v1/fills?&",
		"/v1/fills?limit=5&",
		"/v1/fills?&&limit=5&&",
		"/v1/orders?status=accepted&&status=%63anceled&",
		"/v1/leaderboard?board=pnl&window=7d&",
		"/v1/markets/BTC-PERP/candles?interval=60&limit=%35&",
	} {
		if r := a.do(req{method: "GET", path: path, key: key}); r.status != 200 {
			t.Errorf("%s: %d %s, want 200", path, r.status, r.body)
		}
	}
}
