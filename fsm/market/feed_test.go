package market

import (
	"bytes"
	"errors"
	"testing"
)

func TestApplyPrintRefusals(t *testing.T) {
	last := launchMs + 5_000
	tests := []struct {
		name                 string
		feed                 string
		mid, conf, ts, nowMs int64
		want                 error
	}{
		{"accepted", "BTCUSD", btcQ8, 300_000, last + 1, last + 1, nil},
		{"unknown feed", "DOGEUSD", btcQ8, 0, last + 1, last + 1, ErrUnknownFeed},
		{"zero mid", "BTCUSD", 0, 0, last + 1, last + 1, ErrBadPrint},
		{"negative mid", "BTCUSD", -1, 0, last + 1, last + 1, ErrBadPrint},
		{"mid at max", "BTCUSD", PriceQ8Max, 0, last + 1, last + 1, nil},
		{"mid over max", "BTCUSD", PriceQ8Max + 1, 0, last + 1, last + 1, ErrBadPrint},
		{"negative conf", "BTCUSD", btcQ8, -1, last + 1, last + 1, ErrBadPrint},
		{"conf over 100%", "BTCUSD", btcQ8, Q9 + 1, last + 1, last + 1, ErrBadPrint},
		{"same timestamp", "BTCUSD", btcQ8, 0, last, last + 1, ErrPrintOutOfOrder},
		{"older timestamp", "BTCUSD", btcQ8, 0, last - 1, last + 1, ErrPrintOutOfOrder},
		{"future at tolerance", "BTCUSD", btcQ8, 0, last + 1 + PrintFutureToleranceMs, last + 1, nil},
		{"future beyond tolerance", "BTCUSD", btcQ8, 0, last + 2 + PrintFutureToleranceMs, last + 1, ErrPrintInFuture},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestState(t)
			mustPrint(t, s, "BTCUSD", btcQ8, last)
			before := encode(t, s)
			err := s.ApplyPrint(tc.nowMs, tc.feed, tc.mid, tc.conf, tc.ts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			changed := !bytes.Equal(before, encode(t, s))
			if tc.want != nil && changed {
				t.Fatal("a refused print changed the state")
			}
			if tc.want == nil {
				got, _ := s.FeedLast("BTCUSD")
				if got != (Print{MidQ8: tc.mid, ConfQ9: tc.conf, TsMs: tc.ts}) {
					t.Fatalf("last print = %+v", got)
				}
			}
		})
	}
}

func TestApplyPrintUpdatesEveryMarketOnTheFeed(t *testing.T) {
	s := newTestState(t)
	p := btcParams()
	p.MarketID = "BTC-PERP-2"
	if err := s.SetParams(launchMs, p); err != nil {
		t.Fatal(err)
	}
	mustPrint(t, s, "BTCUSD", btcQ8, launchMs+1_000)
	for _, id := range []string{"BTC-PERP", "BTC-PERP-2"} {
		c := mustCandles(t, s, id, Interval1m, 0, launchMs+1_000)
		if len(c) != 1 || c[0].CQ8 != btcQ8 {
			t.Fatalf("%s candles = %+v", id, c)
		}
	}
	if c := mustCandles(t, s, "ETH-PERP", Interval1m, 0, launchMs+1_000); len(c) != 0 {
		t.Fatalf("ETH-PERP took a BTCUSD print: %+v", c)
	}
}

func TestIsStale(t *testing.T) {
	s := newTestState(t)
	staleness := btcParams().OracleStalenessMs
	if !s.IsStale("BTC-PERP", launchMs) {
		t.Fatal("a market without prints must be stale")
	}
	ts := launchMs + 1_000
	mustPrint(t, s, "BTCUSD", btcQ8, ts)
	tests := []struct {
		name  string
		nowMs int64
		want  bool
	}{
		{"at print time", ts, false},
		{"one ms before threshold", ts + staleness - 1, false},
		{"exactly at threshold", ts + staleness, false},
		{"one ms past threshold", ts + staleness + 1, true},
	}
	for _, tc := range tests {
		if got := s.IsStale("BTC-PERP", tc.nowMs); got != tc.want {
			t.Errorf("%s: IsStale = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !s.IsStale("ETH-PERP", ts) {
		t.Error("ETH-PERP has no print and must be stale")
	}
	if !s.IsStale("DOGE-PERP", ts) {
		t.Error("an unknown market must be stale")
	}
}

func TestMarketViewCarriesLastPriceAndDerivedFields(t *testing.T) {
	s := newTestState(t)
	v, err := s.Market("BTC-PERP")
	if err != nil {
		t.Fatal(err)
	}
	if v.LastPrice != nil {
		t.Fatalf("lastPrice before any print = %+v, want nil", v.LastPrice)
	}
	if v.NextFundingTsMs != launchMs+hourMs {
		t.Fatalf("nextFundingTsMs = %d, want %d", v.NextFundingTsMs, launchMs+hourMs)
	}
	mustPrint(t, s, "BTCUSD", btcQ8, launchMs+1_000)
	if err := s.AddOpenInterest("BTC-PERP", Long, 300); err != nil {
		t.Fatal(err)
	}
	if err := s.AddOpenInterest("BTC-PERP", Short, 100); err != nil {
		t.Fatal(err)
	}
	v, _ = s.Market("BTC-PERP")
	if v.LastPrice == nil || *v.LastPrice != (LastPrice{MidQ8: btcQ8, TsMs: launchMs + 1_000}) {
		t.Fatalf("lastPrice = %+v", v.LastPrice)
	}
	if v.OpenInterestContracts != 400 || v.SkewQ9 != 500_000_000 || v.FundingRateHourlyQ9 != 50_000 {
		t.Fatalf("oi %d skew %d rate %d", v.OpenInterestContracts, v.SkewQ9, v.FundingRateHourlyQ9)
	}
	all := s.Markets()
	if len(all) != 2 || all[0].MarketID != "BTC-PERP" || all[1].MarketID != "ETH-PERP" {
		t.Fatalf("Markets() not sorted by id: %v", all)
	}
	if _, err := s.Market("DOGE-PERP"); !errors.Is(err, ErrUnknownMarket) {
		t.Fatalf("unknown market: err = %v", err)
	}
	tk := s.Ticker(launchMs + 2_000)
	if tk.AsOfMs != launchMs+2_000 || len(tk.Tickers) != 2 || tk.Tickers[0].Last == nil || tk.Tickers[1].Last != nil ||
		tk.Tickers[0].StalenessMs != 10_000 {
		t.Fatalf("ticker = %+v", tk)
	}
}

func TestAddOpenInterest(t *testing.T) {
	tests := []struct {
		name  string
		side  Side
		delta int64
		want  error
	}{
		{"open long", Long, 10, nil},
		{"close all long", Long, -5, nil},
		{"close more than open", Long, -6, ErrInvalidOI},
		{"bad side", Side(0), 1, ErrInvalidOI},
		{"over bound", Short, OrderContractsCeiling*1_000_000 + 1, ErrInvalidOI},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestState(t)
			if err := s.AddOpenInterest("BTC-PERP", Long, 5); err != nil {
				t.Fatal(err)
			}
			err := s.AddOpenInterest("BTC-PERP", tc.side, tc.delta)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want != nil && s.MarketsByID["BTC-PERP"].LongOIContracts != 5 {
				t.Fatal("a refused change moved open interest")
			}
		})
	}
	s := newTestState(t)
	if err := s.AddOpenInterest("DOGE-PERP", Long, 1); !errors.Is(err, ErrUnknownMarket) {
		t.Fatalf("unknown market: err = %v", err)
	}
}
