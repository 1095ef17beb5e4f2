package market

import (
	"errors"
	"fmt"
	"sort"
)

// Candle intervals in seconds, as the API's `interval` carries them.
const (
	Interval1m int64 = 60
	Interval1h int64 = 3_600
	Interval1d int64 = 86_400
)

// Candle limits of SPEC section 8 and the retention bounds of the bar series.
const (
	CandleLimitDefault = 96
	CandleLimitMax     = 1440
	// MinuteBarsMax is four days of minute bars, the spec's retention at
	// interval 60.
	MinuteBarsMax = 4 * 24 * 60
	// MinuteRetentionMs is the same four days in ms.
	MinuteRetentionMs = MinuteBarsMax * 60_000
	// HourBarsMax keeps ten years of hourly bars: permanent for any
	// realistic deployment, bounded all the same.
	HourBarsMax = 24 * 366 * 10
	// DayBarsMax keeps a century of daily bars, seeded ones included.
	DayBarsMax = 366 * 100
)

// Errors of Candles.
var (
	ErrInvalidInterval = errors.New("candle interval must be 60, 3600 or 86400")
	ErrInvalidLimit    = errors.New("candle limit out of range")
)

// intervals lists the bar series a print updates, finest first.
var intervals = [...]int64{Interval1m, Interval1h, Interval1d}

// Bar is one stored candle. Prints counts oracle prints in the bar; a bar
// with Prints 0 is either seeded pre-launch history (Seeded) or a
// placeholder opened by a fill before the bar's first print, carrying the
// previous close until a print arrives.
type Bar struct {
	TsMs            int64
	OQ8             int64
	HQ8             int64
	LQ8             int64
	CQ8             int64
	Prints          int64
	Seeded          bool
	VolumeContracts int64
	Fills           int64
}

// Candle is the read view of a bar, with volume present only where the
// deployment can vouch for it (see the package comment).
type Candle struct {
	TsMs            int64
	OQ8             int64
	HQ8             int64
	LQ8             int64
	CQ8             int64
	Prints          int64
	Seeded          bool
	VolumeContracts *int64
}

// ValidInterval reports whether interval (seconds) is one the API serves.
func ValidInterval(interval int64) bool {
	return interval == Interval1m || interval == Interval1h || interval == Interval1d
}

func barsMax(interval int64) int {
	switch interval {
	case Interval1m:
		return MinuteBarsMax
	case Interval1h:
		return HourBarsMax
	default:
		return DayBarsMax
	}
}

func (m *MarketState) series(interval int64) []Bar {
	switch interval {
	case Interval1m:
		return m.Minute
	case Interval1h:
		return m.Hour
	default:
		return m.Day
	}
}

func (m *MarketState) setSeries(interval int64, bars []Bar) {
	switch interval {
	case Interval1m:
		m.Minute = bars
	case Interval1h:
		m.Hour = bars
	default:
		m.Day = bars
	}
}

// locate finds the bar starting at tsMs, or where it would be inserted.
func locate(bars []Bar, tsMs int64) (int, bool) {
	// The newest bar is the usual target; check it before searching.
	if n := len(bars); n > 0 && bars[n-1].TsMs <= tsMs {
		if bars[n-1].TsMs == tsMs {
			return n - 1, true
		}
		return n, false
	}
	i := sort.Search(len(bars), func(i int) bool { return bars[i].TsMs >= tsMs })
	return i, i < len(bars) && bars[i].TsMs == tsMs
}

// insertBar puts b at index i and keeps the series within its bound by
// dropping the oldest bar. A bar that would itself be the one dropped is not
// inserted; ok reports whether b is in the result and at which index.
func insertBar(bars []Bar, i int, b Bar, max int) ([]Bar, int, bool) {
	if len(bars) >= max {
		if i == 0 {
			return bars, 0, false
		}
		bars = bars[1:]
		i--
	}
	bars = append(bars, Bar{})
	copy(bars[i+1:], bars[i:])
	bars[i] = b
	return bars, i, true
}

