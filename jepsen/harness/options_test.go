package harness

import (
	"testing"
	"time"
)

func TestDefaultTradersGrowWithTheRun(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{30 * time.Second, 8},
		{5 * time.Minute, 8},
		{20 * time.Minute, 8},
		{20*time.Minute + time.Second, 16},
		{30 * time.Minute, 16},
		{60 * time.Minute, 24},
	} {
		if got := DefaultTraders(c.d, DefaultRate); got != c.want {
			t.Errorf("DefaultTraders(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestOptionsDefaultTradersFollowTheDuration(t *testing.T) {
	for _, c := range []struct {
		in   Options
		want int
	}{
		{Options{}, 8}, // the default 5 minutes
		{Options{Duration: 45 * time.Minute}, 24},
		{Options{Duration: 45 * time.Minute, Traders: 3}, 3},
		{Options{Duration: 45 * time.Minute, Traders: -1}, -1},
		{Options{Duration: 10 * time.Minute, Rate: 150}, 24}, // three started 60s of rate
	} {
		o := c.in
		if err := o.setDefaults(); err != nil {
			t.Fatal(err)
		}
		if o.Traders != c.want {
			t.Errorf("%v: %d traders, want %d", c.in.Duration, o.Traders, c.want)
		}
	}
}
