package oracle

import (
	"errors"
	"math"
	"testing"
)

const t0 = int64(1_767_225_600_000) // 2026-01-01T00:00:00Z

var (
	_ Source = (*SimSource)(nil)
	_ Source = (*Pinned)(nil)
)

func newSim(t testing.TB, seed uint64, feeds map[string]FeedConfig) *SimSource {
	t.Helper()
	s, err := NewSim(seed, feeds)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// path returns n prints of feed, one every dtMs after t0.
func path(t testing.TB, s Source, feed string, n int, dtMs int64) []Print {
	t.Helper()
	out := make([]Print, n)
	for i := range n {
		p, err := s.Next(feed, t0+int64(i)*dtMs)
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		out[i] = p
	}
	return out
}

// realizedVol is the annualised volatility of a print path.
func realizedVol(ps []Print) float64 {
	var sum float64
	for i := 1; i < len(ps); i++ {
		r := math.Log(float64(ps[i].MidQ8) / float64(ps[i-1].MidQ8))
		sum += r * r
	}
	years := float64(ps[len(ps)-1].TsMs-ps[0].TsMs) / msPerYear
	return math.Sqrt(sum / years)
}

func TestSimIsDeterministic(t *testing.T) {
	a := path(t, newSim(t, 7, nil), FeedBTCUSD, 5_000, 1_000)
	b := path(t, newSim(t, 7, nil), FeedBTCUSD, 5_000, 1_000)
	c := path(t, newSim(t, 8, nil), FeedBTCUSD, 5_000, 1_000)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("print %d differs with the same seed: %+v vs %+v", i, a[i], b[i])
		}
	}
	if a[len(a)-1] == c[len(c)-1] {
		t.Fatal("different seeds gave the same path")
	}
	// Feeds are independent streams: stepping ETH does not move BTC's path.
	s := newSim(t, 7, nil)
	for i := range 100 {
		if _, err := s.Next(FeedETHUSD, t0+int64(i)*1_000); err != nil {
			t.Fatal(err)
		}
	}
	d := path(t, s, FeedBTCUSD, 5_000, 1_000)
	if d[len(d)-1] != a[len(a)-1] {
		t.Fatal("BTC path depends on calls for ETH")
	}
}

func TestSimStartsAtTheDefaultPrices(t *testing.T) {
	s := newSim(t, 1, nil)
	for feed, want := range map[string]int64{FeedBTCUSD: 97_000 * 100_000_000, FeedETHUSD: 3_400 * 100_000_000} {
		p, err := s.Next(feed, t0)
		if err != nil || p.MidQ8 != want || p.TsMs != t0 {
			t.Fatalf("%s first print %+v %v, want %d at t0", feed, p, err, want)
		}
	}
	if _, err := s.Next("DOGEUSD", t0); !errors.Is(err, ErrUnknownFeed) {
		t.Fatalf("unknown feed: err = %v", err)
	}
}

func TestDefaultVolatilitiesAreInTheCryptoRange(t *testing.T) {
	for feed, cfg := range DefaultFeeds() {
		if cfg.AnnualVol < 0.5 || cfg.AnnualVol > 0.8 {
			t.Errorf("%s annual vol %v outside 50-80%%", feed, cfg.AnnualVol)
		}
	}
}

func TestSimDiffusionMatchesConfiguredVolatility(t *testing.T) {
	cfg := DefaultFeeds()[FeedBTCUSD]
	cfg.JumpsPerDay = 0
	got := realizedVol(path(t, newSim(t, 3, map[string]FeedConfig{FeedBTCUSD: cfg}), FeedBTCUSD, 200_000, 1_000))
	if math.Abs(got-cfg.AnnualVol) > 0.03*cfg.AnnualVol {
		t.Fatalf("realised vol %.4f, want %.2f +-3%%", got, cfg.AnnualVol)
	}
}

func TestSimTotalVolatilityIncludesJumps(t *testing.T) {
	// 200k one-minute steps (139 days, about 20 jumps): diffusion and jumps
	// together must land on the configured total.
	for _, feed := range []string{FeedBTCUSD, FeedETHUSD} {
		want := DefaultFeeds()[feed].AnnualVol
		for _, seed := range []uint64{1, 2, 3} {
			got := realizedVol(path(t, newSim(t, seed, nil), feed, 200_000, 60_000))
			if math.Abs(got-want) > 0.10*want {
				t.Errorf("%s seed %d: realised vol %.4f, want %.2f +-10%%", feed, seed, got, want)
			}
		}
	}
}

