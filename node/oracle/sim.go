package oracle

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
)

const (
	msPerYear = 365.25 * 24 * 3600 * 1000
	msPerDay  = 24 * 3600 * 1000

	// confJumpShare is how much of a jump's size is added to the
	// confidence band right after it.
	confJumpShare = 0.2
	// confHalfLifeMs is how fast that extra width decays.
	confHalfLifeMs = 30_000
	// maxJumpsPerStep bounds the Poisson draw after a very long gap.
	maxJumpsPerStep = 64

	// Clamp of the simulated price, in dollars: the FSM refuses anything
	// above a billion, and a q8 mid must stay at least 1.
	minMidDollars = 1e-8
	maxMidDollars = 1e9
)

// FeedConfig describes one simulated underlying.
type FeedConfig struct {
	StartMidQ8 int64 // price of the first print on a fresh cluster
	// AnnualVol is the total annualised volatility, jumps included
	// (0.55 = 55%). The diffusion takes what the jumps leave.
	AnnualVol float64
	// JumpsPerDay is the Poisson rate of jumps.
	JumpsPerDay float64
	// JumpMin and JumpMax bound a jump's size in log-price (0.02 = 2%);
	// the size is uniform between them and the sign is a coin flip.
	JumpMin, JumpMax float64
	// BaseConfQ9 is the calm confidence band; MaxConfQ9 caps it after jumps.
	BaseConfQ9 int64
	MaxConfQ9  int64
}

// DefaultFeeds returns the simulation of the shipped feeds: BTC at 55% and
// ETH at 75% annualised volatility, a 2-5% jump about once a week, and
// confidence bands of 3 and 5 bp.
func DefaultFeeds() map[string]FeedConfig {
	starts := DefaultStartPricesQ8()
	return map[string]FeedConfig{
		FeedBTCUSD: {StartMidQ8: starts[FeedBTCUSD], AnnualVol: 0.55, JumpsPerDay: 1.0 / 7, JumpMin: 0.02, JumpMax: 0.05, BaseConfQ9: 300_000, MaxConfQ9: 10_000_000},
		FeedETHUSD: {StartMidQ8: starts[FeedETHUSD], AnnualVol: 0.75, JumpsPerDay: 1.0 / 7, JumpMin: 0.02, JumpMax: 0.05, BaseConfQ9: 500_000, MaxConfQ9: 10_000_000},
	}
}

// jumpVariancePerYear is the share of the yearly log-price variance that
// jumps contribute: rate x E[J^2], with J uniform in [a, b] in magnitude.
func (c FeedConfig) jumpVariancePerYear() float64 {
	a, b := c.JumpMin, c.JumpMax
	return c.JumpsPerDay * msPerYear / msPerDay * (a*a + a*b + b*b) / 3
}

func (c FeedConfig) validate() error {
	switch {
	case c.StartMidQ8 <= 0:
		return fmt.Errorf("start mid %d must be positive", c.StartMidQ8)
	case !(c.AnnualVol > 0 && c.AnnualVol < 5):
		return fmt.Errorf("annual vol %v outside (0, 5)", c.AnnualVol)
	case !(c.JumpsPerDay >= 0 && c.JumpsPerDay <= 100):
		return fmt.Errorf("jumps per day %v outside [0, 100]", c.JumpsPerDay)
	case !(c.JumpMin >= 0 && c.JumpMin <= c.JumpMax && c.JumpMax < 1):
		return fmt.Errorf("jump sizes [%v, %v] invalid", c.JumpMin, c.JumpMax)
	case c.BaseConfQ9 < 0 || c.MaxConfQ9 < c.BaseConfQ9 || c.MaxConfQ9 > 1_000_000_000:
		return fmt.Errorf("confidence base %d / max %d invalid", c.BaseConfQ9, c.MaxConfQ9)
	case c.jumpVariancePerYear() >= c.AnnualVol*c.AnnualVol:
		return fmt.Errorf("jumps alone exceed annual vol %v", c.AnnualVol)
	}
	return nil
}

// SimSource is the built-in Source: a seeded simulation per feed (see the
// package comment). It is safe for concurrent use.
type SimSource struct {
	seed  uint64
	mu    sync.Mutex
	feeds map[string]*simFeed
}

type simFeed struct {
	cfg       FeedConfig
	diffVol   float64 // annualised volatility of the diffusion part
	rng       *rand.Rand
	started   bool
	logMid    float64 // natural log of the mid in dollars
	lastTsMs  int64
	boostFrac float64 // extra confidence width left from the last jump
}

