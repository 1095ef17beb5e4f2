package httpapi

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/wire"
)

// TestLevel8RefusalsMatchTheDescription drives the refusals feature level
// 8 added through the API of a node at that level, and checks each answer
// against /openapi.json (validateExchanges, at cleanup: status declared,
// body and code among those listed for it) and the description's words:
//   - a read+admin-sessions delegate revoking the master key: 403
//     insufficient_scope, the master still works;
//   - that delegate minting a withdraw key: 400 validation;
//   - a limit order whose maxSlippageQ9 is below the base spread: 400
//     validation;
//   - a 100x open in a market whose spread passes initial margin: 400
//     insufficient_margin;
//   - a bracket whose market entry closes a short: its legs cancelled,
//     reason position_closed.
func TestLevel8RefusalsMatchTheDescription(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	master, _ := a.tradingAccount()

	del, _ := a.mint(master, "read", "admin-sessions")
	var masterID string
	for _, s := range a.do(req{method: "GET", path: "/v1/sessions", key: master}).json(t)["sessions"].([]any) {
		if m := s.(map[string]any); m["current"] == "1" {
			masterID = m["keyId"].(string)
		}
	}
	r := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: del, idem: nextIdem(), body: map[string]any{"keyId": masterID}})
	if r.status != 403 || r.code() != wire.CodeInsufficientScope {
		t.Fatalf("delegate revoking the master: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "GET", path: "/v1/account", key: master}); r.status != 200 {
		t.Fatalf("master after the refused revoke: %d %s", r.status, r.body)
	}
	r = a.do(req{method: "POST", path: "/v1/sessions", key: del, idem: nextIdem(), body: map[string]any{"scopes": []string{"withdraw"}}})
	if r.status != 400 || r.code() != wire.CodeValidation {
		t.Fatalf("delegate minting withdraw: %d %s", r.status, r.body)
	}

	r = a.do(req{method: "POST", path: "/v1/orders", key: master, idem: nextIdem(),
		body: orderBody("ETH-PERP", "buy", "limit", "10", map[string]any{"limitPriceQ8": "300000000000", "maxSlippageQ9": "0"})})
	if r.status != 400 || r.code() != wire.CodeValidation || !strings.Contains(string(r.body), "baseSpreadQ9") {
		t.Fatalf("limit below the spread: %d %s", r.status, r.body)
	}

	// A bracket whose market entry closes a short leaves nothing to protect.
	if r := a.do(req{method: "POST", path: "/v1/orders", key: master, idem: "short-1", body: orderBody("ETH-PERP", "sell", "market", "10", nil)}); r.status != 201 {
		t.Fatalf("short: %d %s", r.status, r.body)
	}
	r = a.do(req{method: "POST", path: "/v1/orders", key: master, idem: "br-1", body: orderBody("ETH-PERP", "buy", "market", "10",
		map[string]any{"bracket": map[string]any{"entryKind": "market", "stopLevel": "300000000000", "takeProfitLevel": "400000000000"}})})
	if r.status != 201 || r.json(t)["status"] != "filled" {
		t.Fatalf("bracket: %d %s", r.status, r.body)
	}
	for _, leg := range []string{"br-1.stop", "br-1.tp"} {
		o := a.do(req{method: "GET", path: "/v1/orders/" + leg, key: master}).json(t)
		if o["status"] != "canceled" || o["reason"] != "position_closed" {
			t.Fatalf("leg %s: %v", leg, o)
		}
	}

	// A 1.5% spread at 1% initial margin: a 100x open is under maintenance
	// at birth.
	spread := int64(15_000_000)
	if res, err := a.node.ProposeInternal(fsm.CmdMarketSet, fsm.MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: &spread}); err != nil || !res.OK() {
		t.Fatalf("market set: %v %+v", err, res)
	}
	r = a.do(req{method: "POST", path: "/v1/orders", key: master, idem: nextIdem(), body: orderBody("BTC-PERP", "buy", "market", "1000", nil)})
	if r.status != 400 || r.code() != wire.CodeInsufficientMargin {
		t.Fatalf("100x open under maintenance: %d %s", r.status, r.body)
	}

	// The description says so in words too.
	doc := a.srv.OpenAPI()
	op := func(method, path string) map[string]any {
		return doc["paths"].(map[string]any)[path].(map[string]any)[method].(map[string]any)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	field := func(schema, name string) string {
		p := schemas[schema].(map[string]any)["properties"].(map[string]any)[name].(map[string]any)
		d, _ := p["description"].(string)
		return d
	}
	for _, want := range []struct{ where, text, sub string }{
		{"revoke summary", op("post", "/v1/sessions/revoke")["summary"].(string), "scopes"},
		{"mint summary", op("post", "/v1/sessions")["summary"].(string), "none"},
		{"maxSlippageQ9", field("OrderRequest", "maxSlippageQ9"), "baseSpreadQ9"},
		{"leverage", field("OrderRequest", "leverage"), "insufficient_margin"},
		{"order view reason", field("OrderView", "reason"), "position_closed"},
		{"trigger view reason", field("TriggerView", "reason"), "position_closed"},
	} {
		if !strings.Contains(want.text, want.sub) {
			t.Errorf("%s does not mention %s: %q", want.where, want.sub, want.text)
		}
	}
	full := a.srv.LLMSText(true)
	for _, want := range []string{
		"- POST /v1/orders (key, scope trade, idem)",
		"refuses: 400 insufficient_balance|insufficient_margin|market_halted|oi_cap|oracle_stale|position_limit|reduce_only",
		"keyed routes also 403 insufficient_scope",
		"only itself and keys whose scopes are all among its own",
	} {
		if !strings.Contains(full, want) {
			t.Errorf("llms-full.txt lacks %q", want)
		}
	}
}

// TestRefusalsAreDescribedAsJSON: every refusal is the JSON error body,
// whatever the route's success content (the share card's 404 was described
// as an image/png body).
func TestRefusalsAreDescribedAsJSON(t *testing.T) {
	a := newTestAPI(t)
	doc := loadDoc(t, a.srv)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for st, rr := range op.Responses.Map() {
				if st < "400" || rr.Value == nil {
					continue
				}
				mt := rr.Value.Content.Get("application/json")
				if mt == nil || len(rr.Value.Content) != 1 {
					t.Errorf("%s %s %s: refusal not described as JSON: %v", method, path, st, rr.Value.Content)
				}
			}
		}
	}
}
