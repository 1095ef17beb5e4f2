package growth

import (
	"time"

	"github.com/perpd/perpd/fsm/wire"
)

// PlacementView is SPEC's Placement.
type PlacementView struct {
	Board           string    `json:"board" enum:"pnl,roi"`
	Window          string    `json:"window" enum:"7d,30d,all"`
	Rank            wire.Int  `json:"rank" unit:"int"`
	PnlMsat         wire.Int  `json:"pnlMsat" unit:"msat"`
	RoiQ9           wire.Int  `json:"roiQ9" unit:"q9"`
	VolumeContracts wire.Int  `json:"volumeContracts" unit:"contracts"`
	Trades          wire.Int  `json:"trades" unit:"int"`
	WinRateQ9       *wire.Int `json:"winRateQ9" unit:"q9" doc:"closing trades with positive realised PnL over closing trades; null without a close"`
	MaxDrawdownQ9   wire.Int  `json:"maxDrawdownQ9" unit:"q9" doc:"largest fall of the daily equity index from its running peak, over the window"`
}

// RowView is one board row.
type RowView struct {
	Rank            wire.Int  `json:"rank" unit:"int"`
	Handle          string    `json:"handle"`
	DisplayName     *string   `json:"displayName"`
	PnlMsat         wire.Int  `json:"pnlMsat" unit:"msat"`
	RoiQ9           wire.Int  `json:"roiQ9" unit:"q9"`
	VolumeContracts wire.Int  `json:"volumeContracts" unit:"contracts"`
	Trades          wire.Int  `json:"trades" unit:"int"`
	WinRateQ9       *wire.Int `json:"winRateQ9" unit:"q9"`
	MaxDrawdownQ9   wire.Int  `json:"maxDrawdownQ9" unit:"q9"`
}

// GatesView is a board's gates.
type GatesView struct {
	MinEquityMsat      wire.Int `json:"minEquityMsat" unit:"msat"`
	MinTrades          wire.Int `json:"minTrades" unit:"int"`
	MinVolumeContracts wire.Int `json:"minVolumeContracts" unit:"contracts"`
}

// BoardView is SPEC's Board.
type BoardView struct {
	Board          string    `json:"board" enum:"pnl,roi"`
	Window         string    `json:"window" enum:"7d,30d,all"`
	Rows           []RowView `json:"rows"`
	ComputedTsMs   *wire.Int `json:"computedTsMs" unit:"ms" doc:"log time of the recompute the rows come from; null before the first"`
	CadenceMinutes wire.Int  `json:"cadenceMinutes" unit:"int"`
	Gates          GatesView `json:"gates"`
	Windows        []string  `json:"windows,omitempty" doc:"the windows served"`
	Testnet        bool      `json:"testnet"`
}

// CheckView is one gate of an eligibility check.
type CheckView struct {
	Gate          string    `json:"gate" enum:"minEquityMsat,minTrades,minVolumeContracts"`
	OK            bool      `json:"ok"`
	ThresholdMsat *wire.Int `json:"thresholdMsat" unit:"msat"`
	Threshold     *wire.Int `json:"threshold" unit:"int"`
	ValueMsat     *wire.Int `json:"valueMsat,omitempty" unit:"msat"`
	Value         *wire.Int `json:"value,omitempty" unit:"int"`
}

// EligibilityCheckView is one window's eligibility.
type EligibilityCheckView struct {
	Window       string      `json:"window" enum:"7d,30d,all"`
	Eligible     bool        `json:"eligible"`
	Reason       *string     `json:"reason" enum:"gates_failed,insufficient_history,coverage_gap,window_unserved"`
	EligibleAtMs *wire.Int   `json:"eligibleAtMs" unit:"ms"`
	Checks       []CheckView `json:"checks"`
}

