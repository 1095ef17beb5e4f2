package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/node"
)

// The fixture runs no oracle driver, so these tests list the markets and
// propose prints themselves, with timestamps they choose: deterministic
// bars without waiting for a clock.

const (
	btcStartQ8 = 97_000 * market.Q8
	ethStartQ8 = 3_400 * market.Q8
)

func (a *testAPI) listMarkets() {
	a.t.Helper()
	res, err := a.node.ProposeInternal(fsm.CmdMarketsGenesis, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue(),
		Anchors: []fsm.FeedAnchor{{FeedID: "BTCUSD", MidQ8: btcStartQ8}, {FeedID: "ETHUSD", MidQ8: ethStartQ8}}})
	if err != nil || !res.OK() {
		a.t.Fatalf("markets genesis: %v %+v", err, res)
	}
}

// print commits one print and returns the log index it landed at.
func (a *testAPI) print(feed string, midQ8, tsMs int64) uint64 {
	a.t.Helper()
	res, err := a.node.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: feed, MidQ8: midQ8, ConfQ9: 300_000, TsMs: tsMs})
	if err != nil || !res.OK() {
		a.t.Fatalf("print %s %d at %d: %v %+v", feed, midQ8, tsMs, err, res)
	}
	return res.Index
}

func (a *testAPI) get(path string) resp {
	a.t.Helper()
	return a.do(req{method: "GET", path: path})
}

func (r resp) array(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("not a JSON array (%d): %s", r.status, r.body)
	}
	return out
}

func wantCode(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.status != status || r.code() != code {
		t.Fatalf("got %d %s, want %d %s", r.status, r.body, status, code)
	}
}

