package market

import (
	"errors"
	"testing"
)

// drive prints walkQ8 on BTCUSD every stepMs from fromMs (inclusive) to toMs
// (exclusive), calling Advance with the same time as the core would.
func drive(t testing.TB, s *State, fromMs, toMs, stepMs int64) {
	t.Helper()
	for ts := fromMs; ts < toMs; ts += stepMs {
		s.Advance(ts)
		mustPrint(t, s, "BTCUSD", walkQ8(btcQ8, ts), ts)
	}
}

func TestCandleAggregatesOHLCAndPrints(t *testing.T) {
	s := newTestState(t)
	mids := []int64{100 * Q8, 105 * Q8, 98 * Q8, 102 * Q8}
	for i, mid := range mids {
		mustPrint(t, s, "BTCUSD", mid, launchMs+int64(i+1)*1_000)
	}
	want := Candle{TsMs: launchMs, OQ8: 100 * Q8, HQ8: 105 * Q8, LQ8: 98 * Q8, CQ8: 102 * Q8, Prints: 4}
	for _, iv := range []int64{Interval1m, Interval1h, Interval1d} {
		c := mustCandles(t, s, "BTC-PERP", iv, 0, launchMs+5_000)
		if len(c) != 1 || c[0] != want {
			t.Errorf("interval %d: candles = %+v, want [%+v]", iv, c, want)
		}
	}
}

func TestCandleAlignment(t *testing.T) {
	tests := []struct {
		name     string
		interval int64
		tsMs     int64
		wantBar  int64
	}{
		{"first ms of minute", Interval1m, launchMs + minuteMs, launchMs + minuteMs},
		{"last ms of minute", Interval1m, launchMs + 2*minuteMs - 1, launchMs + minuteMs},
		{"mid-hour to hour", Interval1h, launchMs + hourMs + 59*minuteMs, launchMs + hourMs},
		{"last ms of hour", Interval1h, launchMs + 2*hourMs - 1, launchMs + hourMs},
		{"mid-day to day", Interval1d, launchMs + 36*hourMs, launchMs + 24*hourMs},
		{"first ms of day", Interval1d, launchMs + 24*hourMs, launchMs + 24*hourMs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestState(t)
			mustPrint(t, s, "BTCUSD", btcQ8, tc.tsMs)
			c := mustCandles(t, s, "BTC-PERP", tc.interval, 0, tc.tsMs)
			if len(c) != 1 || c[0].TsMs != tc.wantBar {
				t.Fatalf("bar = %+v, want tsMs %d", c, tc.wantBar)
			}
		})
	}
}

func TestCandlesSplitAtBoundary(t *testing.T) {
	s := newTestState(t)
	mustPrint(t, s, "BTCUSD", 100*Q8, launchMs+minuteMs-1)
	mustPrint(t, s, "BTCUSD", 101*Q8, launchMs+minuteMs)
	c := mustCandles(t, s, "BTC-PERP", Interval1m, 0, launchMs+minuteMs)
	if len(c) != 2 || c[0].CQ8 != 100*Q8 || c[1].OQ8 != 101*Q8 || c[0].TsMs >= c[1].TsMs {
		t.Fatalf("candles = %+v, want two bars oldest first", c)
	}
}

// aggregate folds finer bars the way a coarser bar must look.
func aggregate(bars []Candle) Candle {
	out := Candle{TsMs: bars[0].TsMs, OQ8: bars[0].OQ8, HQ8: bars[0].HQ8, LQ8: bars[0].LQ8, CQ8: bars[len(bars)-1].CQ8}
	for _, b := range bars {
		out.HQ8 = max(out.HQ8, b.HQ8)
		out.LQ8 = min(out.LQ8, b.LQ8)
		out.Prints += b.Prints
	}
	return out
}

func TestRollupsAcrossDays(t *testing.T) {
	s := newTestState(t)
	const days = 3
	end := launchMs + days*24*hourMs
	drive(t, s, launchMs+7_000, end, 10_000)
	now := end - 1
	minutes := mustCandles(t, s, "BTC-PERP", Interval1m, CandleLimitMax, now)
	hours := mustCandles(t, s, "BTC-PERP", Interval1h, CandleLimitMax, now)
	daily := mustCandles(t, s, "BTC-PERP", Interval1d, CandleLimitMax, now)
	if len(hours) != days*24 || len(daily) != days {
		t.Fatalf("got %d hours and %d days, want %d and %d", len(hours), len(daily), days*24, days)
	}
	if len(minutes) != CandleLimitMax {
		t.Fatalf("got %d minutes, want the limit %d", len(minutes), CandleLimitMax)
	}
	// The hourly bars of the last day equal the roll-up of their minutes.
	for h := 0; h < 24; h++ {
		hour := hours[len(hours)-24+h]
		got := aggregate(minutes[h*60 : (h+1)*60])
		if got != hour {
			t.Fatalf("hour %d = %+v, minutes roll up to %+v", h, hour, got)
		}
	}
	for d := 0; d < days; d++ {
		got := aggregate(hours[d*24 : (d+1)*24])
		if got != daily[d] {
			t.Fatalf("day %d = %+v, hours roll up to %+v", d, daily[d], got)
		}
		if daily[d].Prints != 8640 {
			t.Fatalf("day %d prints = %d, want 8640", d, daily[d].Prints)
		}
	}
}