// addPrint folds one print into the series of one interval.
func addPrint(bars []Bar, interval, midQ8, tsMs int64) []Bar {
	start := floorTo(tsMs, interval*1000)
	i, found := locate(bars, start)
	if !found {
		bars, _, _ = insertBar(bars, i, Bar{TsMs: start, OQ8: midQ8, HQ8: midQ8, LQ8: midQ8, CQ8: midQ8, Prints: 1}, barsMax(interval))
		return bars
	}
	b := &bars[i]
	if b.Prints == 0 {
		// The first real print of a placeholder or seeded bar sets its
		// prices; volume already counted in it stays.
		b.OQ8, b.HQ8, b.LQ8, b.CQ8 = midQ8, midQ8, midQ8, midQ8
		b.Prints, b.Seeded = 1, false
		return bars
	}
	b.HQ8 = max(b.HQ8, midQ8)
	b.LQ8 = min(b.LQ8, midQ8)
	b.CQ8 = midQ8
	b.Prints++
	return bars
}

// Candles returns up to limit bars of a market at interval (seconds),
// oldest first and ending with the newest bar. limit 0 means
// CandleLimitDefault; a negative limit or one above CandleLimitMax is
// refused with ErrInvalidLimit. Minute bars older than the four-day retention
// at nowMs are never returned, even before Advance has pruned them.
func (s *State) Candles(marketID string, interval int64, limit int, nowMs int64) ([]Candle, error) {
	m, err := s.market(marketID)
	if err != nil {
		return nil, err
	}
	if !ValidInterval(interval) {
		return nil, fmt.Errorf("%w: %d", ErrInvalidInterval, interval)
	}
	if limit == 0 {
		limit = CandleLimitDefault
	}
	if limit < 0 || limit > CandleLimitMax {
		return nil, fmt.Errorf("%w: %d not in [1, %d]", ErrInvalidLimit, limit, CandleLimitMax)
	}
	bars := m.series(interval)
	if interval == Interval1m {
		bars = bars[minuteCutoffIndex(bars, nowMs):]
	}
	if len(bars) > limit {
		bars = bars[len(bars)-limit:]
	}
	out := make([]Candle, len(bars))
	for i, b := range bars {
		out[i] = m.candle(b, interval)
	}
	return out, nil
}

func (m *MarketState) candle(b Bar, interval int64) Candle {
	c := Candle{TsMs: b.TsMs, OQ8: b.OQ8, HQ8: b.HQ8, LQ8: b.LQ8, CQ8: b.CQ8, Prints: b.Prints, Seeded: b.Seeded}
	// Seeded bars are pre-launch index history: no fill can belong to them.
	if m.FirstFillTsMs != 0 && !b.Seeded && b.TsMs+interval*1000 > m.FirstFillTsMs {
		v := b.VolumeContracts
		c.VolumeContracts = &v
	}
	return c
}

// minuteCutoffIndex is the index of the oldest minute bar still inside the
// retention at nowMs: the MinuteBarsMax minutes ending with the current one.
func minuteCutoffIndex(bars []Bar, nowMs int64) int {
	cutoff := floorTo(nowMs, 60_000) - (MinuteBarsMax-1)*60_000
	return sort.Search(len(bars), func(i int) bool { return bars[i].TsMs >= cutoff })
}

// pruneMinutes drops minute bars that left the retention. Bars are sorted,
// so this is one binary search and a re-slice: bounded work whatever the
// number of stale bars.
func (m *MarketState) pruneMinutes(nowMs int64) {
	i := minuteCutoffIndex(m.Minute, nowMs)
	switch {
	case i == len(m.Minute) && i > 0:
		// nil rather than an empty slice: one canonical encoding for "none".
		m.Minute = nil
	case i > 0:
		m.Minute = m.Minute[i:]
	}
}
