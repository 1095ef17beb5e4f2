package fsm

import (
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// Wire views of the market book: the public Market resource of SPEC
// section 2 (also the answer to an admin market set), the oracle override
// an admin sees, and the payloads of the prices and stats events. They live
// beside the commands because stored results and events are built from
// them inside apply.

// MarketView is the public Market resource.
type MarketView struct {
	MarketID              string         `json:"marketId"`
	Underlying            string         `json:"underlying"`
	OracleFeedID          string         `json:"oracleFeedId"`
	ContractType          string         `json:"contractType" enum:"inverse,quanto"`
	QuantoMultiplierMsat  *wire.Int      `json:"quantoMultiplierMsat" unit:"msat"`
	Status                string         `json:"status" enum:"live,reduce_only,halted"`
	TickSizeQ8            wire.Int       `json:"tickSizeQ8" unit:"q8"`
	PriceDp               wire.Int       `json:"priceDp" unit:"int"`
	MinOrderContracts     wire.Int       `json:"minOrderContracts" unit:"contracts"`
	MaxOrderContracts     wire.Int       `json:"maxOrderContracts" unit:"contracts"`
	OpenInterestContracts wire.Int       `json:"openInterestContracts" unit:"contracts"`
	TakerFeeQ9            wire.Int       `json:"takerFeeQ9" unit:"q9"`
	IMRateQ9              wire.Int       `json:"imRateQ9" unit:"q9"`
	MMRateQ9              wire.Int       `json:"mmRateQ9" unit:"q9"`
	BaseSpreadQ9          wire.Int       `json:"baseSpreadQ9" unit:"q9"`
	FundingRateHourlyQ9   wire.Int       `json:"fundingRateHourlyQ9" unit:"q9"`
	SkewQ9                wire.Int       `json:"skewQ9" unit:"q9"`
	MaxLeverage           wire.Int       `json:"maxLeverage" unit:"int"`
	NextFundingTsMs       wire.Int       `json:"nextFundingTsMs" unit:"ms"`
	OracleStalenessMs     wire.Int       `json:"oracleStalenessMs" unit:"ms"`
	LastPrice             *LastPriceView `json:"lastPrice"`
	PriceSource           string         `json:"priceSource,omitempty" enum:"oracle,pinned,scripted" doc:"what drives the feed's prints: oracle (the live oracle), pinned (an operator holds the price), scripted (an operator's script, also after its last point: the price holds until the operator lifts it). Always present in GET /v1/markets; omitted only in an operator's market-change answer recorded below feature level 8"`
}

// LastPriceView is the Market resource's lastPrice and a ticker's last.
type LastPriceView struct {
	MidQ8 wire.Int `json:"midQ8" unit:"q8"`
	TsMs  wire.Int `json:"tsMs" unit:"ms"`
}

// NewMarketView renders a market's public view.
func NewMarketView(v market.MarketView) MarketView {
	out := MarketView{
		MarketID: v.MarketID, Underlying: v.Underlying, OracleFeedID: v.OracleFeedID,
		ContractType: string(v.ContractType), Status: string(v.Status),
		TickSizeQ8: wire.Int(v.TickSizeQ8), PriceDp: wire.Int(v.PriceDp),
		MinOrderContracts: wire.Int(v.MinOrderContracts), MaxOrderContracts: wire.Int(v.MaxOrderContracts),
		OpenInterestContracts: wire.Int(v.OpenInterestContracts),
		TakerFeeQ9:            wire.Int(v.TakerFeeQ9), IMRateQ9: wire.Int(v.IMRateQ9), MMRateQ9: wire.Int(v.MMRateQ9),
		BaseSpreadQ9: wire.Int(v.BaseSpreadQ9), FundingRateHourlyQ9: wire.Int(v.FundingRateHourlyQ9),
		SkewQ9: wire.Int(v.SkewQ9), MaxLeverage: wire.Int(v.MaxLeverage),
		NextFundingTsMs: wire.Int(v.NextFundingTsMs), OracleStalenessMs: wire.Int(v.OracleStalenessMs),
		LastPrice: NewLastPriceView(v.LastPrice), PriceSource: string(v.PriceSource),
	}
	if v.QuantoMultiplierMsat != nil {
		out.QuantoMultiplierMsat = wire.Ptr(*v.QuantoMultiplierMsat)
	}
	return out
}

// NewLastPriceView renders a last price; nil stays nil (null on the wire).
func NewLastPriceView(lp *market.LastPrice) *LastPriceView {
	if lp == nil {
		return nil
	}
	return &LastPriceView{MidQ8: wire.Int(lp.MidQ8), TsMs: wire.Int(lp.TsMs)}
}

// OverridePointView is one point of an oracle script.
type OverridePointView struct {
	OffsetMs wire.Int `json:"offsetMs" unit:"ms"`
	MidQ8    wire.Int `json:"midQ8" unit:"q8"`
}

// OverrideView is a feed's operator override.
type OverrideView struct {
	Mode     string              `json:"mode" enum:"pin,step,linear"`
	StartMs  wire.Int            `json:"startMs" unit:"ms"`
	SetIndex wire.Int            `json:"setIndex" unit:"int"`
	Points   []OverridePointView `json:"points"`
}

// FeedOverrideView answers pin, script and unpin: the feed's override
// after the command, null when none.
type FeedOverrideView struct {
	FeedID   string        `json:"feedId"`
	Override *OverrideView `json:"override"`
}

func newOverrideView(s *market.State, feedID string) FeedOverrideView {
	out := FeedOverrideView{FeedID: feedID}
	o, ok := s.FeedOverride(feedID)
	if !ok {
		return out
	}
	v := &OverrideView{Mode: string(o.Mode), StartMs: wire.Int(o.StartMs), SetIndex: wire.Int(int64(o.SetIndex)),
		Points: make([]OverridePointView, len(o.Points))}
	for i, p := range o.Points {
		v.Points[i] = OverridePointView{OffsetMs: wire.Int(p.OffsetMs), MidQ8: wire.Int(p.MidQ8)}
	}
	out.Override = v
	return out
}

// NewFeedOverrideView renders a feed's override, for the admin listing.
func NewFeedOverrideView(s *market.State, feedID string) FeedOverrideView {
	return newOverrideView(s, feedID)
}

// PriceEvent is the payload of a prices-channel event: one oracle print.
// StalenessMs is the staleness input of SPEC section 6: the strictest
// oracleStalenessMs among the markets priced from the feed.
type PriceEvent struct {
	FeedID      string   `json:"feedId"`
	MidQ8       wire.Int `json:"midQ8" unit:"q8"`
	ConfQ9      wire.Int `json:"confQ9" unit:"q9"`
	TsMs        wire.Int `json:"tsMs" unit:"ms"`
	StalenessMs wire.Int `json:"stalenessMs" unit:"ms"`
	PriceSource string   `json:"priceSource,omitempty" enum:"oracle,pinned,scripted" doc:"what drove this print: oracle, pinned (an operator holds the price) or scripted (an operator's script, also after its last point); from feature level 8 (LevelPriceSourceShown), omitted in frames of entries below it"`
}

// LevelPriceSourceShown is the feature level (fsm.FeatureLevel) from which
// the prices frame, and an operator's market-change answer, carry
// priceSource: whether an operator's pin or script drives the feed. Found
// by a review of 2026-11-27: a pinned feed's frames looked like live,
// fresh oracle prints (liquidations ran at them) and a finished script
// held its last price unannounced. No state changes; gated so that old
// entries replay to the same frames and stored answers.
const LevelPriceSourceShown uint32 = 8

// StatsEvent is the payload of a stats-channel event, sent on every print
// of the market's feed and on every parameter change: the mark (the oracle
// mid), its timestamp and the staleness threshold, the funding rate, skew
// and open interest.
type StatsEvent struct {
	MarketID              string    `json:"marketId"`
	Status                string    `json:"status" enum:"live,reduce_only,halted"`
	MarkQ8                *wire.Int `json:"markQ8" unit:"q8"`
	OracleTsMs            *wire.Int `json:"oracleTsMs" unit:"ms"`
	StalenessMs           wire.Int  `json:"stalenessMs" unit:"ms"`
	FundingRateHourlyQ9   wire.Int  `json:"fundingRateHourlyQ9" unit:"q9"`
	SkewQ9                wire.Int  `json:"skewQ9" unit:"q9"`
	OpenInterestContracts wire.Int  `json:"openInterestContracts" unit:"contracts"`
	NextFundingTsMs       wire.Int  `json:"nextFundingTsMs" unit:"ms"`
}

// FundingBoundaryView is the payload of a stats-channel "funding" event:
// one recorded boundary. Like every stats frame (SPEC section 6, rule 5)
// it carries the oracle timestamp of its mark and the staleness input,
// from LevelFundingFrameStamped.
type FundingBoundaryView struct {
	MarketID          string    `json:"marketId"`
	BoundaryTsMs      wire.Int  `json:"boundaryTsMs" unit:"ms"`
	RateQ9            wire.Int  `json:"rateQ9" unit:"q9"`
	SkewQ9            wire.Int  `json:"skewQ9" unit:"q9"`
	MarkQ8            *wire.Int `json:"markQ8" unit:"q8"`
	MarkStale         bool      `json:"markStale"`
	SkippedBoundaries wire.Int  `json:"skippedBoundaries" unit:"int"`
	OracleTsMs        *wire.Int `json:"oracleTsMs,omitempty" unit:"ms" doc:"the mark's print time; omitted without a print (markQ8 null)"`
	StalenessMs       *wire.Int `json:"stalenessMs,omitempty" unit:"ms" doc:"the market's oracleStalenessMs"`
}

// LevelFundingFrameStamped is the feature level (fsm.FeatureLevel) from
// which the stats channel's funding frame carries oracleTsMs and
// stalenessMs, as SPEC section 6 asks of every stats frame. Found by a
// review of 2026-11-27: the frame named its markQ8 (possibly hours old at
// a boundary after downtime) without the print's time, which the market
// book computed (FundingEvent.MarkTsMs) and dropped. No state changes;
// gated so that replicas at one level emit the same frames.
const LevelFundingFrameStamped uint32 = 8

func newFundingBoundaryView(ev market.FundingEvent, level uint32, stalenessMs int64) FundingBoundaryView {
	v := FundingBoundaryView{MarketID: ev.MarketID, BoundaryTsMs: wire.Int(ev.BoundaryTsMs), RateQ9: wire.Int(ev.RateQ9),
		SkewQ9: wire.Int(ev.SkewQ9), MarkStale: ev.MarkStale, SkippedBoundaries: wire.Int(ev.SkippedBoundaries)}
	if ev.MarkQ8 != 0 {
		v.MarkQ8 = wire.Ptr(ev.MarkQ8)
	}
	if level >= LevelFundingFrameStamped {
		v.StalenessMs = wire.Ptr(stalenessMs)
		if ev.MarkQ8 != 0 {
			v.OracleTsMs = wire.Ptr(ev.MarkTsMs)
		}
	}
	return v
}
