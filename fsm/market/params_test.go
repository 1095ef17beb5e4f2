package market

import (
	"errors"
	"strings"
	"testing"
)

func btcParams() Params { return DefaultCatalogue()[0] }
func ethParams() Params { return DefaultCatalogue()[1] }

func TestParamsValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Params)
		base    func() Params
		wantErr string // substring; "" means valid
	}{
		{"btc default", func(*Params) {}, btcParams, ""},
		{"eth default", func(*Params) {}, ethParams, ""},

		{"empty market id", func(p *Params) { p.MarketID = "" }, btcParams, "marketId is empty"},
		{"lower-case market id", func(p *Params) { p.MarketID = "btc-perp" }, btcParams, "marketId"},
		{"market id at length limit", func(p *Params) { p.MarketID = strings.Repeat("A", MarketIDLenMax) }, btcParams, ""},
		{"market id over length limit", func(p *Params) { p.MarketID = strings.Repeat("A", MarketIDLenMax+1) }, btcParams, "longer than"},
		{"empty underlying", func(p *Params) { p.Underlying = "" }, btcParams, "underlying is empty"},
		{"feed with slash", func(p *Params) { p.OracleFeedID = "BTC/USD" }, btcParams, "oracleFeedId"},
		{"unknown status", func(p *Params) { p.Status = "paused" }, btcParams, "status"},
		{"reduce_only status", func(p *Params) { p.Status = StatusReduceOnly }, btcParams, ""},
		{"halted status", func(p *Params) { p.Status = StatusHalted }, btcParams, ""},

		{"unknown contract type", func(p *Params) { p.ContractType = "linear" }, btcParams, "contractType"},
		{"inverse with multiplier", func(p *Params) { p.QuantoMultiplierMsat = ptr(100) }, btcParams, "must not have quantoMultiplierMsat"},
		{"quanto without multiplier", func(p *Params) { p.QuantoMultiplierMsat = nil }, ethParams, "needs quantoMultiplierMsat"},
		{"quanto zero multiplier", func(p *Params) { p.QuantoMultiplierMsat = ptr(0) }, ethParams, "quantoMultiplierMsat"},
		{"quanto multiplier one", func(p *Params) { p.QuantoMultiplierMsat = ptr(1) }, ethParams, ""},
		{"quanto multiplier at max", func(p *Params) { p.QuantoMultiplierMsat = ptr(QuantoMultiplierMsatMax) }, ethParams, ""},
		{"quanto multiplier over max", func(p *Params) { p.QuantoMultiplierMsat = ptr(QuantoMultiplierMsatMax + 1) }, ethParams, "quantoMultiplierMsat"},

		{"zero tick", func(p *Params) { p.TickSizeQ8 = 0 }, btcParams, "tickSizeQ8 0 must be positive"},
		{"negative tick", func(p *Params) { p.TickSizeQ8 = -1 }, btcParams, "tickSizeQ8"},
		{"one-unit tick at 8 dp", func(p *Params) { p.TickSizeQ8, p.PriceDp = 1, 8 }, btcParams, ""},
		{"tick finer than dp", func(p *Params) { p.TickSizeQ8, p.PriceDp = 5_000_000, 1 }, btcParams, "finer than priceDp"},
		{"dp over 8", func(p *Params) { p.PriceDp = 9 }, btcParams, "priceDp"},
		{"negative dp", func(p *Params) { p.PriceDp = -1 }, btcParams, "priceDp"},

		{"min zero", func(p *Params) { p.MinOrderContracts = 0 }, btcParams, "minOrderContracts"},
		{"min equals max", func(p *Params) { p.MinOrderContracts, p.MaxOrderContracts = 5, 5 }, btcParams, ""},
		{"max below min", func(p *Params) { p.MinOrderContracts, p.MaxOrderContracts = 5, 4 }, btcParams, "below minOrderContracts"},
		{"max at ceiling", func(p *Params) { p.MaxOrderContracts = OrderContractsCeiling }, btcParams, ""},
		{"max over ceiling", func(p *Params) { p.MaxOrderContracts = OrderContractsCeiling + 1 }, btcParams, "maxOrderContracts"},

		{"negative fee", func(p *Params) { p.TakerFeeQ9 = -1 }, btcParams, "takerFeeQ9"},
		{"zero fee", func(p *Params) { p.TakerFeeQ9 = 0 }, btcParams, ""},
		{"fee at max", func(p *Params) { p.TakerFeeQ9 = FeeOrSpreadQ9Max }, btcParams, ""},
		{"fee over max", func(p *Params) { p.TakerFeeQ9 = FeeOrSpreadQ9Max + 1 }, btcParams, "takerFeeQ9"},
		{"spread over max", func(p *Params) { p.BaseSpreadQ9 = FeeOrSpreadQ9Max + 1 }, btcParams, "baseSpreadQ9"},

		{"leverage zero", func(p *Params) { p.MaxLeverage = 0 }, btcParams, "maxLeverage"},
		{"leverage over ceiling", func(p *Params) { p.MaxLeverage = MaxLeverageCeiling + 1 }, btcParams, "maxLeverage"},
		{"im exactly 1/maxLeverage", func(p *Params) { p.MaxLeverage, p.IMRateQ9 = 100, 10_000_000 }, btcParams, ""},
		{"im one below 1/maxLeverage", func(p *Params) { p.MaxLeverage, p.IMRateQ9 = 100, 9_999_999 }, btcParams, "below 1e9/maxLeverage"},
		{"im non-integral boundary", func(p *Params) { p.MaxLeverage, p.IMRateQ9, p.MMRateQ9 = 3, 333_333_333, 1 }, btcParams, "below 1e9/maxLeverage"},
		{"im just above non-integral boundary", func(p *Params) { p.MaxLeverage, p.IMRateQ9, p.MMRateQ9 = 3, 333_333_334, 1 }, btcParams, ""},
		{"im 100%", func(p *Params) { p.MaxLeverage, p.IMRateQ9 = 1, Q9 }, btcParams, ""},
		{"im over 100%", func(p *Params) { p.MaxLeverage, p.IMRateQ9 = 1, Q9+1 }, btcParams, "imRateQ9"},
		{"mm equals im", func(p *Params) { p.MMRateQ9 = p.IMRateQ9 }, btcParams, "below imRateQ9"},
		{"mm one below im", func(p *Params) { p.MMRateQ9 = p.IMRateQ9 - 1 }, btcParams, ""},
		{"mm zero", func(p *Params) { p.MMRateQ9 = 0 }, btcParams, "mmRateQ9"},
		{"funding cap negative", func(p *Params) { p.MaxFundingRateHourlyQ9 = -1 }, btcParams, "maxFundingRateHourlyQ9"},
		{"funding cap zero", func(p *Params) { p.MaxFundingRateHourlyQ9 = 0 }, btcParams, ""},

		{"staleness at min", func(p *Params) { p.OracleStalenessMs = OracleStalenessMsMin }, btcParams, ""},
		{"staleness below min", func(p *Params) { p.OracleStalenessMs = OracleStalenessMsMin - 1 }, btcParams, "oracleStalenessMs"},
		{"staleness at max", func(p *Params) { p.OracleStalenessMs = OracleStalenessMsMax }, btcParams, ""},
		{"staleness over max", func(p *Params) { p.OracleStalenessMs = OracleStalenessMsMax + 1 }, btcParams, "oracleStalenessMs"},
		{"funding interval 8h", func(p *Params) { p.FundingIntervalMs = 8 * FundingIntervalMs }, btcParams, "fundingIntervalMs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.base()
			tc.mutate(&p)
			err := p.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q, got nil", tc.wantErr)
			}
			if !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("error %v does not wrap ErrInvalidParams", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestSetParamsKeepsContractIdentity(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Params)
		want   error
	}{
		{"fee change allowed", func(p *Params) { p.TakerFeeQ9 = 400_000 }, nil},
		{"feed change allowed", func(p *Params) { p.OracleFeedID = "ETHUSD2" }, nil},
		{"multiplier change refused", func(p *Params) { p.QuantoMultiplierMsat = ptr(200) }, ErrImmutableField},
		{"contract type change refused", func(p *Params) { p.ContractType, p.QuantoMultiplierMsat = Inverse, nil }, ErrImmutableField},
		{"underlying change refused", func(p *Params) { p.Underlying = "ETC" }, ErrImmutableField},
		{"invalid params refused", func(p *Params) { p.TickSizeQ8 = 0 }, ErrInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestState(t)
			before := encode(t, s)
			p := ethParams()
			tc.mutate(&p)
			err := s.SetParams(launchMs, p)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want != nil && string(encode(t, s)) != string(before) {
				t.Fatal("refused SetParams changed the state")
			}
			if tc.want == nil {
				got, _ := s.Market("ETH-PERP")
				if got.OracleFeedID != p.OracleFeedID || got.TakerFeeQ9 != p.TakerFeeQ9 {
					t.Fatalf("params not applied: %+v", got.Params)
				}
			}
		})
	}
}

