package httpapi

import (
	"encoding/json"
	"testing"
)

// TestHealthz503IsTheHealthObject: SPEC section 4 says /healthz answers
// 200 and 503 with the health object, and its description declares 503 so.
// A 503 of the read barrier (an X-Min-Index past the log) answered the
// error body instead, so a load balancer or client reading
// {ok, db, tsMs, reason} off a 503 found none of it. It now answers the
// health object, ok false, the barrier's message as the reason.
func TestHealthz503IsTheHealthObject(t *testing.T) {
	a := newTestAPI(t)
	r := a.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Min-Index": "18446744073709551615"}})
	if r.status != 503 {
		t.Fatalf("X-Min-Index past the log: %d %s, want 503", r.status, r.body)
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &h); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	if string(h["ok"]) != "false" || string(h["db"]) != "true" || len(h["tsMs"]) < 3 || len(h["reason"]) < 3 || h["error"] != nil {
		t.Fatalf("503 body %s, want the health object with ok false and a reason", r.body)
	}
	// Malformed, it is still a 400 refusal like on any route.
	wantCode(t, a.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Min-Index": "x"}}), 400, "validation")
}
