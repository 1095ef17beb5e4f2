package market

import (
	"errors"
	"fmt"
	"math"
)

// 24h statistics window (SPEC section 2, 24h stats).
const (
	Stats24hWindowMs = 86_400_000
	// Stats24hBasis names how the window is computed: the 1440 minute bars
	// ending with the current minute.
	Stats24hBasis   = "rolling_1m_bars"
	stats24hMinutes = Stats24hWindowMs / 60_000
)

// ErrNoPrice refuses a fill in a market that has never had a price.
var ErrNoPrice = errors.New("market has no oracle price yet")

// ErrBadFill refuses a fill with a non-positive size or timestamp.
var ErrBadFill = errors.New("invalid fill")

// Stats24h is the spec's 24h stats resource.
type Stats24h struct {
	MarketID        string
	WindowMs        int64
	Basis           string
	Fills           int64
	VolumeContracts int64
	// HiQ8 and LoQ8 are nil when no print falls in the window.
	HiQ8 *int64
	LoQ8 *int64
	// Truncated is true when the window starts before the market's first
	// print, so the figures cover less than 24 hours.
	Truncated bool
}

// RecordFill adds a fill of contracts at tsMs to the bars containing tsMs at
// every interval, and so to the 24h stats. A bar that has no print yet is
// opened as a placeholder at the preceding close. Every fill counts,
// including the venue's own USDx hedge legs (SPEC: volume includes them).
func (s *State) RecordFill(marketID string, contracts int64, tsMs int64) error {
	m, err := s.market(marketID)
	if err != nil {
		return err
	}
	if contracts <= 0 || contracts > OrderContractsCeiling || tsMs <= 0 {
		return fmt.Errorf("%w: %d contracts at %d", ErrBadFill, contracts, tsMs)
	}
	if m.FirstPrintTsMs == 0 {
		return fmt.Errorf("%w: %q", ErrNoPrice, marketID)
	}
	// Check every series before touching any, so a refused fill changes
	// nothing.
	for _, iv := range intervals {
		bars := m.series(iv)
		if i, found := locate(bars, floorTo(tsMs, iv*1000)); found {
			if _, err := addChecked(bars[i].VolumeContracts, contracts); err != nil {
				return fmt.Errorf("%w: bar volume overflow", ErrBadFill)
			}
		}
	}
	for _, iv := range intervals {
		m.setSeries(iv, addFill(m.series(iv), iv, contracts, tsMs, m.LastPrintMidQ8))
	}
	if m.FirstFillTsMs == 0 || tsMs < m.FirstFillTsMs {
		m.FirstFillTsMs = tsMs
	}
	return nil
}

// addFill adds volume to the bar containing tsMs. fallbackQ8 prices a
// placeholder bar when no earlier bar exists (every earlier one was pruned).
// The caller has checked that the volume cannot overflow.
func addFill(bars []Bar, interval, contracts, tsMs, fallbackQ8 int64) []Bar {
	start := floorTo(tsMs, interval*1000)
	i, found := locate(bars, start)
	if !found {
		px := fallbackQ8
		if i > 0 {
			px = bars[i-1].CQ8
		}
		var ok bool
		bars, i, ok = insertBar(bars, i, Bar{TsMs: start, OQ8: px, HQ8: px, LQ8: px, CQ8: px}, barsMax(interval))
		if !ok {
			// Older than everything the series keeps: nothing to add to.
			return bars
		}
	}
	bars[i].VolumeContracts += contracts
	bars[i].Fills++
	return bars
}

// Stats24h returns the rolling 24h statistics of a market at nowMs: the
// minute bars from floor(nowMs, 1 min) - 1439 min through nowMs's minute.
func (s *State) Stats24h(marketID string, nowMs int64) (Stats24h, error) {
	m, err := s.market(marketID)
	if err != nil {
		return Stats24h{}, err
	}
	st := Stats24h{MarketID: marketID, WindowMs: Stats24hWindowMs, Basis: Stats24hBasis}
	windowStart := floorTo(nowMs, 60_000) - (stats24hMinutes-1)*60_000
	st.Truncated = m.FirstPrintTsMs == 0 || windowStart < m.FirstPrintTsMs
	windowEnd := windowStart + Stats24hWindowMs
	bars := m.Minute
	for i := len(bars) - 1; i >= 0 && bars[i].TsMs >= windowStart; i-- {
		b := bars[i]
		if b.TsMs >= windowEnd {
			// A print stamped slightly ahead of now (PrintFutureToleranceMs)
			// counts once now reaches its minute.
			continue
		}
		st.Fills += b.Fills
		st.VolumeContracts = addSaturating(st.VolumeContracts, b.VolumeContracts)
		if b.Prints == 0 {
			// A placeholder's price is a carried close, not an observation.
			continue
		}
		if st.HiQ8 == nil {
			hi, lo := b.HQ8, b.LQ8
			st.HiQ8, st.LoQ8 = &hi, &lo
			continue
		}
		*st.HiQ8 = max(*st.HiQ8, b.HQ8)
		*st.LoQ8 = min(*st.LoQ8, b.LQ8)
	}
	return st, nil
}

// addSaturating adds non-negative values and stops at MaxInt64 rather than
// wrapping: a displayed total may cap, it must never turn negative.
func addSaturating(a, b int64) int64 {
	if v, err := addChecked(a, b); err == nil {
		return v
	}
	return math.MaxInt64
}