func TestSetParamsRepointsFeed(t *testing.T) {
	s := newTestState(t)
	p := ethParams()
	p.OracleFeedID = "ETHUSD2"
	if err := s.SetParams(launchMs, p); err != nil {
		t.Fatal(err)
	}
	if got := s.FeedsByID["ETHUSD"].MarketIDs; len(got) != 0 {
		t.Fatalf("old feed still lists %v", got)
	}
	if got := s.FeedsByID["ETHUSD2"].MarketIDs; len(got) != 1 || got[0] != "ETH-PERP" {
		t.Fatalf("new feed lists %v", got)
	}
	mustPrint(t, s, "ETHUSD2", ethQ8, launchMs+1000)
	if lp, ok := s.LastPrint("ETH-PERP"); !ok || lp.MidQ8 != ethQ8 {
		t.Fatalf("market does not follow the new feed: %+v %v", lp, ok)
	}
}

func TestSetParamsDoesNotAliasCallerMultiplier(t *testing.T) {
	s := NewState()
	p := ethParams()
	if err := s.SetParams(launchMs, p); err != nil {
		t.Fatal(err)
	}
	*p.QuantoMultiplierMsat = 999
	if got := *s.MarketsByID["ETH-PERP"].Params.QuantoMultiplierMsat; got != EthQuantoMultiplierMsat {
		t.Fatalf("state multiplier changed through the caller's pointer: %d", got)
	}
}

