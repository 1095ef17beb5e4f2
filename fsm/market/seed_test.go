package market

import (
	"errors"
	"reflect"
	"testing"
)

func TestSeededDailyBarsShape(t *testing.T) {
	launch := launchMs + 13*hourMs // mid-day launch: bars still end the day before
	bars, err := SeededDailyBars(launch, 42, btcQ8, SeedDays)
	if err != nil {
		t.Fatal(err)
	}
	if len(bars) != SeedDays {
		t.Fatalf("%d bars, want %d", len(bars), SeedDays)
	}
	if last := bars[len(bars)-1]; last.TsMs != launchMs-dayMs || last.CQ8 != btcQ8 {
		t.Fatalf("last bar %+v, want the day before launch closing at the anchor", last)
	}
	if bars[0].TsMs != launchMs-SeedDays*dayMs {
		t.Fatalf("first bar at %d, want %d", bars[0].TsMs, launchMs-SeedDays*dayMs)
	}
	moved := 0
	for i, b := range bars {
		if !b.Seeded || b.Prints != 0 || b.VolumeContracts != 0 || b.Fills != 0 {
			t.Fatalf("bar %d = %+v, want seeded with no prints or volume", i, b)
		}
		if b.TsMs%dayMs != 0 {
			t.Fatalf("bar %d not day-aligned", i)
		}
		if b.LQ8 <= 0 || b.LQ8 > min(b.OQ8, b.CQ8) || b.HQ8 < max(b.OQ8, b.CQ8) {
			t.Fatalf("bar %d has inconsistent o/h/l/c: %+v", i, b)
		}
		if i > 0 {
			if b.TsMs != bars[i-1].TsMs+dayMs || b.OQ8 != bars[i-1].CQ8 {
				t.Fatalf("bar %d does not continue bar %d", i, i-1)
			}
		}
		if b.OQ8 != b.CQ8 {
			moved++
		}
		// A 3% daily walk over 90 days stays within a few times its range.
		if b.CQ8 < btcQ8/4 || b.CQ8 > btcQ8*4 {
			t.Fatalf("bar %d close %d wandered implausibly far from the anchor", i, b.CQ8)
		}
	}
	if moved < SeedDays-2 {
		t.Fatalf("only %d of %d bars moved: the walk is degenerate", moved, SeedDays)
	}
}

func TestSeededDailyBarsAreDeterministic(t *testing.T) {
	a, _ := SeededDailyBars(launchMs, 7, btcQ8, SeedDays)
	b, _ := SeededDailyBars(launchMs, 7, btcQ8, SeedDays)
	c, _ := SeededDailyBars(launchMs, 8, btcQ8, SeedDays)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different history")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same history")
	}
	// Pin one value so an accidental change of the generator (which would
	// rewrite every deployment's history on replay) fails loudly.
	if a[0].OQ8 != seedGolden {
		t.Fatalf("first open = %d, want %d: the seeded-history generator changed", a[0].OQ8, seedGolden)
	}
}

func TestSeededDailyVolatilityIsNearThreePercent(t *testing.T) {
	// Mean absolute daily move of a normal walk is sigma x sqrt(2/pi), about
	// 0.8 sigma: 2.4% for 3%. Over 3650 days it must land within 2.0..2.8%.
	bars, err := SeededDailyBars(launchMs, 99, btcQ8, SeedDaysMax)
	if err != nil {
		t.Fatal(err)
	}
	var sumQ9 int64
	for _, b := range bars {
		sumQ9 += abs64(mustMulDiv(b.CQ8-b.OQ8, Q9, b.OQ8, roundTowardZero))
	}
	meanQ9 := sumQ9 / int64(len(bars))
	if meanQ9 < 20_000_000 || meanQ9 > 28_000_000 {
		t.Fatalf("mean |daily move| = %d q9, want 2.0%%..2.8%%", meanQ9)
	}
}

func TestSeededDailyBarsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		launch int64
		anchor int64
		days   int
	}{
		{"zero anchor", launchMs, 0, 90},
		{"anchor over max", launchMs, PriceQ8Max + 1, 90},
		{"no days", launchMs, btcQ8, 0},
		{"too many days", launchMs, btcQ8, SeedDaysMax + 1},
		{"launch before the history could start", 10 * dayMs, btcQ8, 90},
	} {
		if _, err := SeededDailyBars(tc.launch, 1, tc.anchor, tc.days); err == nil {
			t.Errorf("%s: want an error", tc.name)
		}
	}
}

func TestSeedHistoryInstallsBarsOnceAndJoinsRealBars(t *testing.T) {
	s := newTestState(t)
	if err := s.SeedHistory("BTC-PERP", launchMs, 42, btcQ8); err != nil {
		t.Fatal(err)
	}
	if err := s.SeedHistory("BTC-PERP", launchMs, 43, btcQ8); !errors.Is(err, ErrAlreadySeeded) {
		t.Fatalf("second seeding: err = %v", err)
	}
	if err := s.SeedHistory("DOGE-PERP", launchMs, 42, btcQ8); !errors.Is(err, ErrUnknownMarket) {
		t.Fatalf("unknown market: err = %v", err)
	}
	if err := s.SeedHistory("ETH-PERP", launchMs, 42, ethQ8); err != nil {
		t.Fatal(err)
	}
	// The market id is mixed into the seed: same seed, different walks.
	btcDay, ethDay := s.MarketsByID["BTC-PERP"].Day, s.MarketsByID["ETH-PERP"].Day
	if btcDay[0].OQ8*ethQ8/btcQ8 == ethDay[0].OQ8 {
		t.Fatal("BTC and ETH histories are the same walk")
	}
	mustPrint(t, s, "BTCUSD", btcQ8+Q8, launchMs+1_000)
	mustFill(t, s, "BTC-PERP", 3, launchMs+1_000)
	days := mustCandles(t, s, "BTC-PERP", Interval1d, CandleLimitMax, launchMs+1_000)
	if len(days) != SeedDays+1 {
		t.Fatalf("%d daily candles, want %d seeded + 1 real", len(days), SeedDays+1)
	}
	for _, c := range days[:SeedDays] {
		if !c.Seeded || c.Prints != 0 || c.VolumeContracts != nil {
			t.Fatalf("seeded candle %+v must be seeded, 0 prints, no volume", c)
		}
	}
	real := days[SeedDays]
	if real.Seeded || real.Prints != 1 || real.TsMs != launchMs || *real.VolumeContracts != 3 {
		t.Fatalf("first real candle %+v", real)
	}
	if days[SeedDays-1].CQ8 != btcQ8 {
		t.Fatal("the last seeded close is not the anchor")
	}
	for _, iv := range []int64{Interval1m, Interval1h} {
		for _, c := range mustCandles(t, s, "BTC-PERP", iv, CandleLimitMax, launchMs+1_000) {
			if c.Seeded {
				t.Fatalf("interval %d has a seeded bar", iv)
			}
		}
	}
}

// seedGolden is the first open of SeededDailyBars(launchMs, 7, btcQ8, 90).
const seedGolden int64 = 13_494_926_937_693
