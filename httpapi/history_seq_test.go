package httpapi

import (
	"strings"
	"testing"
)

// Every history record shows the seq of its latest change (docs/
// architecture.md, Events and seq), the number its event carried and the
// page's cursor: an order or trigger view too, so a client that resyncs
// from GET /v1/orders can tell a buffered order event it already has
// from a newer one, and sees the seq nextBeforeSeq names.
func TestOrderAndTriggerViewsShowTheSeqOfTheirLatestChange(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	for _, id := range []string{"lim-1", "lim-2"} {
		r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: id,
			body: orderBody("ETH-PERP", "buy", "limit", "1", map[string]any{"limitPriceQ8": "300000000000"})})
		if r.status != 201 {
			t.Fatalf("%s: %d %s", id, r.status, r.body)
		}
	}
	before := a.do(req{method: "GET", path: "/v1/orders/lim-1", key: key}).json(t)
	if r := a.do(req{method: "DELETE", path: "/v1/orders/lim-1", key: key, idem: "del-1"}); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	after := a.do(req{method: "GET", path: "/v1/orders/lim-1", key: key}).json(t)
	s0, ok0 := before["seq"].(string)
	s1, ok1 := after["seq"].(string)
	if !ok0 || !ok1 || s0 == s1 {
		t.Fatalf("order view seq: before cancel %v, after %v", before, after)
	}
	// Newest change first: the cancel put lim-1 above lim-2; the cursor
	// is the seq the page's last order shows.
	page := a.do(req{method: "GET", path: "/v1/orders?limit=1", key: key}).json(t)
	orders := page["orders"].([]any)
	o := orders[0].(map[string]any)
	if o["orderId"] != "lim-1" || o["seq"] != s1 || page["nextBeforeSeq"] != s1 {
		t.Fatalf("page %v: want lim-1 at seq %s and that cursor", page, s1)
	}
	page = a.do(req{method: "GET", path: "/v1/orders?limit=1&beforeSeq=" + s1, key: key}).json(t)
	if o := page["orders"].([]any)[0].(map[string]any); o["orderId"] != "lim-2" || o["seq"] == nil || page["nextBeforeSeq"] != nil {
		t.Fatalf("second page %v", page)
	}

	r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "sl",
		body: orderBody("ETH-PERP", "sell", "stop_market", "1", map[string]any{"triggerPriceQ8": "320000000000", "reduceOnly": true})})
	if r.status != 201 {
		t.Fatalf("stop: %d %s", r.status, r.body)
	}
	tp := a.do(req{method: "GET", path: "/v1/orders?state=armed&limit=1", key: key}).json(t)
	tv := tp["triggers"].([]any)[0].(map[string]any)
	sv := a.do(req{method: "GET", path: "/v1/orders/sl", key: key}).json(t)
	if tv["orderId"] != "sl" || tv["seq"] == nil || tv["seq"] != sv["seq"] {
		t.Fatalf("trigger view %v, order view %v: both show the trigger's latest change", tv, sv)
	}
}

// SPEC leaves the history pages' default and maximum limit to us; the
// description must state what the server enforces (docs/decisions.md:
// default 50, at most 200), and describe the repeatable status filter
// as what it is, an array sent once per value.
func TestHistoryQueriesDescribeTheirBounds(t *testing.T) {
	a := newTestAPI(t)
	doc := a.srv.OpenAPI()
	paths := doc["paths"].(map[string]any)
	want := "1 to " + itoa(PageLimitMax) + ", default " + itoa(PageLimitDefault)
	n := 0
	for path, item := range paths {
		get, ok := item.(map[string]any)["get"].(map[string]any)
		if !ok {
			continue
		}
		params, _ := get["parameters"].([]any)
		for _, p := range params {
			pm := p.(map[string]any)
			if pm["in"] != "query" || pm["name"] != "limit" || path == "/v1/markets/{id}/candles" || path == "/v1/leaderboard" {
				continue
			}
			n++
			d, _ := pm["schema"].(map[string]any)["description"].(string)
			if !strings.Contains(d, want) {
				t.Errorf("%s: limit is described %q, want it to say %q", path, d, want)
			}
		}
	}
	if n < 8 {
		t.Fatalf("only %d paged routes found", n)
	}
	for _, p := range paths["/v1/orders"].(map[string]any)["get"].(map[string]any)["parameters"].([]any) {
		pm := p.(map[string]any)
		if pm["name"] != "status" {
			continue
		}
		sc := pm["schema"].(map[string]any)
		if sc["type"] != "array" || pm["explode"] != true || sc["items"].(map[string]any)["enum"] == nil {
			t.Fatalf("status is repeatable, so an exploded array: %v", pm)
		}
	}
}