func TestSimResumeContinuesFromTheCommittedPrint(t *testing.T) {
	s := newSim(t, 5, nil)
	path(t, s, FeedBTCUSD, 1_000, 1_000) // this leader's own history
	lastMid, lastTs := int64(61_234_56789012), t0+10_000_000
	if err := s.Resume(FeedBTCUSD, lastMid, lastTs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(FeedBTCUSD, lastTs); !errors.Is(err, ErrNotAdvanced) {
		t.Fatalf("Next at the resumed timestamp: err = %v, want ErrNotAdvanced", err)
	}
	p, err := s.Next(FeedBTCUSD, lastTs+1_000)
	if err != nil {
		t.Fatal(err)
	}
	if p.TsMs != lastTs+1_000 {
		t.Fatalf("ts = %d, want %d", p.TsMs, lastTs+1_000)
	}
	// One second at 55% a year moves about 0.01%; 0.5% would be a jump back.
	if math.Abs(float64(p.MidQ8-lastMid)) > 0.005*float64(lastMid) {
		t.Fatalf("first print after resume %d, far from the committed %d", p.MidQ8, lastMid)
	}
	// Another leader resuming from the same print walks the same path.
	other := newSim(t, 5, nil)
	if err := other.Resume(FeedBTCUSD, lastMid, lastTs); err != nil {
		t.Fatal(err)
	}
	q, _ := other.Next(FeedBTCUSD, lastTs+1_000)
	if q != p {
		t.Fatalf("two leaders resumed from one print diverge: %+v vs %+v", p, q)
	}
	if err := s.Resume("DOGEUSD", lastMid, lastTs); !errors.Is(err, ErrUnknownFeed) {
		t.Fatalf("unknown feed: err = %v", err)
	}
	if err := s.Resume(FeedBTCUSD, 0, lastTs); !errors.Is(err, ErrBadPrice) {
		t.Fatalf("zero mid: err = %v", err)
	}
}

func TestSimTimeMustAdvance(t *testing.T) {
	s := newSim(t, 1, nil)
	if _, err := s.Next(FeedBTCUSD, t0); err != nil {
		t.Fatal(err)
	}
	for _, now := range []int64{t0, t0 - 1} {
		if _, err := s.Next(FeedBTCUSD, now); !errors.Is(err, ErrNotAdvanced) {
			t.Fatalf("Next(%d): err = %v, want ErrNotAdvanced", now-t0, err)
		}
	}
	if p, err := s.Next(FeedBTCUSD, t0+1); err != nil || p.TsMs != t0+1 {
		t.Fatalf("Next one ms later: %+v %v", p, err)
	}
}

func TestSimPricesStayPositive(t *testing.T) {
	wild := FeedConfig{StartMidQ8: 2, AnnualVol: 4.9, JumpsPerDay: 0.2, JumpMin: 0.3, JumpMax: 0.6, BaseConfQ9: 1, MaxConfQ9: 1_000_000_000}
	s := newSim(t, 11, map[string]FeedConfig{"WILD": wild})
	for i, p := range path(t, s, "WILD", 20_000, 3_600_000) {
		if p.MidQ8 <= 0 || p.MidQ8 > int64(maxMidDollars*1e8) {
			t.Fatalf("print %d mid %d outside (0, max]", i, p.MidQ8)
		}
		if p.ConfQ9 < 0 || p.ConfQ9 > wild.MaxConfQ9 {
			t.Fatalf("print %d conf %d outside [0, max]", i, p.ConfQ9)
		}
	}
}

func TestSimConfidenceBandWidensAfterJumps(t *testing.T) {
	ps := path(t, newSim(t, 4, nil), FeedBTCUSD, 200_000, 60_000)
	base := DefaultFeeds()[FeedBTCUSD].BaseConfQ9
	calm, jumps, widened := 0, 0, 0
	for i := 1; i < len(ps); i++ {
		move := math.Abs(math.Log(float64(ps[i].MidQ8) / float64(ps[i-1].MidQ8)))
		if move > 0.015 { // a one-minute diffusion move is about 0.07%
			jumps++
			if ps[i].ConfQ9 > 3*base {
				widened++
			}
			continue
		}
		if ps[i].ConfQ9 >= 200_000 && ps[i].ConfQ9 <= 1_000_000 {
			calm++
		}
	}
	if jumps < 5 {
		t.Fatalf("only %d jumps in 139 days at about one a week", jumps)
	}
	if widened != jumps {
		t.Fatalf("%d of %d jumps widened the band", widened, jumps)
	}
	if calm < len(ps)*98/100 {
		t.Fatalf("only %d of %d calm prints have a 2-10 bp band", calm, len(ps))
	}
}

func TestNewSimRefusesBadConfigs(t *testing.T) {
	good := DefaultFeeds()[FeedBTCUSD]
	for name, mutate := range map[string]func(*FeedConfig){
		"zero start":          func(c *FeedConfig) { c.StartMidQ8 = 0 },
		"zero vol":            func(c *FeedConfig) { c.AnnualVol = 0 },
		"NaN vol":             func(c *FeedConfig) { c.AnnualVol = math.NaN() },
		"jump range inverted": func(c *FeedConfig) { c.JumpMin, c.JumpMax = 0.05, 0.02 },
		"jumps exceed vol":    func(c *FeedConfig) { c.JumpsPerDay = 20 },
		"conf max below base": func(c *FeedConfig) { c.MaxConfQ9 = c.BaseConfQ9 - 1 },
	} {
		c := good
		mutate(&c)
		if _, err := NewSim(1, map[string]FeedConfig{"X": c}); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