func TestMarketsListAndOne(t *testing.T) {
	a := newTestAPI(t)
	if r := a.get("/v1/markets"); r.status != 200 || string(r.body) != "[]" {
		t.Fatalf("before the listing: %d %s", r.status, r.body)
	}
	a.listMarkets()
	r := a.get("/v1/markets")
	if r.header.Get("X-RateLimit-Limit") != strconv.Itoa(Budgets["read"].PerKeyPerMin) {
		t.Fatalf("public reads must draw the read budget per address: %v", r.header)
	}
	list := r.array(t)
	if len(list) != 2 || list[0]["marketId"] != "BTC-PERP" || list[1]["marketId"] != "ETH-PERP" {
		t.Fatalf("markets %s", r.body)
	}
	btc, eth := list[0], list[1]
	want := map[string]any{
		"underlying": "BTC", "oracleFeedId": "BTCUSD", "contractType": "inverse", "quantoMultiplierMsat": nil,
		"status": "live", "tickSizeQ8": "50000000", "priceDp": "1", "minOrderContracts": "1",
		"maxOrderContracts": "1000000", "openInterestContracts": "0", "takerFeeQ9": "500000",
		"imRateQ9": "10000000", "mmRateQ9": "5000000", "baseSpreadQ9": "200000", "fundingRateHourlyQ9": "0",
		"skewQ9": "0", "maxLeverage": "100", "oracleStalenessMs": "10000", "lastPrice": nil,
		"priceSource": "oracle",
	}
	for k, v := range want {
		if got, ok := btc[k]; !ok || got != v {
			t.Errorf("BTC-PERP %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if len(btc) != len(want)+2 { // + marketId, nextFundingTsMs
		t.Errorf("BTC-PERP has %d fields: %v", len(btc), btc)
	}
	if next, _ := strconv.ParseInt(btc["nextFundingTsMs"].(string), 10, 64); next%3_600_000 != 0 || next <= time.Now().UnixMilli()-1000 {
		t.Errorf("nextFundingTsMs %v is not the next whole hour", btc["nextFundingTsMs"])
	}
	if eth["quantoMultiplierMsat"] != "300" || eth["contractType"] != "quanto" {
		t.Errorf("ETH-PERP %v", eth)
	}

	ts := time.Now().UnixMilli()
	a.print("BTCUSD", btcStartQ8+5*market.Q8, ts)
	one := a.get("/v1/markets/BTC-PERP")
	lp, _ := one.json(t)["lastPrice"].(map[string]any)
	if one.status != 200 || lp["midQ8"] != strconv.FormatInt(btcStartQ8+5*market.Q8, 10) || lp["tsMs"] != strconv.FormatInt(ts, 10) {
		t.Fatalf("one market after a print: %d %s", one.status, one.body)
	}
	if lp := a.get("/v1/markets/ETH-PERP").json(t)["lastPrice"]; lp != nil {
		t.Fatalf("ETH-PERP has no print, lastPrice %v", lp)
	}
	wantCode(t, a.get("/v1/markets/SOL-PERP"), 404, "not_found")
	wantCode(t, a.get("/v1/markets/btc-perp"), 404, "not_found")
	wantCode(t, a.do(req{method: "POST", path: "/v1/markets", body: "{}"}), 405, "validation")
}

func TestMarketFundingHistory(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	// Boundaries need log time to cross an hour; the FSM tests cover their
	// values. Here: the shape of an empty history, and the refusals.
	if r := a.get("/v1/markets/BTC-PERP/funding"); r.status != 200 || string(r.body) != "[]" {
		t.Fatalf("funding: %d %s", r.status, r.body)
	}
	wantCode(t, a.get("/v1/markets/SOL-PERP/funding"), 404, "not_found")
}

func TestStats24hNullsUntilAPrint(t *testing.T) {
	clk := middayClock()
	a := newTestAPI(t, func(c *node.Config) { c.Clock = clk })
	a.listMarkets()
	m := a.get("/v1/markets/ETH-PERP/stats24h").json(t)
	if m["marketId"] != "ETH-PERP" || m["windowMs"] != "86400000" || m["basis"] != market.Stats24hBasis ||
		m["fills"] != float64(0) || m["volumeContracts"] != "0" || m["truncated"] != true {
		t.Fatalf("stats without prints: %v", m)
	}
	for _, k := range []string{"hiQ8", "loQ8"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Fatalf("%s must be present and null without prints: %v", k, m)
		}
	}
	now := clk.WallMs()
	a.print("ETHUSD", ethStartQ8, now-120_000)
	a.print("ETHUSD", ethStartQ8+7*market.Q8, now-60_000)
	a.print("ETHUSD", ethStartQ8-3*market.Q8, now)
	m = a.get("/v1/markets/ETH-PERP/stats24h").json(t)
	if m["hiQ8"] != strconv.FormatInt(ethStartQ8+7*market.Q8, 10) || m["loQ8"] != strconv.FormatInt(ethStartQ8-3*market.Q8, 10) || m["truncated"] != true {
		t.Fatalf("stats after prints: %v", m)
	}
	wantCode(t, a.get("/v1/markets/SOL-PERP/stats24h"), 404, "not_found")
}

// middayClock reads the calendar at noon UTC of today: prints up to hours
// back stay inside the launch day, after the markets' seeded history
// (which refuses prints in its days), whatever the hour the test runs.
func middayClock() *node.OffsetClock {
	now := time.Now().UTC()
	noon := time.Date(now.Year(), now.Month(), now.Day(), 12, 0, 0, 0, time.UTC)
	return node.NewOffsetClock(noon.Sub(now))
}

func TestCandlesIntervalsAndLimits(t *testing.T) {
	clk := middayClock()
	a := newTestAPI(t, func(c *node.Config) { c.Clock = clk })
	a.listMarkets()
	// 200 prints a minute apart, ending now: 200 minute bars. Before the
	// midday clock, the test failed from 00:00 to 03:19 UTC, its first
	// prints landing in yesterday's seeded bar.
	now := clk.WallMs()
	first := now - 199*60_000
	for i := int64(0); i < 200; i++ {
		a.print("BTCUSD", btcStartQ8+i*market.Q8, first+i*60_000)
	}
	candles := func(query string) (int64, []map[string]any) {
		t.Helper()
		r := a.get("/v1/markets/BTC-PERP/candles" + query)
		if r.status != 200 {
			t.Fatalf("candles%s: %d %s", query, r.status, r.body)
		}
		var out struct {
			Interval json.Number      `json:"interval"`
			Candles  []map[string]any `json:"candles"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		iv, err := out.Interval.Int64()
		if err != nil || !strings.Contains(string(r.body), `"interval":`+out.Interval.String()+`,`) {
			t.Fatalf("interval must be a JSON number: %s", r.body)
		}
		return iv, out.Candles
	}

	iv, def := candles("")
	if iv != 60 || len(def) != market.CandleLimitDefault {
		t.Fatalf("default: interval %d, %d candles, want 60 and %d", iv, len(def), market.CandleLimitDefault)
	}
	last := def[len(def)-1]
	if last["cQ8"] != strconv.FormatInt(btcStartQ8+199*market.Q8, 10) || last["prints"] != float64(1) {
		t.Fatalf("newest minute bar %v", last)
	}
	if _, seeded := last["seeded"]; seeded {
		t.Fatalf("a real bar carries seeded: %v", last)
	}
	if _, vol := last["volumeContracts"]; vol {
		t.Fatalf("volumeContracts before any fill: %v", last)
	}
	for i := 1; i < len(def); i++ {
		if def[i-1]["tsMs"].(string) >= def[i]["tsMs"].(string) && len(def[i-1]["tsMs"].(string)) == len(def[i]["tsMs"].(string)) {
			t.Fatalf("candles not oldest first at %d", i)
		}
	}
	if _, all := candles("?interval=60&limit=1440"); len(all) != 200 {
		t.Fatalf("limit 1440: %d minute bars, want all 200", len(all))
	}
	if _, one := candles("?limit=1"); len(one) != 1 || one[0]["tsMs"] != last["tsMs"] {
		t.Fatalf("limit 1: %v", one)
	}

	iv, hours := candles("?interval=3600&limit=1440")
	total := 0.0
	for _, h := range hours {
		total += h["prints"].(float64)
	}
	if iv != 3600 || len(hours) < 4 || len(hours) > 5 || total != 200 {
		t.Fatalf("hourly: interval %d, %d bars with %v prints", iv, len(hours), total)
	}

	iv, days := candles("?interval=86400&limit=1440")
	seeded := 0
	for _, d := range days {
		if d["seeded"] == true {
			seeded++
			if d["prints"] != float64(0) {
				t.Fatalf("seeded bar with prints: %v", d)
			}
		}
	}
	if iv != 86400 || seeded < market.SeedDays-1 || days[len(days)-1]["seeded"] != nil {
		t.Fatalf("daily: interval %d, %d bars, %d seeded; the last must be real", iv, len(days), seeded)
	}

	for _, q := range []string{"?limit=1441", "?limit=0", "?limit=-1", "?limit=abc", "?limit=1.5", "?interval=120", "?interval=60s", "?interval="} {
		wantCode(t, a.get("/v1/markets/BTC-PERP/candles"+q), 400, "validation")
	}
	wantCode(t, a.get("/v1/markets/SOL-PERP/candles"), 404, "not_found")
	wantCode(t, a.get("/v1/markets/SOL-PERP/candles?interval=3600"), 404, "not_found")
}

func TestTickerFromCacheHonoursMinIndex(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	r := a.get("/v1/public/ticker")
	m := r.json(t)
	tickers, _ := m["tickers"].([]any)
	if r.status != 200 || len(tickers) != 2 || m["asOfMs"] == nil {
		t.Fatalf("ticker: %d %s", r.status, r.body)
	}
	for _, e := range tickers {
		e := e.(map[string]any)
		if v, ok := e["last"]; !ok || v != nil || e["stalenessMs"] != "10000" {
			t.Fatalf("ticker entry before prints: %v", e)
		}
	}
	ts := time.Now().UnixMilli()
	idx := a.print("BTCUSD", btcStartQ8, ts)
	// The cached body may predate the print; asking for the print's index
	// renders afresh.
	r = a.do(req{method: "GET", path: "/v1/public/ticker", header: map[string]string{"X-Min-Index": strconv.FormatUint(idx, 10)}})
	btc := r.json(t)["tickers"].([]any)[0].(map[string]any)
	last, _ := btc["last"].(map[string]any)
	if btc["marketId"] != "BTC-PERP" || last["midQ8"] != strconv.FormatInt(btcStartQ8, 10) || last["tsMs"] != strconv.FormatInt(ts, 10) {
		t.Fatalf("ticker after the print: %s", r.body)
	}
	if asOf, _ := strconv.ParseInt(r.json(t)["asOfMs"].(string), 10, 64); asOf < ts {
		t.Fatalf("asOfMs %d is before the print it shows (%d)", asOf, ts)
	}
	// The next plain read within the cache's life gets the same bytes.
	if again := a.get("/v1/public/ticker"); string(again.body) != string(r.body) {
		t.Fatalf("ticker not served from the cache:\n%s\n%s", r.body, again.body)
	}
}

func TestPublicMarketReadsAreRateLimitedPerAddress(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	var last resp
	// Twice the burst: the bucket refills 10 a second while the loop runs.
	for i := 0; i <= 2*Budgets["read"].KeyBurst; i++ {
		last = a.get("/v1/public/ticker")
		if last.status == 429 {
			break
		}
	}
	if last.status != 429 || last.code() != "rate_limited" || last.header.Get("Retry-After") == "" {
		t.Fatalf("public reads never refused: %d %s", last.status, last.body)
	}
	a.seen = nil // 120 identical exchanges add nothing to the description check
}

// TestMarketSchemasCarryUnits: every decimal-string field of the market
// resources names its unit in /openapi.json, and the plain counters are
// JSON integers.
func TestMarketSchemasCarryUnits(t *testing.T) {
	a := newTestAPI(t)
	schemas := a.srv.OpenAPI()["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range []string{"MarketView", "LastPriceView", "FundingEntryView", "Stats24hView", "CandleView", "CandlesView", "TickerView", "TickerEntryView"} {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Fatalf("schema %s missing", name)
		}
		for field, p := range s["properties"].(map[string]any) {
			p := p.(map[string]any)
			if p["pattern"] == "^-?[0-9]+$" && p["x-svc-unit"] == nil {
				t.Errorf("%s.%s is a decimal string without x-svc-unit", name, field)
			}
		}
	}
	props := func(name string) map[string]any {
		return schemas[name].(map[string]any)["properties"].(map[string]any)
	}
	for _, c := range []struct{ schema, field string }{{"CandleView", "prints"}, {"CandlesView", "interval"}, {"Stats24hView", "fills"}} {
		if typ := props(c.schema)[c.field].(map[string]any)["type"]; typ != "integer" {
			t.Errorf("%s.%s has type %v, want integer", c.schema, c.field, typ)
		}
	}
	req := schemas["CandleView"].(map[string]any)["required"].([]string)
	if strings.Contains(strings.Join(req, ","), "seeded") || strings.Contains(strings.Join(req, ","), "volumeContracts") {
		t.Errorf("seeded and volumeContracts must be optional: required %v", req)
	}
}