func TestMarketsBound(t *testing.T) {
	s := NewState()
	for i := range MarketsMax {
		p := btcParams()
		p.MarketID = "M" + string(rune('A'+i/26)) + string(rune('A'+i%26))
		if err := s.SetParams(launchMs, p); err != nil {
			t.Fatalf("market %d: %v", i, err)
		}
	}
	p := btcParams()
	p.MarketID = "ONE-TOO-MANY"
	if err := s.SetParams(launchMs, p); !errors.Is(err, ErrTooManyMarkets) {
		t.Fatalf("market %d: err = %v, want ErrTooManyMarkets", MarketsMax+1, err)
	}
}

func TestSetStatus(t *testing.T) {
	s := newTestState(t)
	for _, st := range []Status{StatusReduceOnly, StatusHalted, StatusLive} {
		if err := s.SetStatus("BTC-PERP", st); err != nil {
			t.Fatalf("SetStatus(%s): %v", st, err)
		}
		if got, _ := s.Market("BTC-PERP"); got.Status != st {
			t.Fatalf("status = %s, want %s", got.Status, st)
		}
	}
	if err := s.SetStatus("BTC-PERP", "closed"); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("bad status: err = %v", err)
	}
	if err := s.SetStatus("DOGE-PERP", StatusHalted); !errors.Is(err, ErrUnknownMarket) {
		t.Fatalf("unknown market: err = %v", err)
	}
}
