package market

import (
	"errors"
	"fmt"
)

// Pre-launch history parameters (see "Pre-launch history" in the package
// comment).
const (
	// SeedDays is how many seeded daily bars a market gets.
	SeedDays = 90
	// SeedDaysMax bounds SeededDailyBars.
	SeedDaysMax = 3650
	// SeedDailyVolQ9 is the daily volatility of the synthetic walk, 3%
	// (about 57% a year, a typical crypto figure).
	SeedDailyVolQ9 = 30_000_000
	// seedDailyMoveQ9Max clamps one day's move, so that an extreme draw
	// cannot push the price near zero.
	seedDailyMoveQ9Max = 250_000_000
	dayMs              = 86_400_000
)

// ErrAlreadySeeded refuses to seed a market that already has daily bars.
var ErrAlreadySeeded = errors.New("market already has daily bars")

// splitmix64 is the generator of the seeded history: tiny, integer-only and
// fully specified, so every replica and every future version draws the same
// numbers from the same seed.
type splitmix64 struct{ state uint64 }

func (g *splitmix64) next() uint64 {
	g.state += 0x9e3779b97f4a7c15
	z := g.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// normalQ9 draws an approximately standard normal value scaled by 1e9, as
// the sum of twelve uniforms minus six (Irwin-Hall), in integers only. The
// result lies within +-6e9.
func (g *splitmix64) normalQ9() int64 {
	var sum int64
	for range 12 {
		sum += int64(g.next() >> 32) // uniform in [0, 2^32)
	}
	centred := sum - 6<<32 // N(0,1) x 2^32, |centred| < 6 x 2^32
	// Scale 2^32 down to 1e9 in two steps so nothing overflows:
	// (centred >> 8) < 2^27 in magnitude, times 1e9 < 2^57.
	return (centred >> 8) * Q9 >> 24
}

// fnv64a hashes a market id into the seed so that markets sharing one
// bootstrap seed still get different histories.
func fnv64a(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}

// SeededDailyBars produces `days` daily bars ending the day before the day of
// launchTsMs, from a deterministic random walk drawn from seed. The walk runs
// backwards from anchorQ8, so the last seeded close is exactly anchorQ8 and
// each open equals the previous close. Bars carry Seeded true and Prints 0.
// Prices round down (floor) at every step; the rule only has to be fixed,
// no money depends on these bars.
func SeededDailyBars(launchTsMs int64, seed uint64, anchorQ8 int64, days int) ([]Bar, error) {
	switch {
	case anchorQ8 <= 0 || anchorQ8 > PriceQ8Max:
		return nil, fmt.Errorf("seeded history: anchorQ8 %d outside [1, %d]", anchorQ8, int64(PriceQ8Max))
	case days <= 0 || days > SeedDaysMax:
		return nil, fmt.Errorf("seeded history: days %d outside [1, %d]", days, SeedDaysMax)
	case launchTsMs < int64(days+1)*dayMs:
		return nil, fmt.Errorf("seeded history: launchTsMs %d too early for %d days", launchTsMs, days)
	}
	g := &splitmix64{state: seed}
	launchDay := floorTo(launchTsMs, dayMs)
	bars := make([]Bar, days)
	closeQ8 := anchorQ8
	for i := days - 1; i >= 0; i-- {
		move := clamp(mustMulDiv(g.normalQ9(), SeedDailyVolQ9, Q9, roundFloor), -seedDailyMoveQ9Max, seedDailyMoveQ9Max)
		// close = open x (1 + move)  =>  open = close / (1 + move).
		openQ8 := clamp(mustMulDiv(closeQ8, Q9, Q9+move, roundFloor), 1, PriceQ8Max)
		// Wicks reach beyond the body by half a daily sigma times |z|.
		upQ9 := mustMulDiv(abs64(g.normalQ9()), SeedDailyVolQ9/2, Q9, roundFloor)
		downQ9 := mustMulDiv(abs64(g.normalQ9()), SeedDailyVolQ9/2, Q9, roundFloor)
		hi := mustMulDiv(max(openQ8, closeQ8), Q9+upQ9, Q9, roundFloor)
		lo := max(1, mustMulDiv(min(openQ8, closeQ8), Q9-min(downQ9, seedDailyMoveQ9Max), Q9, roundFloor))
		bars[i] = Bar{
			TsMs:   launchDay - int64(days-i)*dayMs,
			OQ8:    openQ8,
			HQ8:    hi,
			LQ8:    lo,
			CQ8:    closeQ8,
			Seeded: true,
		}
		closeQ8 = openQ8
	}
	return bars, nil
}

// SeedHistory installs SeedDays seeded daily bars in a market (bootstrap
// path). The seed is mixed with the market id. It is refused once the market
// has any daily bar, so history is seeded at most once and never rewritten.
func (s *State) SeedHistory(marketID string, launchTsMs int64, seed uint64, anchorQ8 int64) error {
	m, err := s.market(marketID)
	if err != nil {
		return err
	}
	if len(m.Day) > 0 {
		return fmt.Errorf("%w: %q", ErrAlreadySeeded, marketID)
	}
	bars, err := SeededDailyBars(launchTsMs, seed^fnv64a(marketID), anchorQ8, SeedDays)
	if err != nil {
		return err
	}
	m.Day = bars
	return nil
}

// mustMulDiv is mulDiv for operands whose ranges the caller has bounded.
func mustMulDiv(a, b, d int64, mode rounding) int64 {
	v, err := mulDiv(a, b, d, mode)
	if err != nil {
		panic(fmt.Sprintf("market: %d x %d / %d: %v", a, b, d, err))
	}
	return v
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
