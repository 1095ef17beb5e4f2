package market

import (
	"errors"
	"fmt"
)

// OverridePointsMax bounds one oracle script. The override is part of the
// replicated state (and so of every snapshot and state hash), so it is kept
// well below the leader-side source's own bound: a thousand points at one a
// second is a quarter of an hour, and linear mode covers longer paths with
// few points.
const OverridePointsMax = 1_000

// OverrideMode says how an operator override drives a feed.
type OverrideMode string

const (
	// OverridePin holds the feed at one price.
	OverridePin OverrideMode = "pin"
	// OverrideStep plays a script, holding each point's price until the next.
	OverrideStep OverrideMode = "step"
	// OverrideLinear plays a script, moving in a straight line between points.
	OverrideLinear OverrideMode = "linear"
)

// ErrBadOverride refuses an invalid pin or script.
var ErrBadOverride = errors.New("invalid oracle override")

// OverridePoint is a price at an offset from the override's start.
type OverridePoint struct {
	OffsetMs int64
	MidQ8    int64
}

// Override is an operator's pin or script on a feed (admin path, for tests
// and demos). It lives in the replicated state rather than in the leader's
// memory so that whichever node leads next keeps playing it from the same
// start: the oracle driver reads it and configures its source. The FSM
// itself never uses it to judge prints; prints are the leader's.
type Override struct {
	Mode   OverrideMode
	Points []OverridePoint
	// StartMs is the log time the override was set; script offsets count
	// from it, so every leader plays the same path.
	StartMs int64
	// SetIndex is the log index that set it. The driver compares it with
	// what it installed to notice a new override on the same feed.
	SetIndex uint64
}

// Validate checks an override: a known mode, 1..OverridePointsMax points
// with offsets non-negative and strictly increasing and every price in
// [1, PriceQ8Max]. A pin is exactly one point at offset 0.
func (o Override) Validate() error {
	switch o.Mode {
	case OverridePin:
		if len(o.Points) != 1 || o.Points[0].OffsetMs != 0 {
			return fmt.Errorf("%w: a pin is one point at offset 0", ErrBadOverride)
		}
	case OverrideStep, OverrideLinear:
	default:
		return fmt.Errorf("%w: mode %q is not pin, step or linear", ErrBadOverride, o.Mode)
	}
	if len(o.Points) == 0 || len(o.Points) > OverridePointsMax {
		return fmt.Errorf("%w: %d points, want 1..%d", ErrBadOverride, len(o.Points), OverridePointsMax)
	}
	for i, pt := range o.Points {
		if pt.MidQ8 <= 0 || pt.MidQ8 > PriceQ8Max {
			return fmt.Errorf("%w: point %d midQ8 %d outside [1, %d]", ErrBadOverride, i, pt.MidQ8, PriceQ8Max)
		}
		if pt.OffsetMs < 0 || (i > 0 && pt.OffsetMs <= o.Points[i-1].OffsetMs) {
			return fmt.Errorf("%w: point %d offsetMs %d not increasing from 0", ErrBadOverride, i, pt.OffsetMs)
		}
	}
	return nil
}

// SetOverride installs o on a feed, replacing any earlier override. A
// refused override changes nothing.
func (s *State) SetOverride(feedID string, o Override) error {
	f, ok := s.FeedsByID[feedID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownFeed, feedID)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	o.Points = append([]OverridePoint(nil), o.Points...)
	f.Override = &o
	return nil
}

// ClearOverride removes a feed's override; had reports whether there was one.
func (s *State) ClearOverride(feedID string) (had bool, err error) {
	f, ok := s.FeedsByID[feedID]
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownFeed, feedID)
	}
	had = f.Override != nil
	f.Override = nil
	return had, nil
}

// FeedOverride returns a copy of a feed's override; ok is false when the
// feed is unknown or has none.
func (s *State) FeedOverride(feedID string) (Override, bool) {
	f, found := s.FeedsByID[feedID]
	if !found || f.Override == nil {
		return Override{}, false
	}
	o := *f.Override
	o.Points = append([]OverridePoint(nil), o.Points...)
	return o, true
}

// PriceSource says what drives a feed's prints, for clients: the live
// oracle, or an operator's pin or script. It is read off the feed's
// override, so a script that has played its last point still reads
// scripted: the feed holds that price until the operator unpins it.
type PriceSource string

const (
	// SourceOracle: no override; prints come from the oracle source.
	SourceOracle PriceSource = "oracle"
	// SourcePinned: an operator holds the feed at one price (OverridePin).
	SourcePinned PriceSource = "pinned"
	// SourceScripted: an operator's script drives the feed (OverrideStep,
	// OverrideLinear), including after its last point.
	SourceScripted PriceSource = "scripted"
)

// PriceSource returns what drives a feed; an unknown feed reads oracle.
func (s *State) PriceSource(feedID string) PriceSource {
	f, ok := s.FeedsByID[feedID]
	if !ok || f.Override == nil {
		return SourceOracle
	}
	if f.Override.Mode == OverridePin {
		return SourcePinned
	}
	return SourceScripted
}
