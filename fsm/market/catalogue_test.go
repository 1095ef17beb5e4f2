package market

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultCatalogueShipsBTCAndETH(t *testing.T) {
	cat := DefaultCatalogue()
	if len(cat) < 2 {
		t.Fatalf("catalogue has %d markets", len(cat))
	}
	for i, p := range cat {
		if err := p.Validate(); err != nil {
			t.Fatalf("default %s invalid: %v", p.MarketID, err)
		}
		if i > 0 && cat[i-1].MarketID >= p.MarketID {
			t.Fatalf("catalogue not sorted by id at %d", i)
		}
	}
	btc, eth := cat[0], cat[1]
	want := []struct {
		name      string
		got, want any
	}{
		{"btc id", btc.MarketID, "BTC-PERP"},
		{"btc type", btc.ContractType, Inverse},
		{"btc feed", btc.OracleFeedID, "BTCUSD"},
		{"btc underlying", btc.Underlying, "BTC"},
		{"btc multiplier", btc.QuantoMultiplierMsat == nil, true},
		{"btc tick 0.5 USD", btc.TickSizeQ8, int64(50_000_000)},
		{"eth id", eth.MarketID, "ETH-PERP"},
		{"eth type", eth.ContractType, Quanto},
		{"eth feed", eth.OracleFeedID, "ETHUSD"},
		{"eth underlying", eth.Underlying, "ETH"},
		{"eth multiplier", *eth.QuantoMultiplierMsat, int64(300)},
		{"eth tick 0.05 USD", eth.TickSizeQ8, int64(5_000_000)},
		{"taker fee 0.05%", btc.TakerFeeQ9, int64(500_000)},
		{"im 1%", btc.IMRateQ9, int64(10_000_000)},
		{"mm 0.5%", btc.MMRateQ9, int64(5_000_000)},
		{"leverage 100", btc.MaxLeverage, int64(100)},
		{"staleness 10 s", btc.OracleStalenessMs, int64(10_000)},
		{"min 1", btc.MinOrderContracts, int64(1)},
		{"max 1e6", btc.MaxOrderContracts, int64(1_000_000)},
		{"funding hourly", btc.FundingIntervalMs, int64(3_600_000)},
	}
	for _, w := range want {
		if !reflect.DeepEqual(w.got, w.want) {
			t.Errorf("%s = %v, want %v", w.name, w.got, w.want)
		}
	}
	// Two calls share nothing mutable.
	*DefaultCatalogue()[1].QuantoMultiplierMsat = 7
	if *DefaultCatalogue()[1].QuantoMultiplierMsat != EthQuantoMultiplierMsat {
		t.Fatal("DefaultCatalogue shares its multiplier pointer")
	}
}

const catalogueStrings = `[
 {"marketId":"SOL-PERP","underlying":"SOL","oracleFeedId":"SOLUSD","contractType":"quanto",
  "quantoMultiplierMsat":"2000","status":"live","tickSizeQ8":"1000000","priceDp":"2",
  "minOrderContracts":"1","maxOrderContracts":"500000","takerFeeQ9":"600000",
  "imRateQ9":"20000000","mmRateQ9":"10000000","baseSpreadQ9":"300000","maxLeverage":"50",
  "oracleStalenessMs":"10000","maxFundingRateHourlyQ9":"50000"},
 {"marketId":"BTC-PERP","underlying":"BTC","oracleFeedId":"BTCUSD","contractType":"inverse",
  "quantoMultiplierMsat":null,"status":"live","tickSizeQ8":50000000,"priceDp":1,
  "minOrderContracts":1,"maxOrderContracts":1000000,"takerFeeQ9":500000,
  "imRateQ9":10000000,"mmRateQ9":5000000,"baseSpreadQ9":200000,"maxLeverage":100,
  "oracleStalenessMs":10000,"maxFundingRateHourlyQ9":50000,"fundingIntervalMs":3600000}
]`

func TestLoadCatalogueAcceptsStringsAndIntegers(t *testing.T) {
	cat, err := LoadCatalogue(strings.NewReader(catalogueStrings))
	if err != nil {
		t.Fatal(err)
	}
	if len(cat) != 2 || cat[0].MarketID != "BTC-PERP" || cat[1].MarketID != "SOL-PERP" {
		t.Fatalf("got %+v, want BTC-PERP then SOL-PERP", cat)
	}
	if !reflect.DeepEqual(cat[0], btcParams()) {
		t.Fatalf("BTC-PERP from integers = %+v, want the default", cat[0])
	}
	sol := cat[1]
	if *sol.QuantoMultiplierMsat != 2000 || sol.TickSizeQ8 != 1_000_000 || sol.MaxLeverage != 50 ||
		sol.FundingIntervalMs != FundingIntervalMs {
		t.Fatalf("SOL-PERP from strings = %+v", sol)
	}
}

func TestLoadCatalogueRoundTripsTheDefaults(t *testing.T) {
	raw, err := json.Marshal(DefaultCatalogue())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := LoadCatalogue(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cat, DefaultCatalogue()) {
		t.Fatalf("round trip differs:\n%+v\n%+v", cat, DefaultCatalogue())
	}
}

func TestLoadCatalogueRefuses(t *testing.T) {
	base := strings.Split(catalogueStrings, "\n {\"marketId\":\"BTC-PERP\"")[0]
	one := strings.TrimSuffix(strings.TrimSpace(base), ",") + "]"
	tests := []struct {
		name, doc, want string
	}{
		{"empty array", `[]`, "no markets"},
		{"not an array", `{}`, "decode"},
		{"trailing data", one + ` []`, "trailing"},
		{"unknown field", strings.Replace(one, `"status"`, `"statuss"`, 1), "unknown field"},
		{"missing tick", strings.Replace(one, `"tickSizeQ8":"1000000",`, ``, 1), "tickSizeQ8 is missing"},
		{"null tick", strings.Replace(one, `"tickSizeQ8":"1000000"`, `"tickSizeQ8":null`, 1), "tickSizeQ8 is missing"},
		{"fraction", strings.Replace(one, `"tickSizeQ8":"1000000"`, `"tickSizeQ8":0.5`, 1), "not a decimal integer"},
		{"exponent", strings.Replace(one, `"tickSizeQ8":"1000000"`, `"tickSizeQ8":1e6`, 1), "not a decimal integer"},
		{"invalid params", strings.Replace(one, `"mmRateQ9":"10000000"`, `"mmRateQ9":"20000000"`, 1), "mmRateQ9"},
		{"quanto without multiplier", strings.Replace(one, `"quantoMultiplierMsat":"2000",`, ``, 1), "needs quantoMultiplierMsat"},
		{"duplicate id", "[" + strings.TrimPrefix(strings.TrimSuffix(one, "]"), "[") + "," + strings.TrimPrefix(one, "["), "duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCatalogue(strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := LoadCatalogue(strings.NewReader(one)); err != nil {
		t.Fatalf("the unmodified single-market document must load: %v", err)
	}
}

func TestLoadCatalogueBoundsItsInput(t *testing.T) {
	big := "[" + strings.Repeat(" ", catalogueBytesMax) + "]"
	if _, err := LoadCatalogue(strings.NewReader(big)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized catalogue: err = %v", err)
	}
}
