package cli

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
)

func TestParsePriceQ8IsExact(t *testing.T) {
	for in, want := range map[string]int64{
		"97000.5":                 9_700_050_000_000,
		"97000":                   9_700_000_000_000,
		"0.00000001":              1,
		"3400.12345678":           340_012_345_678,
		"007.10":                  710_000_000,
		"92233720368.54775807":    9_223_372_036_854_775_807,
		" 1.5 ":                   150_000_000,
		"1000000000.00000000":     100_000_000_000_000_000,
		"0.1":                     10_000_000,
		"12345678901.23456789":    1_234_567_890_123_456_789,
		"97000.50000000":          9_700_050_000_000,
		"99999.99999999":          9_999_999_999_999,
		"1":                       100_000_000,
		"21000000.00000001":       2_100_000_000_000_001,
		"3.14159265":              314_159_265,
		"0000000000000000000.001": 100_000,
	} {
		if got, err := parsePriceQ8(in); err != nil || got != want {
			t.Errorf("parsePriceQ8(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".5", "5.", "-1", "+1", "1e5", "0", "0.000000001", "97000.123456789",
		"92233720368.54775808", "1,5", "abc", "1.2.3", "0.00000000"} {
		if got, err := parsePriceQ8(in); err == nil {
			t.Errorf("parsePriceQ8(%q) = %d, want an error", in, got)
		}
	}
}

func TestMarketSetBody(t *testing.T) {
	b, err := marketSetBody("BTC-PERP", "halted", []string{"takerFeeQ9=400000", "oracleFeedId=BTCUSD"})
	if err != nil || b["status"] != "halted" || b["takerFeeQ9"] != "400000" || b["oracleFeedId"] != "BTCUSD" || b["marketId"] != "BTC-PERP" {
		t.Fatalf("body %v %v", b, err)
	}
	for _, tc := range []struct {
		id, status string
		params     []string
	}{
		{"", "live", nil},
		{"BTC-PERP", "", nil},
		{"BTC-PERP", "", []string{"takerFeeQ9"}},
		{"BTC-PERP", "", []string{"=1"}},
		{"BTC-PERP", "", []string{"takerFeeQ9=1", "takerFeeQ9=2"}},
		{"BTC-PERP", "", []string{"marketId=ETH-PERP"}},
	} {
		if _, err := marketSetBody(tc.id, tc.status, tc.params); err == nil {
			t.Errorf("marketSetBody(%q, %q, %v) accepted", tc.id, tc.status, tc.params)
		}
	}
}

func TestScriptFile(t *testing.T) {
	body, err := scriptBody("BTCUSD", "", []byte(`{"mode":"linear","points":[{"offsetMs":0,"price":"97000.5"},{"offsetMs":"60000","midQ8":"9600000000000"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pts := body["points"].([]map[string]string)
	if body["mode"] != "linear" || len(pts) != 2 || pts[0]["midQ8"] != "9700050000000" || pts[1]["offsetMs"] != "60000" {
		t.Fatalf("script body %v", body)
	}
	if b, _ := scriptBody("BTCUSD", "step", []byte(`{"mode":"linear","points":[]}`)); b["mode"] != "step" {
		t.Fatalf("--mode must override the file: %v", b)
	}
	if b, _ := scriptBody("BTCUSD", "", []byte(`{"points":[]}`)); b["mode"] != "step" {
		t.Fatalf("default mode: %v", b)
	}
	for _, bad := range []string{
		`{"points":[{"offsetMs":0}]}`,
		`{"points":[{"offsetMs":0,"price":"1","midQ8":"1"}]}`,
		`{"points":[{"offsetMs":0,"price":"1.123456789"}]}`,
		`{"points":[{"offsetMs":1.5,"price":"1"}]}`,
		`{"points":[],"extra":1}`,
		`[]`,
	} {
		if _, err := scriptBody("BTCUSD", "", []byte(bad)); err == nil {
			t.Errorf("script file %s accepted", bad)
		}
	}
}

func TestCatalogueAnchorsRefuseFeedsWithoutASource(t *testing.T) {
	starts := map[string]int64{"BTCUSD": 1, "ETHUSD": 2}
	a, err := catalogueAnchors(market.DefaultCatalogue(), starts)
	if err != nil || len(a) != 2 || a[0] != (fsm.FeedAnchor{FeedID: "BTCUSD", MidQ8: 1}) {
		t.Fatalf("anchors %v %v", a, err)
	}
	sol := market.DefaultCatalogue()[0]
	sol.MarketID, sol.Underlying, sol.OracleFeedID = "SOL-PERP", "SOL", "SOLUSD"
	if _, err := catalogueAnchors([]market.Params{sol}, starts); err == nil || !strings.Contains(err.Error(), "SOLUSD") {
		t.Fatalf("a feed without a source was accepted: %v", err)
	}
}
