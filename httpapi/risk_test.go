package httpapi

import (
	"testing"
	"time"
)

// GET /v1/liquidations and /v1/funding: a crash's liquidation is listed
// with every SPEC field; both pages refuse bad cursors and missing keys.
func TestLiquidationsAndFundingOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, acct := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "l1", body: orderBody("BTC-PERP", "buy", "market", "10000", nil)}); r.status != 201 {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "lev", body: orderBody("BTC-PERP", "buy", "market", "1", map[string]any{"leverage": "101"})}); r.status != 400 {
		t.Fatalf("leverage beyond maxLeverage: %d %s", r.status, r.body)
	}
	pos := a.do(req{method: "GET", path: "/v1/positions", key: key}).array(t)
	if len(pos) != 1 || pos[0]["liquidationPriceQ8"] == nil || pos[0]["positionId"] == nil {
		t.Fatalf("position %v", pos)
	}
	a.print("BTCUSD", btcStartQ8*90/100, time.Now().UnixMilli())
	page := a.do(req{method: "GET", path: "/v1/liquidations", key: key}).json(t)
	list, _ := page["liquidations"].([]any)
	if len(list) != 1 || page["nextBeforeSeq"] != nil {
		t.Fatalf("liquidations %v", page)
	}
	l := list[0].(map[string]any)
	for _, f := range []string{"accountId", "positionId", "marketId", "side", "closedContracts", "partial", "execPriceQ8", "oracle", "spreadQ9",
		"realizedPnlMsat", "fundingSettledMsat", "penaltyMsat", "remainderMsat", "deficitMsat", "insuranceCoveredMsat", "adlTriggered",
		"remainingContracts", "remainingMarginMsat", "seq", "tsMs"} {
		if _, ok := l[f]; !ok {
			t.Errorf("liquidation lacks %s: %v", f, l)
		}
	}
	if l["accountId"] != acct || l["positionId"] != pos[0]["positionId"] || l["closedContracts"] != "10000" {
		t.Fatalf("liquidation %v", l)
	}
	if f := a.do(req{method: "GET", path: "/v1/funding", key: key}).json(t); len(f["funding"].([]any)) != 0 || f["nextBeforeSeq"] != nil {
		t.Fatalf("funding before any boundary: %v", f)
	}
	for _, path := range []string{"/v1/liquidations", "/v1/funding"} {
		wantCode(t, a.do(req{method: "GET", path: path + "?limit=0", key: key}), 400, "validation")
		wantCode(t, a.do(req{method: "GET", path: path + "?beforeSeq=x", key: key}), 400, "validation")
		wantCode(t, a.do(req{method: "GET", path: path}), 401, "unauthorized")
	}
}
