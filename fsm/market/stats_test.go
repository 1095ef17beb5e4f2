package market

import (
	"bytes"
	"errors"
	"testing"
)

func mustFill(t testing.TB, s *State, market string, contracts, tsMs int64) {
	t.Helper()
	if err := s.RecordFill(market, contracts, tsMs); err != nil {
		t.Fatalf("RecordFill(%s, %d, %d): %v", market, contracts, tsMs, err)
	}
}

func TestVolumeAbsentBeforeFirstFillAndZeroAfter(t *testing.T) {
	s := newTestState(t)
	drive(t, s, launchMs, launchMs+5*minuteMs, minuteMs) // bars at +0..+4 min
	firstFill := launchMs + 2*minuteMs + 30_000
	mustFill(t, s, "BTC-PERP", 25, firstFill)
	mustFill(t, s, "BTC-PERP", 5, firstFill+1)
	now := launchMs + 5*minuteMs
	minutes := mustCandles(t, s, "BTC-PERP", Interval1m, 0, now)
	want := []*int64{nil, nil, ptr(30), ptr(0), ptr(0)}
	for i, c := range minutes {
		switch {
		case want[i] == nil && c.VolumeContracts != nil:
			t.Errorf("bar %d before the first fill reports volume %d", i, *c.VolumeContracts)
		case want[i] != nil && (c.VolumeContracts == nil || *c.VolumeContracts != *want[i]):
			t.Errorf("bar %d volume = %v, want %d", i, c.VolumeContracts, *want[i])
		}
	}
	// A bar opened after the fill reports 0, not absent.
	mustPrint(t, s, "BTCUSD", btcQ8, launchMs+10*minuteMs)
	last := mustCandles(t, s, "BTC-PERP", Interval1m, 1, launchMs+10*minuteMs)[0]
	if last.VolumeContracts == nil || *last.VolumeContracts != 0 {
		t.Fatalf("bar after the first fill: volume %v, want 0", last.VolumeContracts)
	}
	// The hour and the day contain the fill.
	for _, iv := range []int64{Interval1h, Interval1d} {
		c := mustCandles(t, s, "BTC-PERP", iv, 1, now)[0]
		if c.VolumeContracts == nil || *c.VolumeContracts != 30 {
			t.Errorf("interval %d volume = %v, want 30", iv, c.VolumeContracts)
		}
	}
	// Other markets are untouched.
	mustPrint(t, s, "ETHUSD", ethQ8, now)
	if c := mustCandles(t, s, "ETH-PERP", Interval1m, 1, now)[0]; c.VolumeContracts != nil {
		t.Fatal("ETH-PERP reports volume without any fill of its own")
	}
}

func TestFillBeforeThePrintOpensAPlaceholderBar(t *testing.T) {
	s := newTestState(t)
	mustPrint(t, s, "BTCUSD", 100*Q8, launchMs+59_000)
	mustFill(t, s, "BTC-PERP", 7, launchMs+minuteMs+100) // the next minute has no print yet
	c := mustCandles(t, s, "BTC-PERP", Interval1m, 0, launchMs+minuteMs+100)
	if len(c) != 2 {
		t.Fatalf("candles = %+v, want two", c)
	}
	ph := c[1]
	if ph.Prints != 0 || ph.OQ8 != 100*Q8 || ph.CQ8 != 100*Q8 || *ph.VolumeContracts != 7 {
		t.Fatalf("placeholder = %+v, want the previous close, 0 prints, volume 7", ph)
	}
	mustPrint(t, s, "BTCUSD", 103*Q8, launchMs+minuteMs+900)
	mustPrint(t, s, "BTCUSD", 102*Q8, launchMs+minuteMs+1_900)
	c = mustCandles(t, s, "BTC-PERP", Interval1m, 0, launchMs+minuteMs+1_900)
	got := c[1]
	want := Candle{TsMs: launchMs + minuteMs, OQ8: 103 * Q8, HQ8: 103 * Q8, LQ8: 102 * Q8, CQ8: 102 * Q8, Prints: 2, VolumeContracts: ptr(7)}
	if got.TsMs != want.TsMs || got.OQ8 != want.OQ8 || got.HQ8 != want.HQ8 || got.LQ8 != want.LQ8 ||
		got.CQ8 != want.CQ8 || got.Prints != want.Prints || *got.VolumeContracts != 7 {
		t.Fatalf("bar after prints = %+v, want %+v", got, want)
	}
	st, _ := s.Stats24h("BTC-PERP", launchMs+minuteMs+1_900)
	if *st.HiQ8 != 103*Q8 || *st.LoQ8 != 100*Q8 {
		t.Fatalf("stats hi/lo = %d/%d", *st.HiQ8, *st.LoQ8)
	}
}

