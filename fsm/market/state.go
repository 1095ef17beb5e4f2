package market

import (
	"errors"
	"fmt"
	"sort"
)

// Bounds on the number of markets and feeds in one state.
const (
	MarketsMax = 64
	// FeedsMax allows every market its own feed plus as many re-pointed
	// feeds again; feeds are never deleted, so that a feed's last print
	// timestamp (which guards against prices going back in time) survives.
	FeedsMax = 2 * MarketsMax
)

// Errors the core maps to API codes (not_found, validation, conflict).
var (
	ErrUnknownMarket  = errors.New("unknown market")
	ErrUnknownFeed    = errors.New("unknown oracle feed")
	ErrImmutableField = errors.New("market field cannot change")
	ErrTooManyMarkets = errors.New("too many markets")
	ErrInvalidOI      = errors.New("invalid open interest change")
)

// Side of open interest: +1 long, -1 short, as in the design notes.
type Side int

const (
	Long  Side = 1
	Short Side = -1
)

// State is the market book of the FSM. Every field is exported plain data
// so the core can encode the whole value with canonical CBOR for snapshots
// and the state hash.
type State struct {
	MarketsByID map[string]*MarketState
	FeedsByID   map[string]*Feed
}

// Print is one oracle observation.
type Print struct {
	MidQ8  int64
	ConfQ9 int64
	TsMs   int64
}

// Feed is an oracle feed and the markets priced from it.
type Feed struct {
	FeedID string
	// MarketIDs is kept sorted, so a print updates markets in one order on
	// every replica.
	MarketIDs []string
	// Last is the newest accepted print; nil before the first.
	Last *Print
	// Override is an operator pin or script (see Override); nil when none.
	// Omitted when nil so that states without one encode as before.
	Override *Override `cbor:",omitempty"`
	// Held is a print that jumped beyond PrintJumpFactor from Last and
	// waits for the next print to confirm it (AdmitPrint); nil when none.
	Held *Print `cbor:",omitempty"`
}

// MarketState is one market: its parameters and everything derived from
// prints, fills and time.
type MarketState struct {
	Params Params

	LongOIContracts  int64
	ShortOIContracts int64

	// NextFundingTsMs is the next funding boundary, a whole hour.
	NextFundingTsMs int64
	// Funding holds the last FundingHistoryMax boundaries, oldest first.
	Funding []FundingEntry

	// Bars per interval, oldest first.
	Minute []Bar
	Hour   []Bar
	Day    []Bar

	// FirstPrintTsMs and LastPrintTsMs bound the prints this market's
	// candles have taken (0: none yet). Print timestamps are refused unless
	// positive, so 0 is free to mean "none".
	FirstPrintTsMs int64
	LastPrintTsMs  int64
	LastPrintMidQ8 int64
	// FirstFillTsMs is the timestamp of the first fill (0: none yet); bars
	// ending after it report volumeContracts.
	FirstFillTsMs int64
}

// NewState returns an empty market book.
func NewState() *State {
	return &State{MarketsByID: map[string]*MarketState{}, FeedsByID: map[string]*Feed{}}
}

