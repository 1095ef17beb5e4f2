package market

import "fmt"

// FundingHistoryMax is how many boundaries a market keeps (SPEC section 8).
const FundingHistoryMax = 100

// FundingEntry is the spec's funding history entry.
type FundingEntry struct {
	TsMs   int64
	RateQ9 int64
	SkewQ9 int64
}

// FundingEvent reports one funding boundary recorded by Advance, with what
// the settlement code needs to pay flows.
type FundingEvent struct {
	MarketID     string
	BoundaryTsMs int64
	RateQ9       int64
	SkewQ9       int64
	// MarkQ8 is the market's last print at the boundary (0 with none);
	// MarkStale says it is older than oracleStalenessMs or missing, so the
	// settlement can decide not to pay on a price nobody could trade at.
	MarkQ8    int64
	MarkTsMs  int64
	MarkStale bool
	// SkippedBoundaries counts earlier boundaries that passed without an
	// entry and were not recorded (see the package comment).
	SkippedBoundaries int64
}

// SkewQ9 is (long - short) x 1e9 / (long + short), truncated toward zero,
// and 0 when there is no open interest. Inputs are the non-negative OI
// counters, so the result lies in [-1e9, 1e9].
func SkewQ9(longOI, shortOI int64) int64 {
	total := longOI + shortOI
	if total <= 0 {
		return 0
	}
	v, err := mulDiv(longOI-shortOI, Q9, total, roundTowardZero)
	if err != nil {
		// |long - short| <= total, so the quotient is within 1e9.
		panic(fmt.Sprintf("market: skew out of range: %d %d", longOI, shortOI))
	}
	return v
}

// FundingRateHourlyQ9 is clamp(skewQ9 x FundingSkewCoefQ9 / 1e9, -cap, cap),
// truncated toward zero. Positive means longs pay shorts.
func FundingRateHourlyQ9(skewQ9, capQ9 int64) int64 {
	// |skewQ9| <= 1e9 and the coefficient is 1e5: the product fits easily.
	return clamp(skewQ9*FundingSkewCoefQ9/Q9, -capQ9, capQ9)
}

// SkewQ9 returns the market's current skew.
func (m *MarketState) SkewQ9() int64 { return SkewQ9(m.LongOIContracts, m.ShortOIContracts) }

// FundingRateHourlyQ9 returns the rate the market would pay at its next
// boundary if open interest stayed as it is.
func (m *MarketState) FundingRateHourlyQ9() int64 {
	return FundingRateHourlyQ9(m.SkewQ9(), m.Params.MaxFundingRateHourlyQ9)
}

// Advance moves the markets to nowMs: it prunes minute bars that left the
// retention and records each funding boundary that nowMs reached, returning
// one event per recorded boundary, in market id order. Time going backwards
// changes nothing. The core calls it on every entry whose time moved.
func (s *State) Advance(nowMs int64) []FundingEvent {
	var events []FundingEvent
	for _, id := range s.sortedMarketIDs() {
		m := s.MarketsByID[id]
		m.pruneMinutes(nowMs)
		if ev, ok := m.fundingBoundary(nowMs); ok {
			ev.MarketID = id
			ev.MarkStale = s.IsStale(id, nowMs)
			if last := s.lastPrint(id); last != nil {
				ev.MarkQ8, ev.MarkTsMs = last.MidQ8, last.TsMs
			}
			events = append(events, ev)
		}
	}
	return events
}

// fundingBoundary records the latest boundary reached by nowMs, if any, and
// schedules the next whole hour after nowMs.
func (m *MarketState) fundingBoundary(nowMs int64) (FundingEvent, bool) {
	if m.NextFundingTsMs == 0 {
		// Created without a time (nowMs <= 0): schedule, record nothing.
		m.NextFundingTsMs = floorTo(nowMs, FundingIntervalMs) + FundingIntervalMs
		return FundingEvent{}, false
	}
	if nowMs < m.NextFundingTsMs {
		return FundingEvent{}, false
	}
	latest := floorTo(nowMs, FundingIntervalMs)
	skew := m.SkewQ9()
	rate := FundingRateHourlyQ9(skew, m.Params.MaxFundingRateHourlyQ9)
	entry := FundingEntry{TsMs: latest, RateQ9: rate, SkewQ9: skew}
	if len(m.Funding) >= FundingHistoryMax {
		// Copy down rather than re-slice: the history is short and this
		// keeps its backing array from creeping.
		copy(m.Funding, m.Funding[1:])
		m.Funding[len(m.Funding)-1] = entry
	} else {
		m.Funding = append(m.Funding, entry)
	}
	skipped := int64(0)
	if latest > m.NextFundingTsMs {
		skipped = (latest - m.NextFundingTsMs) / FundingIntervalMs
	}
	m.NextFundingTsMs = latest + FundingIntervalMs
	return FundingEvent{BoundaryTsMs: latest, RateQ9: rate, SkewQ9: skew, SkippedBoundaries: skipped}, true
}

// Funding returns the market's last FundingHistoryMax boundaries, oldest
// first.
func (s *State) Funding(marketID string) ([]FundingEntry, error) {
	m, err := s.market(marketID)
	if err != nil {
		return nil, err
	}
	return append([]FundingEntry(nil), m.Funding...), nil
}
