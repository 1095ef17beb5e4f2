package httpapi

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// tradingAccount signs up, takes a faucet grant and lists fresh prints on
// both markets; it returns the master key and the account id.
func (a *testAPI) tradingAccount() (string, string) {
	a.t.Helper()
	key, acct := a.signup()
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: nextIdem(), body: "{}"}); r.status != 201 {
		a.t.Fatalf("faucet: %d %s", r.status, r.body)
	}
	return key, acct
}

func (a *testAPI) freshPrices() {
	a.t.Helper()
	now := time.Now().UnixMilli()
	a.print("BTCUSD", btcStartQ8, now)
	a.print("ETHUSD", ethStartQ8, now)
}

func orderBody(mkt, side, typ, contracts string, extra map[string]any) map[string]any {
	b := map[string]any{"marketId": mkt, "side": side, "type": typ, "contracts": contracts, "reduceOnly": false}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func TestOrdersPositionsAndFillsOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, acct := a.tradingAccount()

	r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "buy-1", body: orderBody("ETH-PERP", "buy", "market", "10", nil)})
	if r.status != 201 || r.json(t)["status"] != "filled" || r.json(t)["orderId"] != "buy-1" {
		t.Fatalf("market order: %d %s", r.status, r.body)
	}
	again := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "buy-1", body: orderBody("ETH-PERP", "buy", "market", "10", nil)})
	if again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s", again.status, again.body)
	}
	pos := a.do(req{method: "GET", path: "/v1/positions", key: key}).array(t)
	if len(pos) != 1 || pos[0]["marketId"] != "ETH-PERP" || pos[0]["side"] != "long" || pos[0]["contracts"] != "10" {
		t.Fatalf("positions %v", pos)
	}
	fills := a.do(req{method: "GET", path: "/v1/fills", key: key}).json(t)
	list := fills["fills"].([]any)
	if len(list) != 1 || fills["nextBeforeSeq"] != nil {
		t.Fatalf("fills %v", fills)
	}
	f := list[0].(map[string]any)
	if f["accountId"] != acct || f["openedContracts"] != "10" || f["closedContracts"] != "0" || f["referral"] != nil ||
		f["rebateDivertedMsat"] != "0" || f["positionAfter"].(map[string]any)["contracts"] != "10" {
		t.Fatalf("fill %v", f)
	}

	// A resting limit order reserves; another account cannot see or cancel it.
	r = a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "lim-1",
		body: orderBody("ETH-PERP", "buy", "limit", "10", map[string]any{"limitPriceQ8": "300000000000"})})
	if r.status != 201 || r.json(t)["status"] != "resting" {
		t.Fatalf("limit order: %d %s", r.status, r.body)
	}
	if acc := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t); acc["reservedMsat"] == "0" {
		t.Fatalf("nothing reserved: %v", acc)
	}
	if o := a.do(req{method: "GET", path: "/v1/orders/lim-1", key: key}).json(t); o["status"] != "accepted" || o["type"] != "limit" || o["reason"] != nil {
		t.Fatalf("order view %v", o)
	}
	page := a.do(req{method: "GET", path: "/v1/orders?status=accepted&status=canceled", key: key}).json(t)
	if orders := page["orders"].([]any); len(orders) != 1 || orders[0].(map[string]any)["orderId"] != "lim-1" {
		t.Fatalf("orders page %v", page)
	}
	otherKey, _ := a.signup()
	wantCode(t, a.do(req{method: "GET", path: "/v1/orders/lim-1", key: otherKey}), 404, "not_found")
	wantCode(t, a.do(req{method: "GET", path: "/v1/orders/never", key: key}), 404, "not_found")
	wantCode(t, a.do(req{method: "DELETE", path: "/v1/orders/lim-1", key: otherKey, idem: "lim-1"}), 404, "not_found")

	// The order id itself may be the cancel's idempotency-key.
	r = a.do(req{method: "DELETE", path: "/v1/orders/lim-1", key: key, idem: "lim-1"})
	if m := r.json(t); r.status != 200 || m["canceled"] != true || m["orderId"] != "lim-1" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if acc := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t); acc["reservedMsat"] != "0" {
		t.Fatalf("reservation kept: %v", acc)
	}
	if o := a.do(req{method: "GET", path: "/v1/orders/lim-1", key: key}).json(t); o["status"] != "canceled" {
		t.Fatalf("after cancel %v", o)
	}
}

