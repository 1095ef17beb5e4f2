package httpapi

import (
	"strconv"
	"testing"
)

func TestCancelAllAfterOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	arm := func(timeout any) resp {
		return a.do(req{method: "POST", path: "/v1/cancel-all-after", key: key, idem: nextIdem(), body: map[string]any{"timeoutMs": timeout}})
	}
	// Refusals: not a decimal string, negative, above the maximum, below the
	// minimum, missing, and a key without the trade scope.
	for _, bad := range []any{60000, "1e3", "-1", "86400001", "999"} {
		wantCode(t, arm(bad), 400, "validation")
	}
	wantCode(t, a.do(req{method: "POST", path: "/v1/cancel-all-after", key: key, idem: nextIdem(), body: "{}"}), 400, "validation")
	readKey, _ := a.mint(key, "read")
	wantCode(t, a.do(req{method: "POST", path: "/v1/cancel-all-after", key: readKey, idem: nextIdem(), body: map[string]any{"timeoutMs": "5000"}}), 403, "insufficient_scope")

	r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "rest-1",
		body: orderBody("ETH-PERP", "buy", "limit", "10", map[string]any{"limitPriceQ8": "300000000000"})})
	if r.status != 201 || r.json(t)["status"] != "resting" {
		t.Fatalf("limit order: %d %s", r.status, r.body)
	}
	// Arm for a day, then disarm: the answers.
	r = arm("86400000")
	if m := r.json(t); r.status != 200 || m["armed"] != true {
		t.Fatalf("arm: %d %s", r.status, r.body)
	} else if d, err := strconv.ParseInt(m["deadlineTsMs"].(string), 10, 64); err != nil || d <= 86_400_000 {
		t.Fatalf("deadlineTsMs %v", m["deadlineTsMs"])
	}
	if r = arm("0"); r.status != 200 || string(r.body) != `{"armed":false,"deadlineTsMs":null}` {
		t.Fatalf("disarm: %d %s", r.status, r.body)
	}
	// The idempotency key covers the body: another timeout under it is
	// refused, 400 as every refusal of cancel-all-after (SPEC section 7).
	if r := a.do(req{method: "POST", path: "/v1/cancel-all-after", key: key, idem: "caa-k", body: map[string]any{"timeoutMs": "0"}}); r.status != 200 {
		t.Fatalf("disarm: %d %s", r.status, r.body)
	}
	wantCode(t, a.do(req{method: "POST", path: "/v1/cancel-all-after", key: key, idem: "caa-k", body: map[string]any{"timeoutMs": "5000"}}), 400, "idempotency_key_reused")
	// Armed for the minimum, the resting order is canceled at the deadline
	// and its reservation released.
	if r = arm("1000"); r.status != 200 || r.json(t)["armed"] != true {
		t.Fatalf("arm: %d %s", r.status, r.body)
	}
	waitFor(t, "the switch to cancel the resting order", func() bool {
		return a.do(req{method: "GET", path: "/v1/orders/rest-1", key: key}).json(t)["status"] == "canceled"
	})
	if o := a.do(req{method: "GET", path: "/v1/orders/rest-1", key: key}).json(t); o["reason"] != "cancel_all_after" {
		t.Fatalf("order %v", o)
	}
	if acc := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t); acc["reservedMsat"] != "0" {
		t.Fatalf("reservation kept: %v", acc)
	}
}
