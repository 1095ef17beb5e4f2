package market

import (
	"errors"
	"fmt"
	"sort"
)

// PrintFutureToleranceMs is how far a print's timestamp may run ahead of the
// entry's time. Leader and oracle read one clock, so any skew is small; a
// larger lead would let one print block every honest print after it (prints
// never go back in time).
const PrintFutureToleranceMs = 2_000

// PriceQ8Max is the highest price the book accepts, a billion dollars. It
// keeps every later product of a price with sizes and rates well inside the
// 128-bit helpers, and turns a feed gone mad into a refusal.
const PriceQ8Max = 1_000_000_000 * Q8

// Errors of ApplyPrint.
var (
	ErrBadPrint        = errors.New("invalid oracle print")
	ErrPrintOutOfOrder = errors.New("oracle print not newer than the last")
	ErrPrintInFuture   = errors.New("oracle print timestamp too far in the future")
)

// ApplyPrint takes an oracle print for a feed and updates the feed's last
// print and the candles of every market priced from it. Prices never go back
// in time: a print not strictly newer than the feed's last is refused, and so
// is one stamped beyond nowMs + PrintFutureToleranceMs. A refused print
// changes nothing.
func (s *State) ApplyPrint(nowMs int64, feedID string, midQ8, confQ9, tsMs int64) error {
	if err := s.CheckPrint(nowMs, feedID, midQ8, confQ9, tsMs); err != nil {
		return err
	}
	f := s.FeedsByID[feedID]
	if f.Last == nil {
		f.Last = &Print{}
	}
	*f.Last = Print{MidQ8: midQ8, ConfQ9: confQ9, TsMs: tsMs}
	for _, id := range f.MarketIDs {
		s.MarketsByID[id].takePrint(midQ8, tsMs)
	}
	return nil
}

// CheckPrint is ApplyPrint's validation alone: nil when the print may be
// applied now.
func (s *State) CheckPrint(nowMs int64, feedID string, midQ8, confQ9, tsMs int64) error {
	f, ok := s.FeedsByID[feedID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownFeed, feedID)
	}
	switch {
	case midQ8 <= 0 || midQ8 > PriceQ8Max:
		return fmt.Errorf("%w: midQ8 %d outside [1, %d]", ErrBadPrint, midQ8, PriceQ8Max)
	case confQ9 < 0 || confQ9 > Q9:
		return fmt.Errorf("%w: confQ9 %d outside [0, 1e9]", ErrBadPrint, confQ9)
	case tsMs <= 0:
		return fmt.Errorf("%w: tsMs %d must be positive", ErrBadPrint, tsMs)
	case f.Last != nil && tsMs <= f.Last.TsMs:
		return fmt.Errorf("%w: %s tsMs %d, last %d", ErrPrintOutOfOrder, feedID, tsMs, f.Last.TsMs)
	case tsMs > nowMs+PrintFutureToleranceMs:
		return fmt.Errorf("%w: %s tsMs %d, now %d", ErrPrintInFuture, feedID, tsMs, nowMs)
	}
	return nil
}

// ErrPrintBeforeLaunch refuses a print stamped in or before a market's
// seeded pre-launch history (CheckPrintAfterHistory).
var ErrPrintBeforeLaunch = errors.New("oracle print timestamp inside seeded pre-launch history")

// CheckPrintAfterHistory refuses a print whose daily bar, in some market
// of the feed, is a seeded pre-launch bar or would come before one
// (fsm.LevelPrintAfterHistory). Seeded bars end the day before launch, so
// no honest print lands there; one from a source with a stale cache or
// seconds for milliseconds does, and addPrint would turn a seeded bar, or
// a bar before all of them, into a "real" one for good (daily bars are
// permanent).
func (s *State) CheckPrintAfterHistory(feedID string, tsMs int64) error {
	f, ok := s.FeedsByID[feedID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownFeed, feedID)
	}
	day := floorTo(tsMs, Interval1d*1000)
	for _, id := range f.MarketIDs {
		bars := s.MarketsByID[id].Day
		if i, _ := locate(bars, day); i < len(bars) && bars[i].Seeded {
			return fmt.Errorf("%w: %s tsMs %d, market %s's history runs to %d", ErrPrintBeforeLaunch, feedID, tsMs, id, bars[i].TsMs)
		}
	}
	return nil
}

// PrintJumpFactor bounds how far one print may move a feed from its last
// accepted print and be taken at once (from fsm.LevelPrintGuard): to at
// most this many times it, or at least its 1/PrintJumpFactor. A genuine
// move of that size between two prints a second apart does not happen to
// an aggregated index; a glitch (a dropped decimal, a zero, a stray tick
// of one venue) does, and taken at once it liquidates every position on
// one side and pays the other out of everyone's deposits.
const PrintJumpFactor = 2

