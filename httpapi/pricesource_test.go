package httpapi

import (
	"strconv"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
)

// propose commits an operator command and returns the log index it landed at.
func (a *testAPI) propose(typ fsm.CmdType, payload any) uint64 {
	a.t.Helper()
	res, err := a.node.ProposeInternal(typ, payload)
	if err != nil || !res.OK() {
		a.t.Fatalf("command %d: %v %+v", typ, err, res)
	}
	return res.Index
}

// priceSources reads BTC-PERP's and ETH-PERP's priceSource from the market
// list, the market resource and the ticker (rendered at index or later).
func (a *testAPI) priceSources(index uint64) (list, one, ticker map[string]any) {
	a.t.Helper()
	list, one, ticker = map[string]any{}, map[string]any{}, map[string]any{}
	for _, m := range a.get("/v1/markets").array(a.t) {
		list[m["marketId"].(string)] = m["priceSource"]
	}
	for _, id := range []string{"BTC-PERP", "ETH-PERP"} {
		one[id] = a.get("/v1/markets/" + id).json(a.t)["priceSource"]
	}
	r := a.do(req{method: "GET", path: "/v1/public/ticker", header: map[string]string{"X-Min-Index": strconv.FormatUint(index, 10)}})
	for _, e := range r.json(a.t)["tickers"].([]any) {
		e := e.(map[string]any)
		ticker[e["marketId"].(string)] = e["priceSource"]
	}
	return list, one, ticker
}

// TestPinnedFeedIsVisibleInMarketsAndTicker: an operator's pin, or a
// script (also once played out), held BTCUSD while GET /v1/markets and the
// ticker showed it like a live oracle price. They now say pinned or
// scripted for BTC-PERP (ETH-PERP stays oracle), and oracle after unpin.
func TestPinnedFeedIsVisibleInMarketsAndTicker(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	want := func(index uint64, btc string) {
		t.Helper()
		list, one, ticker := a.priceSources(index)
		for name, got := range map[string]map[string]any{"GET /v1/markets": list, "GET /v1/markets/{id}": one, "ticker": ticker} {
			if got["BTC-PERP"] != btc || got["ETH-PERP"] != "oracle" {
				t.Fatalf("%s: priceSource %v, want BTC-PERP %s and ETH-PERP oracle", name, got, btc)
			}
		}
	}
	want(a.print("BTCUSD", btcStartQ8, time.Now().UnixMilli()), "oracle")
	want(a.propose(fsm.CmdOraclePin, fsm.OraclePinPayload{FeedID: "BTCUSD", MidQ8: 90_000 * market.Q8}), "pinned")
	want(a.propose(fsm.CmdOracleScript, fsm.OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverrideLinear,
		Points: []market.OverridePoint{{MidQ8: 90_000 * market.Q8}, {OffsetMs: 1, MidQ8: 91_000 * market.Q8}}}), "scripted")
	want(a.propose(fsm.CmdOracleUnpin, fsm.OracleUnpinPayload{FeedID: "BTCUSD"}), "oracle")
}