// New returns a market book holding the given catalogue. nowMs (the
// bootstrap entry's time) schedules the first funding boundary at the next
// whole hour; nowMs <= 0 leaves it to the first Advance.
func New(nowMs int64, catalogue []Params) (*State, error) {
	s := NewState()
	for _, p := range catalogue {
		if err := s.SetParams(nowMs, p); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SetParams adds a market or replaces a market's parameters (admin path).
// The fields that define what a contract is worth (underlying, contract type,
// quanto multiplier) cannot change on an existing market, because open
// positions were priced with them; a new contract needs a new market id.
func (s *State) SetParams(nowMs int64, p Params) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p = p.Clone()
	m, exists := s.MarketsByID[p.MarketID]
	if exists {
		if err := checkImmutable(m.Params, p); err != nil {
			return err
		}
	} else if len(s.MarketsByID) >= MarketsMax {
		return fmt.Errorf("%w: max %d", ErrTooManyMarkets, MarketsMax)
	}
	feedChanges := !exists || m.Params.OracleFeedID != p.OracleFeedID
	if feedChanges {
		if _, ok := s.FeedsByID[p.OracleFeedID]; !ok && len(s.FeedsByID) >= FeedsMax {
			return fmt.Errorf("%w: feeds max %d", ErrTooManyMarkets, FeedsMax)
		}
	}
	// Every check has passed: mutate from here on.
	if !exists {
		m = &MarketState{}
		if nowMs > 0 {
			m.NextFundingTsMs = floorTo(nowMs, FundingIntervalMs) + FundingIntervalMs
		}
		s.MarketsByID[p.MarketID] = m
	}
	if feedChanges {
		if exists {
			s.FeedsByID[m.Params.OracleFeedID].removeMarket(p.MarketID)
		}
		s.feed(p.OracleFeedID).addMarket(p.MarketID)
	}
	m.Params = p
	return nil
}

func checkImmutable(old, p Params) error {
	sameMult := (old.QuantoMultiplierMsat == nil) == (p.QuantoMultiplierMsat == nil) &&
		(old.QuantoMultiplierMsat == nil || *old.QuantoMultiplierMsat == *p.QuantoMultiplierMsat)
	switch {
	case old.Underlying != p.Underlying:
		return fmt.Errorf("%w: %s underlying", ErrImmutableField, p.MarketID)
	case old.ContractType != p.ContractType:
		return fmt.Errorf("%w: %s contractType", ErrImmutableField, p.MarketID)
	case !sameMult:
		return fmt.Errorf("%w: %s quantoMultiplierMsat", ErrImmutableField, p.MarketID)
	}
	return nil
}

// SetStatus changes a market's status (admin path).
func (s *State) SetStatus(marketID string, st Status) error {
	if !st.Valid() {
		return fmt.Errorf("%w: status %q is not live, reduce_only or halted", ErrInvalidParams, st)
	}
	m, ok := s.MarketsByID[marketID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownMarket, marketID)
	}
	m.Params.Status = st
	return nil
}

// AddOpenInterest moves a market's long or short open interest by delta
// contracts (the trading engine calls it on every open and close). A change
// that would make either side negative or overflow is refused untouched.
func (s *State) AddOpenInterest(marketID string, side Side, delta int64) error {
	m, ok := s.MarketsByID[marketID]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownMarket, marketID)
	}
	var target *int64
	switch side {
	case Long:
		target = &m.LongOIContracts
	case Short:
		target = &m.ShortOIContracts
	default:
		return fmt.Errorf("%w: side %d", ErrInvalidOI, side)
	}
	next, err := addChecked(*target, delta)
	if err != nil || next < 0 {
		return fmt.Errorf("%w: %s side %d: %d%+d", ErrInvalidOI, marketID, side, *target, delta)
	}
	// The skew product (long - short) x 1e9 and the total stay in range
	// when each side stays within the order ceiling times a million.
	if next > OrderContractsCeiling*1_000_000 {
		return fmt.Errorf("%w: %s side %d above bound", ErrInvalidOI, marketID, side)
	}
	*target = next
	return nil
}

// feed returns the feed, creating it when absent.
func (s *State) feed(id string) *Feed {
	f, ok := s.FeedsByID[id]
	if !ok {
		f = &Feed{FeedID: id}
		s.FeedsByID[id] = f
	}
	return f
}

func (f *Feed) addMarket(id string) {
	i := sort.SearchStrings(f.MarketIDs, id)
	if i < len(f.MarketIDs) && f.MarketIDs[i] == id {
		return
	}
	f.MarketIDs = append(f.MarketIDs, "")
	copy(f.MarketIDs[i+1:], f.MarketIDs[i:])
	f.MarketIDs[i] = id
}

func (f *Feed) removeMarket(id string) {
	i := sort.SearchStrings(f.MarketIDs, id)
	if i < len(f.MarketIDs) && f.MarketIDs[i] == id {
		f.MarketIDs = append(f.MarketIDs[:i], f.MarketIDs[i+1:]...)
	}
}

// sortedMarketIDs lists market ids in byte order, the one order every
// replica agrees on.
func (s *State) sortedMarketIDs() []string {
	ids := make([]string, 0, len(s.MarketsByID))
	for id := range s.MarketsByID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (s *State) market(id string) (*MarketState, error) {
	m, ok := s.MarketsByID[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMarket, id)
	}
	return m, nil
}