// NewSim returns a simulation of the given feeds (nil means DefaultFeeds).
func NewSim(seed uint64, feeds map[string]FeedConfig) (*SimSource, error) {
	if feeds == nil {
		feeds = DefaultFeeds()
	}
	s := &SimSource{seed: seed, feeds: make(map[string]*simFeed, len(feeds))}
	for id, cfg := range feeds {
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("oracle: feed %s: %w", id, err)
		}
		f := &simFeed{
			cfg:     cfg,
			diffVol: math.Sqrt(cfg.AnnualVol*cfg.AnnualVol - cfg.jumpVariancePerYear()),
			rng:     rand.New(rand.NewPCG(seed, feedHash(id))),
			logMid:  math.Log(float64(cfg.StartMidQ8) / 1e8),
		}
		s.feeds[id] = f
	}
	return s, nil
}

// FeedIDs returns the simulated feeds, sorted.
func (s *SimSource) FeedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.feeds))
	for id := range s.feeds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func feedHash(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}

// Resume continues the feed from a committed print. The random stream is
// reseeded from (seed, feed, lastTsMs), so the path after a resume does not
// depend on what this process simulated before.
func (s *SimSource) Resume(feedID string, lastMidQ8, lastTsMs int64) error {
	if lastMidQ8 <= 0 {
		return fmt.Errorf("%w: %d", ErrBadPrice, lastMidQ8)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.feeds[feedID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownFeed, feedID)
	}
	f.rng = rand.New(rand.NewPCG(s.seed, feedHash(feedID)^uint64(lastTsMs)))
	f.started = true
	f.logMid = math.Log(float64(lastMidQ8) / 1e8)
	f.lastTsMs = lastTsMs
	f.boostFrac = 0
	return nil
}

// Next returns the feed's print at nowMs (see Source).
func (s *SimSource) Next(feedID string, nowMs int64) (Print, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.feeds[feedID]
	if !ok {
		return Print{}, fmt.Errorf("%w: %q", ErrUnknownFeed, feedID)
	}
	if !f.started {
		// A fresh cluster's first print is the configured start price.
		f.started, f.lastTsMs = true, nowMs
		return Print{MidQ8: f.cfg.StartMidQ8, ConfQ9: f.cfg.BaseConfQ9, TsMs: nowMs}, nil
	}
	if nowMs <= f.lastTsMs {
		return Print{}, fmt.Errorf("%w: %s now %d, last %d", ErrNotAdvanced, feedID, nowMs, f.lastTsMs)
	}
	f.step(nowMs - f.lastTsMs)
	f.lastTsMs = nowMs
	return Print{MidQ8: f.midQ8(), ConfQ9: f.confQ9(), TsMs: nowMs}, nil
}

// step advances the walk by dtMs.
func (f *simFeed) step(dtMs int64) {
	dt := float64(dtMs) / msPerYear
	sigma := f.diffVol
	// -sigma^2/2 drift keeps the price itself a martingale.
	f.logMid += -0.5*sigma*sigma*dt + sigma*math.Sqrt(dt)*f.rng.NormFloat64()

	f.boostFrac *= math.Exp2(-float64(dtMs) / confHalfLifeMs)
	for range f.poisson(f.cfg.JumpsPerDay * float64(dtMs) / msPerDay) {
		size := f.cfg.JumpMin + (f.cfg.JumpMax-f.cfg.JumpMin)*f.rng.Float64()
		if f.rng.IntN(2) == 0 {
			size = -size
		}
		f.logMid += size
		f.boostFrac = max(f.boostFrac, math.Abs(size)*confJumpShare)
	}
	f.logMid = min(max(f.logMid, math.Log(minMidDollars)), math.Log(maxMidDollars))
}

// poisson draws a Poisson count with a small mean (Knuth's method).
func (f *simFeed) poisson(mean float64) int {
	limit, p, k := math.Exp(-mean), f.rng.Float64(), 0
	for p > limit && k < maxJumpsPerStep {
		k++
		p *= f.rng.Float64()
	}
	return k
}

func (f *simFeed) midQ8() int64 {
	return max(1, int64(math.Round(math.Exp(f.logMid)*1e8)))
}

// confQ9 is the calm band with noise (mostly 1x-2x the base) plus what is
// left of the last jump's widening, capped.
func (f *simFeed) confQ9() int64 {
	calm := float64(f.cfg.BaseConfQ9) * (1 + 0.5*math.Abs(f.rng.NormFloat64()))
	c := int64(math.Round(calm + f.boostFrac*1e9))
	return min(max(c, 0), f.cfg.MaxConfQ9)
}