// A key reused on DELETE for another order's id is not the same request:
// it must not replay the first cancel's answer.
func TestCancelIdempotencyCoversTheOrderID(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	for _, id := range []string{"a", "b"} {
		r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: id,
			body: orderBody("ETH-PERP", "buy", "limit", "1", map[string]any{"limitPriceQ8": "300000000000"})})
		if r.status != 201 {
			t.Fatalf("limit %s: %d %s", id, r.status, r.body)
		}
	}
	if r := a.do(req{method: "DELETE", path: "/v1/orders/a", key: key, idem: "k"}); r.status != 200 {
		t.Fatalf("cancel a: %d %s", r.status, r.body)
	}
	wantCode(t, a.do(req{method: "DELETE", path: "/v1/orders/b", key: key, idem: "k"}), 409, "idempotency_key_reused")
	if o := a.do(req{method: "GET", path: "/v1/orders/b", key: key}).json(t); o["status"] != "accepted" {
		t.Fatalf("b: %v", o)
	}
}

// Any printable ASCII is a valid idempotency key and so a valid order id,
// "/" and "+" included; SPEC: GET /v1/orders/{id} shows an order and
// DELETE /v1/orders/{id} cancels it. A client sends the id as one escaped
// path segment (url.PathEscape: "/" as %2F, "%" as %25, "?" as %3F, "#" as
// %23, "+" as it is) and the server reads it back exactly.
func TestOrderIDWithReservedCharactersCanBeReadAndCancelled(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	for _, id := range []string{"grid/1", "grid/2+x", "a+b", "a%2Fb", "50%", "q?x#y", "/+/"} {
		r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: id,
			body: orderBody("ETH-PERP", "buy", "limit", "10", map[string]any{"limitPriceQ8": "300000000000"})})
		if r.status != 201 || r.json(t)["orderId"] != id || r.json(t)["status"] != "resting" {
			t.Fatalf("limit order %q: %d %s", id, r.status, r.body)
		}
		path := "/v1/orders/" + url.PathEscape(id)
		if g := a.do(req{method: "GET", path: path, key: key}); g.status != 200 || g.json(t)["orderId"] != id {
			t.Errorf("GET %s: %d %s", path, g.status, g.body)
		}
		if d := a.do(req{method: "DELETE", path: path, key: key, idem: "cancel-" + id}); d.status != 200 {
			t.Errorf("DELETE %s: %d %s", path, d.status, d.body)
		}
		if g := a.do(req{method: "GET", path: path, key: key}); g.status != 200 || g.json(t)["status"] != "canceled" {
			t.Errorf("GET %s after the cancel: %d %s", path, g.status, g.body)
		}
	}
	// Unescaped, the "/" separates segments: no route has that shape.
	wantCode(t, a.do(req{method: "GET", path: "/v1/orders/grid/1", key: key}), 404, "not_found")
}

func TestOrderRefusalsOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	key, _ := a.tradingAccount()
	post := func(body any) resp {
		return a.do(req{method: "POST", path: "/v1/orders", key: key, idem: nextIdem(), body: body})
	}
	// Before any print the oracle is stale.
	wantCode(t, post(orderBody("ETH-PERP", "buy", "market", "1", nil)), 400, "oracle_stale")
	a.freshPrices()
	wantCode(t, post(orderBody("ETH-PERP", "buy", "stop_market", "1", nil)), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "stop_market", "1", map[string]any{"triggerPriceQ8": "100"})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "stop_market", "1", map[string]any{"triggerPriceQ8": "300000000000"})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "market", "1", map[string]any{"bracket": map[string]any{"entryKind": "market"}})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "market", "1", map[string]any{"bracket": map[string]any{"stopLevel": "300000000000"}})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "market", "1", map[string]any{"trigger": map[string]any{"kind": "stop"}})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "market", "1", map[string]any{"trigger": map[string]any{"kind": "trailing", "level": "400000000000"}})), 400, "validation")
	wantCode(t, a.do(req{method: "GET", path: "/v1/orders?state=open", key: key}), 400, "validation")
	wantCode(t, a.do(req{method: "GET", path: "/v1/orders?state=armed&status=accepted", key: key}), 400, "validation")
	wantCode(t, a.do(req{method: "GET", path: "/v1/orders?status=open", key: key}), 400, "validation")
	wantCode(t, post(map[string]any{"marketId": "ETH-PERP", "side": "buy", "type": "market", "contracts": "1"}), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "market", "1", map[string]any{"contracts": 1})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "limit", "1", map[string]any{"limitPriceQ8": "340000000001"})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "buy", "market", "1", map[string]any{"maxSlippageQ9": "0"})), 400, "validation")
	wantCode(t, post(orderBody("ETH-PERP", "sell", "market", "1", map[string]any{"reduceOnly": true})), 400, "reduce_only")
	wantCode(t, post(orderBody("XRP-PERP", "buy", "market", "1", nil)), 400, "validation")
	wantCode(t, post(orderBody("BTC-PERP", "buy", "market", "1000000", nil)), 400, "insufficient_margin")
	readKey, _ := a.mint(key, "read")
	r := a.do(req{method: "POST", path: "/v1/orders", key: readKey, idem: nextIdem(), body: orderBody("ETH-PERP", "buy", "market", "1", nil)})
	wantCode(t, r, 403, "insufficient_scope")
	if f := a.do(req{method: "GET", path: "/v1/fills", key: key}).json(t); len(f["fills"].([]any)) != 0 {
		t.Fatalf("a refusal filled: %v", f)
	}
	if !strings.Contains(string(a.do(req{method: "GET", path: "/v1/positions", key: key}).body), "[]") {
		t.Fatal("a refusal opened a position")
	}
}

func TestTriggersAndBracketsOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	place := func(idem string, body map[string]any, status string) {
		t.Helper()
		r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: idem, body: body})
		if r.status != 201 || r.json(t)["status"] != status {
			t.Fatalf("%s: %d %s", idem, r.status, r.body)
		}
	}
	// ETH at 3400: a bracket long with a trigger entry at 3450, stop 3300,
	// take-profit 3600 on half.
	place("br", orderBody("ETH-PERP", "buy", "market", "10", map[string]any{"bracket": map[string]any{
		"entryKind": "trigger", "entryLevel": "345000000000", "stopLevel": "330000000000",
		"takeProfitLevel": "360000000000", "takeProfitContracts": "5"}}), "working")
	place("sl", orderBody("ETH-PERP", "sell", "stop_market", "3", map[string]any{"triggerPriceQ8": "320000000000", "reduceOnly": true}), "working")

	armed := a.do(req{method: "GET", path: "/v1/orders?state=armed", key: key}).json(t)
	resting := a.do(req{method: "GET", path: "/v1/orders?state=resting", key: key}).json(t)
	if n := len(armed["triggers"].([]any)); n != 2 {
		t.Fatalf("armed page %v", armed)
	}
	legs := resting["triggers"].([]any)
	if len(legs) != 2 {
		t.Fatalf("resting page %v", resting)
	}
	tp := a.do(req{method: "GET", path: "/v1/orders/br.tp", key: key}).json(t)
	if tp["type"] != "take_profit_market" || tp["status"] != "accepted" || tp["contracts"] != "5" {
		t.Fatalf("leg order view %v", tp)
	}
	for _, l := range legs {
		v := l.(map[string]any)
		if v["ocoGroup"] != "br" || v["reduceOnly"] != true || v["side"] != "sell" || v["status"] != "resting" {
			t.Fatalf("leg %v", v)
		}
	}
	// Cancel the bracket by its id: entry and legs go; the stop stays.
	r := a.do(req{method: "DELETE", path: "/v1/orders/br", key: key, idem: "del-br"})
	if r.status != 200 || r.json(t)["canceled"] != true {
		t.Fatalf("cancel bracket: %d %s", r.status, r.body)
	}
	if p := a.do(req{method: "GET", path: "/v1/orders?state=resting", key: key}).json(t); len(p["triggers"].([]any)) != 0 {
		t.Fatalf("legs left after cancel: %v", p)
	}
	armed = a.do(req{method: "GET", path: "/v1/orders?state=armed", key: key}).json(t)
	if ts := armed["triggers"].([]any); len(ts) != 1 || ts[0].(map[string]any)["orderId"] != "sl" {
		t.Fatalf("armed after cancel %v", armed)
	}
	if o := a.do(req{method: "GET", path: "/v1/orders/br.stop", key: key}).json(t); o["status"] != "canceled" || o["reason"] != "entry_canceled" {
		t.Fatalf("leg after cancel %v", o)
	}
	// The orders page lists triggers as orders, with their status.
	page := a.do(req{method: "GET", path: "/v1/orders?status=canceled", key: key}).json(t)
	if n := len(page["orders"].([]any)); n != 3 {
		t.Fatalf("canceled page %v", page)
	}
	// The print through the stop executes it: a reduce-only stop with no
	// position is blocked, and its order view says rejected.
	a.print("ETHUSD", 3_100*100_000_000, time.Now().UnixMilli())
	if o := a.do(req{method: "GET", path: "/v1/orders/sl", key: key}).json(t); o["status"] != "rejected" || o["reason"] != "reduce_only" {
		t.Fatalf("blocked stop %v", o)
	}
}

// An order body that names a field twice is refused before anything
// rests: with last-wins it rested 2 contracts where a first-wins reader
// (a proxy, an audit log) saw 1.
func TestOrderWithARepeatedFieldIsRefused(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	body := `{"marketId":"ETH-PERP","side":"buy","type":"limit","contracts":"1","contracts":"2","reduceOnly":false,"limitPriceQ8":"300000000000"}`
	r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "dup-1", body: body})
	wantCode(t, r, 400, "validation")
	if msg := r.json(t)["error"]; !strings.Contains(msg.(string), "contracts") {
		t.Fatalf("the refusal does not name the field: %s", r.body)
	}
	page := a.do(req{method: "GET", path: "/v1/orders", key: key}).json(t)
	if orders := page["orders"].([]any); len(orders) != 0 {
		t.Fatalf("a body with a repeated field placed an order: %v", orders)
	}
}