// AdmitPrint decides a print that CheckPrint accepted, from
// fsm.LevelPrintGuard: a print within PrintJumpFactor of the feed's last,
// or of a held print it comes after, is taken (true: apply it; the held
// print is forgotten); any other becomes the held print (false), so a
// real jump is taken one print late and a lone glitch never.
func (s *State) AdmitPrint(feedID string, midQ8, confQ9, tsMs int64) bool {
	f := s.FeedsByID[feedID]
	within := func(ref *Print) bool { return ref != nil && WithinJump(ref.MidQ8, midQ8) }
	if f.Last == nil || within(f.Last) || (within(f.Held) && f.Held.TsMs < tsMs) {
		f.Held = nil
		return true
	}
	f.Held = &Print{MidQ8: midQ8, ConfQ9: confQ9, TsMs: tsMs}
	return false
}

// WithinJump reports whether a price of midQ8 is within PrintJumpFactor of
// refQ8 (both in [1, PriceQ8Max], so the products cannot overflow).
func WithinJump(refQ8, midQ8 int64) bool {
	return midQ8 <= refQ8*PrintJumpFactor && midQ8*PrintJumpFactor >= refQ8
}

// takePrint folds a print into the market's bars. A market re-pointed to
// another feed may see that feed's clock behind its own last print; such
// prints still update the feed but not this market's candles, so bars never
// take a close older than their latest.
func (m *MarketState) takePrint(midQ8, tsMs int64) {
	if tsMs <= m.LastPrintTsMs {
		return
	}
	if m.FirstPrintTsMs == 0 {
		m.FirstPrintTsMs = tsMs
	}
	m.LastPrintTsMs, m.LastPrintMidQ8 = tsMs, midQ8
	for _, iv := range intervals {
		m.setSeries(iv, addPrint(m.series(iv), iv, midQ8, tsMs))
	}
}

// IsStale reports whether a market has no usable oracle price at nowMs: no
// print yet, or a last print older than oracleStalenessMs. A print exactly
// oracleStalenessMs old is still fresh. Unknown markets are stale.
func (s *State) IsStale(marketID string, nowMs int64) bool {
	last := s.lastPrint(marketID)
	if last == nil {
		return true
	}
	return nowMs-last.TsMs > s.MarketsByID[marketID].Params.OracleStalenessMs
}

// LastPrint returns the last print of the market's feed.
func (s *State) LastPrint(marketID string) (Print, bool) {
	last := s.lastPrint(marketID)
	if last == nil {
		return Print{}, false
	}
	return *last, true
}

// PrintHeld reports whether the market's feed holds a print that jumped
// past PrintJumpFactor and waits for confirmation: its last print may then
// be far from the price.
func (s *State) PrintHeld(marketID string) bool {
	m, ok := s.MarketsByID[marketID]
	if !ok {
		return false
	}
	f, ok := s.FeedsByID[m.Params.OracleFeedID]
	return ok && f.Held != nil
}

// FeedLast returns a feed's last print; ok is false for an unknown feed or
// one without prints. The oracle driver resumes from it after a leadership
// change.
func (s *State) FeedLast(feedID string) (Print, bool) {
	f, ok := s.FeedsByID[feedID]
	if !ok || f.Last == nil {
		return Print{}, false
	}
	return *f.Last, true
}

// FeedHeld returns the print a feed holds past PrintJumpFactor until the
// next print confirms it; ok is false when it holds none.
func (s *State) FeedHeld(feedID string) (Print, bool) {
	f, ok := s.FeedsByID[feedID]
	if !ok || f.Held == nil {
		return Print{}, false
	}
	return *f.Held, true
}

// FeedIDs returns every feed id, sorted.
func (s *State) FeedIDs() []string {
	ids := make([]string, 0, len(s.FeedsByID))
	for id := range s.FeedsByID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (s *State) lastPrint(marketID string) *Print {
	m, ok := s.MarketsByID[marketID]
	if !ok {
		return nil
	}
	f, ok := s.FeedsByID[m.Params.OracleFeedID]
	if !ok {
		return nil
	}
	return f.Last
}

// MarketIDOf returns the id of the market whose id is b, the market's own
// string, without allocating; ok is false when there is none (or s is
// nil). Decoding an order uses it so that the order shares the id.
func (s *State) MarketIDOf(b []byte) (id string, ok bool) {
	if s == nil {
		return "", false
	}
	if m, found := s.MarketsByID[string(b)]; found && m.Params.MarketID == string(b) {
		return m.Params.MarketID, true
	}
	return "", false
}