func TestRecordFillRefusals(t *testing.T) {
	s := newTestState(t)
	if err := s.RecordFill("BTC-PERP", 1, launchMs); !errors.Is(err, ErrNoPrice) {
		t.Fatalf("fill without a price: err = %v", err)
	}
	mustPrint(t, s, "BTCUSD", btcQ8, launchMs+1_000)
	before := encode(t, s)
	for _, tc := range []struct {
		name      string
		market    string
		contracts int64
		ts        int64
		want      error
	}{
		{"unknown market", "DOGE-PERP", 1, launchMs, ErrUnknownMarket},
		{"zero contracts", "BTC-PERP", 0, launchMs, ErrBadFill},
		{"negative contracts", "BTC-PERP", -1, launchMs, ErrBadFill},
		{"over ceiling", "BTC-PERP", OrderContractsCeiling + 1, launchMs, ErrBadFill},
		{"zero timestamp", "BTC-PERP", 1, 0, ErrBadFill},
	} {
		if err := s.RecordFill(tc.market, tc.contracts, tc.ts); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if !bytes.Equal(before, encode(t, s)) {
		t.Fatal("refused fills changed the state")
	}
}

func TestStats24hWithoutData(t *testing.T) {
	s := newTestState(t)
	st, err := s.Stats24h("BTC-PERP", launchMs)
	if err != nil {
		t.Fatal(err)
	}
	if st.HiQ8 != nil || st.LoQ8 != nil {
		t.Fatalf("hi/lo with no data = %v/%v, want null", st.HiQ8, st.LoQ8)
	}
	if !st.Truncated || st.Fills != 0 || st.VolumeContracts != 0 {
		t.Fatalf("stats = %+v, want truncated with zero fills", st)
	}
	if st.WindowMs != 86_400_000 || st.Basis != "rolling_1m_bars" || st.MarketID != "BTC-PERP" {
		t.Fatalf("window/basis = %d/%q", st.WindowMs, st.Basis)
	}
	if _, err := s.Stats24h("DOGE-PERP", launchMs); !errors.Is(err, ErrUnknownMarket) {
		t.Fatalf("unknown market: err = %v", err)
	}
}

func TestStats24hWindow(t *testing.T) {
	s := newTestState(t)
	// Day one: a spike to 200 and a fill of 1000, both more than 24h before
	// the read. Day two: prices 100..110 and fills of 10 and 20.
	mustPrint(t, s, "BTCUSD", 200*Q8, launchMs+1_000)
	mustFill(t, s, "BTC-PERP", 1_000, launchMs+1_000)
	for i := int64(0); i <= 10; i++ {
		mustPrint(t, s, "BTCUSD", (100+i)*Q8, launchMs+26*hourMs+i*minuteMs)
	}
	mustFill(t, s, "BTC-PERP", 10, launchMs+26*hourMs)
	mustFill(t, s, "BTC-PERP", 20, launchMs+27*hourMs)

	tests := []struct {
		name      string
		nowMs     int64
		fills     int64
		volume    int64
		hi, lo    *int64
		truncated bool
	}{
		{"window still holds the spike's minute", launchMs + 24*hourMs - 1, 1, 1_000, ptr(200 * Q8), ptr(200 * Q8), true},
		{"spike minute just left", launchMs + 24*hourMs, 0, 0, nil, nil, false},
		{"bars after now are outside the window", launchMs + 26*hourMs + 5*minuteMs, 1, 10, ptr(105 * Q8), ptr(100 * Q8), false},
		{"day two only", launchMs + 28*hourMs, 2, 30, ptr(110 * Q8), ptr(100 * Q8), false},
		{"everything left the window", launchMs + 52*hourMs, 0, 0, nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.Advance(tc.nowMs)
			st, err := s.Stats24h("BTC-PERP", tc.nowMs)
			if err != nil {
				t.Fatal(err)
			}
			if st.Fills != tc.fills || st.VolumeContracts != tc.volume || st.Truncated != tc.truncated {
				t.Fatalf("stats = %+v, want fills %d volume %d truncated %v", st, tc.fills, tc.volume, tc.truncated)
			}
			if (st.HiQ8 == nil) != (tc.hi == nil) || (tc.hi != nil && (*st.HiQ8 != *tc.hi || *st.LoQ8 != *tc.lo)) {
				t.Fatalf("hi/lo = %v/%v, want %v/%v", st.HiQ8, st.LoQ8, tc.hi, tc.lo)
			}
		})
	}
}

func TestStats24hTruncatedUntilADayOfPrints(t *testing.T) {
	s := newTestState(t)
	first := launchMs + 30_000
	mustPrint(t, s, "BTCUSD", btcQ8, first)
	// The window is the 1440 minutes ending with now's minute: it starts at
	// floor(now) - 1439 min and is truncated while that start precedes the
	// first print.
	tests := []struct {
		name  string
		nowMs int64
		want  bool
	}{
		{"at the first print", first, true},
		{"window starts at launch, 30 s before the first print", launchMs + 24*hourMs - 1, true},
		{"window starts one minute after launch", launchMs + 24*hourMs, false},
	}
	for _, tc := range tests {
		st, _ := s.Stats24h("BTC-PERP", tc.nowMs)
		if st.Truncated != tc.want {
			t.Errorf("%s: truncated = %v, want %v", tc.name, st.Truncated, tc.want)
		}
	}
}