// OwnView is SPEC's own view (also the settings result).
type OwnView struct {
	OptedOut    bool                   `json:"optedOut"`
	Handle      *string                `json:"handle"`
	DisplayName *string                `json:"displayName"`
	Placements  []PlacementView        `json:"placements"`
	Eligibility []EligibilityCheckView `json:"eligibility"`
}

// CurveView is one equity curve point.
type CurveView struct {
	DayTsMs wire.Int `json:"dayTsMs" unit:"ms"`
	IndexQ9 wire.Int `json:"indexQ9" unit:"q9" doc:"equity index at the end of the day: 1e9 at the start of the curve, times (1 + that day's PnL / equity at the day's open, plus capital deposited during the day before its PnL) each day"`
}

// ProfileView is SPEC's Profile.
type ProfileView struct {
	Handle       string          `json:"handle"`
	DisplayName  *string         `json:"displayName"`
	TradingSince *string         `json:"tradingSince" doc:"UTC date (YYYY-MM-DD) of the first fill"`
	Placements   []PlacementView `json:"placements"`
	EquityCurve  []CurveView     `json:"equityCurve"`
	Testnet      bool            `json:"testnet"`
}

func winRate(m Metrics) *wire.Int {
	if m.Closes == 0 {
		return nil
	}
	return wire.Ptr(mulDivFloor(m.Wins, Q9, m.Closes))
}

func namePtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Board renders board bi over window wi as of the last recompute.
func (s *State) BoardOf(bi, wi, limit int, testnet bool) BoardView {
	b := s.Board
	g := b.Gates
	v := BoardView{Board: BoardNames[bi], Window: WindowNames[wi], Rows: []RowView{}, CadenceMinutes: CadenceMinutes,
		Gates:   GatesView{MinEquityMsat: wire.Int(g.MinEquityMsat), MinTrades: wire.Int(g.MinTrades), MinVolumeContracts: wire.Int(g.MinVolumeContracts)},
		Windows: WindowNames, Testnet: testnet}
	if b.ComputedTsMs != 0 {
		v.ComputedTsMs = wire.Ptr(b.ComputedTsMs)
	}
	for _, id := range b.Rows[boardKey(bi, wi)] {
		if len(v.Rows) == limit {
			break
		}
		t := b.Traders[id]
		m := t.Snap.Windows[wi]
		v.Rows = append(v.Rows, RowView{Rank: wire.Int(t.Snap.Ranks[bi*3+wi]), Handle: t.Handle, DisplayName: namePtr(t.DisplayName),
			PnlMsat: wire.Int(m.PnlMsat), RoiQ9: wire.Int(m.RoiQ9), VolumeContracts: wire.Int(m.Volume), Trades: wire.Int(m.Trades),
			WinRateQ9: winRate(m), MaxDrawdownQ9: wire.Int(m.MaxDDQ9)})
	}
	return v
}

func placements(t *Trader) []PlacementView {
	out := []PlacementView{}
	if t == nil || t.Snap == nil || t.OptedOut {
		return out
	}
	for bi := range BoardNames {
		for wi := range WindowNames {
			r := t.Snap.Ranks[bi*3+wi]
			if r == 0 {
				continue
			}
			m := t.Snap.Windows[wi]
			out = append(out, PlacementView{Board: BoardNames[bi], Window: WindowNames[wi], Rank: wire.Int(r),
				PnlMsat: wire.Int(m.PnlMsat), RoiQ9: wire.Int(m.RoiQ9), VolumeContracts: wire.Int(m.Volume),
				Trades: wire.Int(m.Trades), WinRateQ9: winRate(m), MaxDrawdownQ9: wire.Int(m.MaxDDQ9)})
		}
	}
	return out
}

