package oracle

import (
	"errors"
	"math"
	"sync"
	"testing"
)

func newPinned(t testing.TB) *Pinned {
	t.Helper()
	return NewPinned(newSim(t, 9, nil))
}

func TestPinHoldsAFeedAndPassesOthersThrough(t *testing.T) {
	p := newPinned(t)
	if err := p.Pin(FeedBTCUSD, 50_000*100_000_000); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 5; i++ {
		pr, err := p.Next(FeedBTCUSD, t0+i*1_000)
		if err != nil || pr != (Print{MidQ8: 50_000 * 100_000_000, ConfQ9: PinnedConfQ9, TsMs: t0 + i*1_000}) {
			t.Fatalf("pinned print %d = %+v %v", i, pr, err)
		}
	}
	eth, err := p.Next(FeedETHUSD, t0)
	if err != nil || eth.MidQ8 != 3_400*100_000_000 {
		t.Fatalf("unpinned feed = %+v %v, want the simulation's start", eth, err)
	}
	if _, err := p.Next(FeedBTCUSD, t0+4_000); !errors.Is(err, ErrNotAdvanced) {
		t.Fatalf("pinned feed at an old time: err = %v", err)
	}
	if err := p.Pin(FeedBTCUSD, 0); !errors.Is(err, ErrBadPrice) {
		t.Fatalf("pin at 0: err = %v", err)
	}
}

func TestScriptPaths(t *testing.T) {
	pts := []ScriptPoint{{OffsetMs: 1_000, MidQ8: 100}, {OffsetMs: 3_000, MidQ8: 300}, {OffsetMs: 4_000, MidQ8: 200}}
	tests := []struct {
		name   string
		interp Interp
		offset int64
		want   int64
	}{
		{"step before the first point", Step, 0, 100},
		{"step on the first point", Step, 1_000, 100},
		{"step between points holds", Step, 2_999, 100},
		{"step on the second point", Step, 3_000, 300},
		{"step after the last point", Step, 60_000, 200},
		{"linear before the first point", Linear, 500, 100},
		{"linear halfway up", Linear, 2_000, 200},
		{"linear rounds toward the earlier point", Linear, 1_001, 100},
		{"linear on a point", Linear, 3_000, 300},
		{"linear down rounds toward the earlier point", Linear, 3_001, 300},
		{"linear halfway down", Linear, 3_500, 250},
		{"linear after the last point", Linear, 5_000, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPinned(t)
			if err := p.Script(FeedBTCUSD, t0, pts, tc.interp); err != nil {
				t.Fatal(err)
			}
			pr, err := p.Next(FeedBTCUSD, t0+tc.offset)
			if err != nil || pr.MidQ8 != tc.want {
				t.Fatalf("mid at +%d = %d %v, want %d", tc.offset, pr.MidQ8, err, tc.want)
			}
		})
	}
}

func TestLinearScriptSurvivesLargeProducts(t *testing.T) {
	// A billion-dollar swing over a year: (b-a) x offset overflows 64 bits.
	a := ScriptPoint{OffsetMs: 0, MidQ8: 1}
	b := ScriptPoint{OffsetMs: 365 * 86_400_000, MidQ8: 100_000_000_000_000_000}
	// 1 + floor((1e17 - 1) / 2) = 1 + 49_999_999_999_999_999.
	if got := lerp(a, b, b.OffsetMs/2); got != 50_000_000_000_000_000 {
		t.Fatalf("lerp midpoint = %d, want 5e16", got)
	}
}

func TestScriptRefusals(t *testing.T) {
	p := newPinned(t)
	for name, tc := range map[string]struct {
		pts    []ScriptPoint
		interp Interp
	}{
		"no points":         {nil, Step},
		"zero price":        {[]ScriptPoint{{0, 0}}, Step},
		"negative offset":   {[]ScriptPoint{{-1, 5}}, Step},
		"repeated offset":   {[]ScriptPoint{{0, 5}, {0, 6}}, Linear},
		"decreasing offset": {[]ScriptPoint{{10, 5}, {5, 6}}, Linear},
		"unknown interp":    {[]ScriptPoint{{0, 5}}, Interp(7)},
		"too many points":   {make([]ScriptPoint, ScriptPointsMax+1), Step},
	} {
		if err := p.Script(FeedBTCUSD, t0, tc.pts, tc.interp); !errors.Is(err, ErrBadScript) {
			t.Errorf("%s: err = %v, want ErrBadScript", name, err)
		}
	}
}

func TestUnpinContinuesFromThePinnedPrice(t *testing.T) {
	p := newPinned(t)
	if _, err := p.Next(FeedBTCUSD, t0); err != nil { // the simulation sits near 97,000
		t.Fatal(err)
	}
	pinQ8 := int64(60_000 * 100_000_000)
	if err := p.Pin(FeedBTCUSD, pinQ8); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Next(FeedBTCUSD, t0+1_000); err != nil {
		t.Fatal(err)
	}
	if err := p.Unpin(FeedBTCUSD); err != nil {
		t.Fatal(err)
	}
	pr, err := p.Next(FeedBTCUSD, t0+2_000)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(pr.MidQ8-pinQ8)) > 0.005*float64(pinQ8) {
		t.Fatalf("after unpin the feed is at %d, want near the pinned %d", pr.MidQ8, pinQ8)
	}
	if pr.ConfQ9 == PinnedConfQ9 && pr.MidQ8 == pinQ8 {
		t.Fatal("still pinned after Unpin")
	}
	if err := p.Unpin(FeedBTCUSD); err != nil {
		t.Fatalf("unpinning an unpinned feed: %v", err)
	}
}

func TestPinnedResumeSetsTheClock(t *testing.T) {
	p := newPinned(t)
	if err := p.Resume(FeedBTCUSD, 90_000*100_000_000, t0+5_000); err != nil {
		t.Fatal(err)
	}
	if err := p.Pin(FeedBTCUSD, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Next(FeedBTCUSD, t0+5_000); !errors.Is(err, ErrNotAdvanced) {
		t.Fatalf("pinned print at the resumed timestamp: err = %v", err)
	}
	if err := p.Resume("DOGEUSD", 1, t0); !errors.Is(err, ErrUnknownFeed) {
		t.Fatalf("unknown feed: err = %v", err)
	}
}

func TestPinnedIsSafeForConcurrentUse(t *testing.T) {
	p := newPinned(t)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 2_000 {
			if i%2 == 0 {
				_ = p.Pin(FeedBTCUSD, int64(i+1)*100_000_000)
			} else {
				_ = p.Unpin(FeedBTCUSD)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 2_000 {
			pr, err := p.Next(FeedBTCUSD, t0+int64(i)*1_000)
			if err != nil || pr.MidQ8 <= 0 {
				t.Errorf("Next %d: %+v %v", i, pr, err)
				return
			}
		}
	}()
	wg.Wait()
}
