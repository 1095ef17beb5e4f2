package market

import (
	"errors"
	"testing"
)

func TestSkewAndFundingRate(t *testing.T) {
	const capQ9 = 50_000
	tests := []struct {
		name        string
		long, short int64
		wantSkew    int64
		wantRate    int64
	}{
		{"no open interest", 0, 0, 0, 0},
		{"balanced", 500, 500, 0, 0},
		{"all long", 10, 0, Q9, capQ9},
		{"all short", 0, 10, -Q9, -capQ9},
		{"60/40 long", 60, 40, 200_000_000, 20_000},
		{"40/60 mirrors 60/40", 40, 60, -200_000_000, -20_000},
		{"exactly at the cap", 75, 25, 500_000_000, capQ9},
		{"just under the cap", 749, 251, 498_000_000, 49_800},
		// 2/3 long: 333_333_333.33 truncates to 333_333_333 (toward zero),
		// and its mirror to -333_333_333, never -333_333_334.
		{"thirds truncate toward zero", 2, 1, 333_333_333, 33_333},
		{"mirrored thirds", 1, 2, -333_333_333, -33_333},
		{"huge book needs 128 bits", 9_000_000_000_000, 1_000_000_000_000, 800_000_000, capQ9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			skew := SkewQ9(tc.long, tc.short)
			if skew != tc.wantSkew {
				t.Fatalf("skew = %d, want %d", skew, tc.wantSkew)
			}
			if rate := FundingRateHourlyQ9(skew, capQ9); rate != tc.wantRate {
				t.Fatalf("rate = %d, want %d", rate, tc.wantRate)
			}
		})
	}
	if got := FundingRateHourlyQ9(Q9, 0); got != 0 {
		t.Fatalf("zero cap must pin the rate to 0, got %d", got)
	}
}

func TestFundingBoundaryRecordedWhenTimeReachesIt(t *testing.T) {
	s := newTestState(t)
	mustPrint(t, s, "BTCUSD", btcQ8, launchMs+hourMs-2_000)
	if err := s.AddOpenInterest("BTC-PERP", Long, 60); err != nil {
		t.Fatal(err)
	}
	if err := s.AddOpenInterest("BTC-PERP", Short, 40); err != nil {
		t.Fatal(err)
	}
	if ev := s.Advance(launchMs + hourMs - 1); len(ev) != 0 {
		t.Fatalf("events before the boundary: %+v", ev)
	}
	ev := s.Advance(launchMs + hourMs)
	if len(ev) != 2 || ev[0].MarketID != "BTC-PERP" || ev[1].MarketID != "ETH-PERP" {
		t.Fatalf("events = %+v, want one per market in id order", ev)
	}
	want := FundingEvent{
		MarketID: "BTC-PERP", BoundaryTsMs: launchMs + hourMs, RateQ9: 20_000, SkewQ9: 200_000_000,
		MarkQ8: btcQ8, MarkTsMs: launchMs + hourMs - 2_000,
	}
	if ev[0] != want {
		t.Fatalf("BTC event = %+v, want %+v", ev[0], want)
	}
	if eth := ev[1]; !eth.MarkStale || eth.MarkQ8 != 0 || eth.RateQ9 != 0 {
		t.Fatalf("ETH event without prints = %+v, want stale, no mark, rate 0", eth)
	}
	if ev := s.Advance(launchMs + hourMs + 1); len(ev) != 0 {
		t.Fatalf("boundary recorded twice: %+v", ev)
	}
	h, _ := s.Funding("BTC-PERP")
	if len(h) != 1 || h[0] != (FundingEntry{TsMs: launchMs + hourMs, RateQ9: 20_000, SkewQ9: 200_000_000}) {
		t.Fatalf("history = %+v", h)
	}
	if v, _ := s.Market("BTC-PERP"); v.NextFundingTsMs != launchMs+2*hourMs {
		t.Fatalf("nextFundingTsMs = %d, want the following hour", v.NextFundingTsMs)
	}
}

func TestFundingMissedHoursRecordOnlyTheLatest(t *testing.T) {
	s := newTestState(t)
	now := launchMs + 5*hourMs + 17*minuteMs // boundaries +1h..+5h passed unseen
	ev := s.Advance(now)
	if len(ev) != 2 {
		t.Fatalf("events = %+v", ev)
	}
	if ev[0].BoundaryTsMs != launchMs+5*hourMs || ev[0].SkippedBoundaries != 4 {
		t.Fatalf("event = %+v, want boundary +5h with 4 skipped", ev[0])
	}
	h, _ := s.Funding("BTC-PERP")
	if len(h) != 1 || h[0].TsMs != launchMs+5*hourMs {
		t.Fatalf("history = %+v, want only +5h", h)
	}
	if v, _ := s.Market("BTC-PERP"); v.NextFundingTsMs != launchMs+6*hourMs {
		t.Fatalf("nextFundingTsMs = %d, want +6h", v.NextFundingTsMs)
	}
}

func TestFundingHistoryKeepsTheLast100(t *testing.T) {
	s := newTestState(t)
	const hours = 150
	for h := int64(1); h <= hours; h++ {
		// Skew changes every hour so entries are distinguishable.
		if err := s.AddOpenInterest("BTC-PERP", Long, 1); err != nil {
			t.Fatal(err)
		}
		if ev := s.Advance(launchMs + h*hourMs); len(ev) != 2 || ev[0].SkippedBoundaries != 0 {
			t.Fatalf("hour %d: events %+v", h, ev)
		}
	}
	h, err := s.Funding("BTC-PERP")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != FundingHistoryMax {
		t.Fatalf("history length %d, want %d", len(h), FundingHistoryMax)
	}
	for i, e := range h {
		wantTs := launchMs + int64(hours-FundingHistoryMax+1+i)*hourMs
		if e.TsMs != wantTs {
			t.Fatalf("entry %d at %d, want %d (oldest first, last 100)", i, e.TsMs, wantTs)
		}
	}
	if cap(s.MarketsByID["BTC-PERP"].Funding) > 2*FundingHistoryMax {
		t.Fatal("funding history backing array grows without bound")
	}
	h[0].RateQ9 = 123_456_789
	if again, _ := s.Funding("BTC-PERP"); again[0].RateQ9 == 123_456_789 {
		t.Fatal("Funding returns the state's own slice")
	}
	if _, err := s.Funding("DOGE-PERP"); !errors.Is(err, ErrUnknownMarket) {
		t.Fatalf("unknown market: err = %v", err)
	}
}

func TestAdvanceIgnoresTimeGoingBackwards(t *testing.T) {
	s := newTestState(t)
	s.Advance(launchMs + 2*hourMs)
	before := encode(t, s)
	if ev := s.Advance(launchMs + hourMs); len(ev) != 0 {
		t.Fatalf("events when time went back: %+v", ev)
	}
	if string(before) != string(encode(t, s)) {
		t.Fatal("Advance with an older time changed the state")
	}
}

func TestMarketCreatedWithoutTimeSchedulesOnFirstAdvance(t *testing.T) {
	s, err := New(0, DefaultCatalogue())
	if err != nil {
		t.Fatal(err)
	}
	if ev := s.Advance(launchMs + 30*minuteMs); len(ev) != 0 {
		t.Fatalf("first Advance recorded %+v", ev)
	}
	if v, _ := s.Market("BTC-PERP"); v.NextFundingTsMs != launchMs+hourMs {
		t.Fatalf("nextFundingTsMs = %d, want %d", v.NextFundingTsMs, launchMs+hourMs)
	}
}