// Own renders accountID's own view: placements as of the last recompute,
// eligibility on the current figures.
func (s *State) Own(accountID string, nowMs, equity int64) OwnView {
	b := s.Board
	t := b.Traders[accountID]
	v := OwnView{Placements: placements(t), Eligibility: []EligibilityCheckView{}}
	if t != nil {
		v.OptedOut, v.Handle, v.DisplayName = t.OptedOut, namePtr(t.Handle), namePtr(t.DisplayName)
	}
	g := b.Gates
	for wi := range WindowNames {
		var m Metrics
		if t != nil {
			m = t.windowMetrics(wi, dayOf(nowMs))
		}
		checks := []CheckView{
			{Gate: "minEquityMsat", OK: equity >= g.MinEquityMsat, ThresholdMsat: wire.Ptr(g.MinEquityMsat), ValueMsat: wire.Ptr(equity)},
			{Gate: "minTrades", OK: m.Trades >= g.MinTrades, Threshold: wire.Ptr(g.MinTrades), Value: wire.Ptr(m.Trades)},
			{Gate: "minVolumeContracts", OK: m.Volume >= g.MinVolumeContracts, Threshold: wire.Ptr(g.MinVolumeContracts), Value: wire.Ptr(m.Volume)},
		}
		e := EligibilityCheckView{Window: WindowNames[wi], Eligible: true, Checks: checks}
		for _, c := range checks {
			e.Eligible = e.Eligible && c.OK
		}
		if !e.Eligible {
			reason := "gates_failed"
			if m.Trades == 0 {
				reason = "insufficient_history"
			}
			e.Reason = &reason
		}
		v.Eligibility = append(v.Eligibility, e)
	}
	return v
}

// Profile renders handle's public profile as of the last recompute; false
// for an unknown handle and an opted-out trader alike (the same lookup and
// check on both paths).
func (s *State) Profile(handle string, testnet bool) (ProfileView, bool) {
	t := s.lookup(handle)
	if t == nil {
		return ProfileView{}, false
	}
	v := ProfileView{Handle: t.Handle, DisplayName: namePtr(t.DisplayName), Placements: placements(t),
		EquityCurve: []CurveView{}, Testnet: testnet}
	if t.SinceTsMs != 0 {
		// A UTC calendar date of a log timestamp: formatting only, no clock.
		d := time.UnixMilli(t.SinceTsMs).UTC().Format("2006-01-02")
		v.TradingSince = &d
	}
	if t.Snap != nil {
		for _, p := range t.Snap.Curve {
			v.EquityCurve = append(v.EquityCurve, CurveView{DayTsMs: wire.Int(p.Day), IndexQ9: wire.Int(p.IndexQ9)})
		}
	}
	return v, true
}

// lookup finds an opted-in trader by handle (nil: unknown or opted out).
func (s *State) lookup(handle string) *Trader {
	id, ok := s.Board.Handles[handle]
	t := s.Board.Traders[id]
	if !ok || t == nil || t.OptedOut {
		return nil
	}
	return t
}

// CardData is what a share card shows, from the last recompute.
type CardData struct {
	Handle, DisplayName, TradingSince string
	Placements                        []PlacementView
	// PnlMsat and RoiQ9 are the 30d window's.
	PnlMsat, RoiQ9 int64
	Curve          []int64
	ComputedTsMs   int64
	Rev            int64
}

// Card returns handle's share card data (false: unknown or opted out,
// after the same lookup and check as Profile).
func (s *State) Card(handle string) (CardData, bool) {
	t := s.lookup(handle)
	if t == nil {
		return CardData{}, false
	}
	p, _ := s.Profile(handle, false)
	d := CardData{Handle: t.Handle, DisplayName: t.DisplayName, Placements: p.Placements,
		ComputedTsMs: s.Board.ComputedTsMs, Rev: t.Rev}
	if p.TradingSince != nil {
		d.TradingSince = *p.TradingSince
	}
	if t.Snap != nil {
		d.PnlMsat, d.RoiQ9 = t.Snap.Windows[1].PnlMsat, t.Snap.Windows[1].RoiQ9
		for _, c := range t.Snap.Curve {
			d.Curve = append(d.Curve, c.IndexQ9)
		}
	}
	return d, true
}