func TestMinuteRetention(t *testing.T) {
	s := newTestState(t)
	const days = 6
	end := launchMs + days*24*hourMs
	drive(t, s, launchMs, end, minuteMs)
	now := end - minuteMs
	m := s.MarketsByID["BTC-PERP"]
	if len(m.Minute) != MinuteBarsMax {
		t.Fatalf("kept %d minute bars, want %d", len(m.Minute), MinuteBarsMax)
	}
	if oldest := m.Minute[0].TsMs; oldest != now-(MinuteBarsMax-1)*minuteMs {
		t.Fatalf("oldest minute bar %d, want %d (four days back)", oldest, now-(MinuteBarsMax-1)*minuteMs)
	}
	if len(m.Hour) != days*24 || m.Hour[0].TsMs != launchMs {
		t.Fatalf("hourly bars %d from %d, want %d from launch", len(m.Hour), m.Hour[0].TsMs, days*24)
	}
	if len(m.Day) != days || m.Day[0].TsMs != launchMs {
		t.Fatalf("daily bars %d from %d, want %d from launch", len(m.Day), m.Day[0].TsMs, days)
	}
}

func TestMinuteRetentionAppliesToReadsBeforePruning(t *testing.T) {
	s := newTestState(t)
	drive(t, s, launchMs, launchMs+10*minuteMs, minuteMs)
	// At `later` the retention is the 5760 minutes ending with later's
	// minute, which starts exactly at the last bar (+9 min).
	later := launchMs + 9*minuteMs + MinuteRetentionMs - minuteMs
	c := mustCandles(t, s, "BTC-PERP", Interval1m, 0, later)
	if len(c) != 1 || c[0].TsMs != launchMs+9*minuteMs {
		t.Fatalf("candles = %+v, want only the bar at +9 min", c)
	}
	if len(s.MarketsByID["BTC-PERP"].Minute) != 10 {
		t.Fatal("a read must not prune")
	}
	s.Advance(later + 2*minuteMs)
	if got := s.MarketsByID["BTC-PERP"].Minute; got != nil {
		t.Fatalf("Advance kept %d minute bars, want none", len(got))
	}
	if len(s.MarketsByID["BTC-PERP"].Hour) != 1 || len(s.MarketsByID["BTC-PERP"].Day) != 1 {
		t.Fatal("pruning minutes touched hourly or daily bars")
	}
}

func TestMinuteSeriesNeverExceedsItsBound(t *testing.T) {
	s := newTestState(t)
	// Prints without any Advance: the count bound still holds.
	for i := int64(0); i < MinuteBarsMax+50; i++ {
		mustPrint(t, s, "BTCUSD", btcQ8, launchMs+i*minuteMs)
	}
	if n := len(s.MarketsByID["BTC-PERP"].Minute); n != MinuteBarsMax {
		t.Fatalf("minute bars = %d, want %d", n, MinuteBarsMax)
	}
}

func TestCandleLimits(t *testing.T) {
	s := newTestState(t)
	drive(t, s, launchMs, launchMs+2_000*minuteMs, minuteMs)
	now := launchMs + 2_000*minuteMs
	tests := []struct {
		name     string
		market   string
		interval int64
		limit    int
		wantLen  int
		wantErr  error
	}{
		{"default", "BTC-PERP", Interval1m, 0, CandleLimitDefault, nil},
		{"one", "BTC-PERP", Interval1m, 1, 1, nil},
		{"max", "BTC-PERP", Interval1m, CandleLimitMax, CandleLimitMax, nil},
		{"over max", "BTC-PERP", Interval1m, CandleLimitMax + 1, 0, ErrInvalidLimit},
		{"negative", "BTC-PERP", Interval1m, -1, 0, ErrInvalidLimit},
		{"fewer bars than limit", "BTC-PERP", Interval1h, CandleLimitMax, 34, nil},
		{"bad interval", "BTC-PERP", 120, 0, 0, ErrInvalidInterval},
		{"unknown market", "DOGE-PERP", Interval1m, 0, 0, ErrUnknownMarket},
		{"market without bars", "ETH-PERP", Interval1m, 0, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.Candles(tc.market, tc.interval, tc.limit, now)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(c) != tc.wantLen {
				t.Fatalf("len = %d, want %d", len(c), tc.wantLen)
			}
			for i := 1; i < len(c); i++ {
				if c[i-1].TsMs >= c[i].TsMs {
					t.Fatalf("candles not oldest first at %d", i)
				}
			}
			if len(c) > 0 && tc.interval == Interval1m && c[len(c)-1].TsMs != now-minuteMs {
				t.Fatalf("newest bar %d, want %d", c[len(c)-1].TsMs, now-minuteMs)
			}
		})
	}
}
