package trade

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// OrderView is SPEC's order status view.
type OrderView struct {
	OrderID   string   `json:"orderId"`
	MarketID  string   `json:"marketId"`
	Side      string   `json:"side" enum:"buy,sell"`
	Type      string   `json:"type" enum:"market,limit,stop_market,take_profit_market"`
	Contracts wire.Int `json:"contracts" unit:"contracts"`
	Status    string   `json:"status" enum:"accepted,filled,canceled,rejected"`
	Reason    *string  `json:"reason" doc:"null while live, on a fill and on a client cancel; else why it ended: cancel_all_after, liquidation (the account's orders in a market being liquidated), oco (the other leg executed), position_closed (the position a bracket leg protected closed or flipped, or the bracket's entry left none), entry_canceled, entry_blocked (a bracket's entry), slippage, or the refusal code that canceled a resting limit or blocked a trigger when it came to execute (insufficient_margin, insufficient_balance, reduce_only, position_limit, oi_cap, validation, market_halted)"`
	Seq       wire.Int `json:"seq" unit:"seq" doc:"the seq of the order's latest change (its event's seq); GET /v1/orders pages on it"`
}

// NewOrderView renders an order.
func NewOrderView(o *Order) OrderView {
	v := OrderView{OrderID: o.OrderID, MarketID: o.MarketID, Side: o.Side.Name(), Type: o.Type,
		Contracts: wire.Int(o.Contracts), Status: o.Status, Seq: wire.Int(o.Seq)}
	if o.Reason != "" {
		r := o.Reason
		v.Reason = &r
	}
	return v
}

// TriggerView is SPEC's trigger view.
type TriggerView struct {
	OrderID        string   `json:"orderId"`
	MarketID       string   `json:"marketId"`
	Kind           string   `json:"kind" enum:"entry,stop,take_profit"`
	Side           string   `json:"side" enum:"buy,sell"`
	Contracts      wire.Int `json:"contracts" unit:"contracts"`
	TriggerPriceQ8 wire.Int `json:"triggerPriceQ8" unit:"q8"`
	ReduceOnly     bool     `json:"reduceOnly"`
	Status         string   `json:"status" enum:"resting,armed,blocked,executed,cancelled"`
	Reason         *string  `json:"reason" doc:"null while live, once executed and on a client cancel; else why it was cancelled or blocked, as in the order view: cancel_all_after, liquidation, oco, position_closed, entry_canceled, entry_blocked, slippage, or the refusal code that blocked it when it fired (insufficient_margin, insufficient_balance, reduce_only, position_limit, oi_cap, validation, market_halted)"`
	OCOGroup       *string  `json:"ocoGroup"`
	Seq            wire.Int `json:"seq" unit:"seq" doc:"the seq of the trigger's latest change (its event's seq); GET /v1/orders?state= pages on it"`
}

// NewTriggerView renders a trigger.
func NewTriggerView(o *Order) TriggerView {
	v := TriggerView{OrderID: o.OrderID, MarketID: o.MarketID, Kind: o.Kind, Side: o.Side.Name(),
		Contracts: wire.Int(o.Contracts), TriggerPriceQ8: wire.Int(o.TriggerQ8), ReduceOnly: o.ReduceOnly, Status: o.TrigState,
		Seq: wire.Int(o.Seq)}
	if o.Reason != "" {
		r := o.Reason
		v.Reason = &r
	}
	if o.OCOGroup != "" {
		g := o.OCOGroup
		v.OCOGroup = &g
	}
	return v
}

// TriggersPage is SPEC's triggers page.
type TriggersPage struct {
	Triggers      []TriggerView `json:"triggers"`
	NextBeforeSeq *wire.Int     `json:"nextBeforeSeq" unit:"seq"`
}

// TriggersPage returns up to limit of an account's live triggers in the
// given state (resting or armed) whose latest change has a seq below
// beforeSeq (0: from the newest), newest change first.
func (s *State) TriggersPage(accountID, state string, beforeSeq uint64, limit int) TriggersPage {
	page := TriggersPage{Triggers: []TriggerView{}}
	a, ok := s.Accounts[accountID]
	if !ok {
		return page
	}
	var live []*Order
	for _, no := range a.Triggers {
		if o := s.Orders[no]; o.TrigState == state && (beforeSeq == 0 || o.Seq < beforeSeq) {
			live = append(live, o)
		}
	}
	page.Triggers, page.NextBeforeSeq = byLatestChange(live, NewTriggerView, limit)
	return page
}

// byLatestChange renders up to limit orders, newest change first, and the
// cursor of the next page (nil when none is left). Seqs are unique.
func byLatestChange[V any](orders []*Order, view func(*Order) V, limit int) ([]V, *wire.Int) {
	sort.Slice(orders, func(i, j int) bool { return orders[i].Seq > orders[j].Seq })
	out := []V{}
	for i, o := range orders {
		if i == limit {
			return out, wire.Ptr(int64(orders[i-1].Seq))
		}
		out = append(out, view(o))
	}
	return out, nil
}

// PositionView is SPEC's Position, plus its id and liquidation price.
type PositionView struct {
	MarketID           string    `json:"marketId"`
	PositionID         string    `json:"positionId" doc:"names the position in funding flows and liquidations; a flip opens a new one"`
	Side               string    `json:"side" enum:"long,short"`
	Contracts          wire.Int  `json:"contracts" unit:"contracts"`
	EntryPriceQ8       wire.Int  `json:"entryPriceQ8" unit:"q8"`
	MarginMsat         wire.Int  `json:"marginMsat" unit:"msat"`
	FundingClockTsMs   wire.Int  `json:"fundingClockTsMs" unit:"ms"`
	LiquidationPriceQ8 *wire.Int `json:"liquidationPriceQ8" unit:"q8" doc:"the oracle mid at which margin + unrealised PnL reaches maintenance (the position is liquidated there); null when no price can"`
}

// PositionIDString is a position's positionId on the wire.
func PositionIDString(id uint64) string {
	// Built in a stack buffer: every funding flow renders one, and
	// fmt.Sprintf costs a boxed argument and its formatting machinery.
	var buf [24]byte
	return string(strconv.AppendUint(append(buf[:0], "pos_"...), id, 10))
}

// PositionAfter is a fill's positionAfter (null when the fill left the
// account flat).
type PositionAfter struct {
	Side         string   `json:"side" enum:"long,short"`
	Contracts    wire.Int `json:"contracts" unit:"contracts"`
	EntryPriceQ8 wire.Int `json:"entryPriceQ8" unit:"q8"`
	MarginMsat   wire.Int `json:"marginMsat" unit:"msat"`
}

func afterView(p Position) *PositionAfter {
	if p.Contracts == 0 {
		return nil
	}
	return &PositionAfter{Side: p.Side.PositionName(), Contracts: wire.Int(p.Contracts),
		EntryPriceQ8: wire.Int(p.EntryQ8), MarginMsat: wire.Int(p.MarginMsat)}
}

// PositionChange is the account event of a position change: the market
// and the position after it, null when flat.
type PositionChange struct {
	MarketID string         `json:"marketId"`
	Position *PositionAfter `json:"position"`
}

// FillEvent is the data of a fill's "fill" event: the fill, rendered as
// its FillView (View) only when a subscriber marshals it, so that
// applying a fill makes no view nobody reads. A Fill never changes once
// recorded, so the event may be rendered later and on another goroutine,
// with the same bytes as the view made at the fill.
type FillEvent struct{ Fill *Fill }

// View renders the fill.
func (e FillEvent) View() FillView { return NewFillView(e.Fill) }

// MarshalJSON is the FillView's JSON.
func (e FillEvent) MarshalJSON() ([]byte, error) { return json.Marshal(e.View()) }

// FillPositionEvent is the data of the "position" event that follows a
// fill: the fill's market and positionAfter, rendered as a PositionChange
// (View) only when a subscriber marshals it, as FillEvent.
type FillPositionEvent struct{ Fill *Fill }

// View renders the position change the fill made.
func (e FillPositionEvent) View() PositionChange {
	return NewPositionChange(e.Fill.MarketID, e.Fill.After)
}

// MarshalJSON is the PositionChange's JSON.
func (e FillPositionEvent) MarshalJSON() ([]byte, error) { return json.Marshal(e.View()) }

// NewPositionChange renders a position change.
func NewPositionChange(marketID string, p Position) PositionChange {
	return PositionChange{MarketID: marketID, Position: afterView(p)}
}

// OracleView is the oracle print a fill was priced off.
type OracleView struct {
	MidQ8  wire.Int `json:"midQ8" unit:"q8"`
	ConfQ9 wire.Int `json:"confQ9" unit:"q9"`
	TsMs   wire.Int `json:"tsMs" unit:"ms"`
}

// ReferralView is a fill's referral block; null for an account nobody
// referred.
type ReferralView struct {
	Code          string    `json:"code"`
	GrossFeeMsat  wire.Int  `json:"grossFeeMsat" unit:"msat" doc:"the taker fee before the referee discount; feeMsat is this less discountMsat"`
	DiscountMsat  wire.Int  `json:"discountMsat" unit:"msat"`
	RewardMsat    *wire.Int `json:"rewardMsat,omitempty" unit:"msat" doc:"what the referrer accrued from this fill (0 outside the reward window)"`
	PolicyVersion wire.Int  `json:"policyVersion" unit:"int"`
}

func referralView(r *Referral) *ReferralView {
	if r == nil {
		return nil
	}
	return &ReferralView{Code: r.Code, GrossFeeMsat: wire.Int(r.GrossFeeMsat), DiscountMsat: wire.Int(r.DiscountMsat),
		RewardMsat: wire.Ptr(r.RewardMsat), PolicyVersion: wire.Int(r.PolicyVersion)}
}

// FillView is SPEC's Fill.
type FillView struct {
	OrderID            string         `json:"orderId"`
	AccountID          string         `json:"accountId"`
	MarketID           string         `json:"marketId"`
	Side               string         `json:"side" enum:"buy,sell"`
	ClosedContracts    wire.Int       `json:"closedContracts" unit:"contracts"`
	OpenedContracts    wire.Int       `json:"openedContracts" unit:"contracts"`
	ExecPriceQ8        wire.Int       `json:"execPriceQ8" unit:"q8"`
	Oracle             OracleView     `json:"oracle"`
	SpreadQ9           wire.Int       `json:"spreadQ9" unit:"q9" doc:"baseSpreadQ9 plus this fill's skew impact (llms-full.txt, Contract math)"`
	TradeNotionalMsat  wire.Int       `json:"tradeNotionalMsat" unit:"msat"`
	FeeMsat            wire.Int       `json:"feeMsat" unit:"msat"`
	ImpactMsat         wire.Int       `json:"impactMsat" unit:"msat"`
	RebateDivertedMsat wire.Int       `json:"rebateDivertedMsat" unit:"msat" doc:"a maker rebate paid elsewhere instead of to this account; always 0 today (no fill earns a rebate)"`
	RealizedPnlMsat    wire.Int       `json:"realizedPnlMsat" unit:"msat"`
	FundingSettledMsat wire.Int       `json:"fundingSettledMsat" unit:"msat"`
	ReleasedMarginMsat wire.Int       `json:"releasedMarginMsat" unit:"msat"`
	ReservedMarginMsat wire.Int       `json:"reservedMarginMsat" unit:"msat" doc:"what a resting order had reserved for this fill (its margin and fee at the limit price) and the fill released to pay its own; 0 for a fill that reserved nothing first"`
	DeficitMsat        wire.Int       `json:"deficitMsat" unit:"msat"`
	Referral           *ReferralView  `json:"referral"`
	PositionAfter      *PositionAfter `json:"positionAfter"`
	Seq                wire.Int       `json:"seq" unit:"seq"`
	TsMs               wire.Int       `json:"tsMs" unit:"ms"`
}

// NewFillView renders a fill.
func NewFillView(f *Fill) FillView {
	return FillView{OrderID: f.OrderID, AccountID: f.AccountID, MarketID: f.MarketID, Side: f.Side.Name(),
		ClosedContracts: wire.Int(f.Closed), OpenedContracts: wire.Int(f.Opened), ExecPriceQ8: wire.Int(f.ExecQ8),
		Oracle:   OracleView{MidQ8: wire.Int(f.OracleMidQ8), ConfQ9: wire.Int(f.OracleConfQ9), TsMs: wire.Int(f.OracleTsMs)},
		SpreadQ9: wire.Int(f.SpreadQ9), TradeNotionalMsat: wire.Int(f.TradeNotionalMsat), FeeMsat: wire.Int(f.FeeMsat),
		ImpactMsat: wire.Int(f.ImpactMsat), RealizedPnlMsat: wire.Int(f.RealizedPnlMsat),
		FundingSettledMsat: wire.Int(f.FundingSettledMsat), ReleasedMarginMsat: wire.Int(f.ReleasedMarginMsat),
		ReservedMarginMsat: wire.Int(f.ReservedMarginMsat), DeficitMsat: wire.Int(f.DeficitMsat),
		Referral: referralView(f.Referral), PositionAfter: afterView(f.After), Seq: wire.Int(f.Seq), TsMs: wire.Int(f.TsMs)}
}

// Positions returns an account's open positions, by market id.
func (s *State) Positions(accountID string, m *market.State) []PositionView {
	out := []PositionView{}
	a, ok := s.Accounts[accountID]
	if !ok {
		return out
	}
	ids := make([]string, 0, len(a.Positions))
	for id := range a.Positions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := a.Positions[id]
		v := PositionView{MarketID: id, PositionID: PositionIDString(p.ID), Side: p.Side.PositionName(), Contracts: wire.Int(p.Contracts),
			EntryPriceQ8: wire.Int(p.EntryQ8), MarginMsat: wire.Int(p.MarginMsat), FundingClockTsMs: wire.Int(p.FundingClockTsMs)}
		if level, _, ok := LiqLevel(&m.MarketsByID[id].Params, *p); ok {
			v.LiquidationPriceQ8 = wire.Ptr(level)
		}
		out = append(out, v)
	}
	return out
}

// FundingFlowView is SPEC's Funding flow.
type FundingFlowView struct {
	Seq          wire.Int `json:"seq" unit:"seq"`
	BoundaryTsMs wire.Int `json:"boundaryTsMs" unit:"ms"`
	MarketID     string   `json:"marketId"`
	RateQ9       wire.Int `json:"rateQ9" unit:"q9" doc:"the boundary's hourly rate; positive: longs pay shorts"`
	FlowMsat     wire.Int `json:"flowMsat" unit:"msat" doc:"what the position owed (negative) or was owed (positive)"`
	PaidMsat     wire.Int `json:"paidMsat" unit:"msat" doc:"what moved, same sign; short of flowMsat only when the margin could not pay it all"`
	PositionID   string   `json:"positionId"`
}

// NewFundingFlowView renders a funding flow.
func NewFundingFlowView(f *FundingFlow) FundingFlowView {
	return FundingFlowView{Seq: wire.Int(f.Seq), BoundaryTsMs: wire.Int(f.BoundaryTsMs), MarketID: f.MarketID,
		RateQ9: wire.Int(f.RateQ9), FlowMsat: wire.Int(f.FlowMsat), PaidMsat: wire.Int(f.PaidMsat), PositionID: PositionIDString(f.PositionID)}
}

// FundingPage is SPEC's funding page.
type FundingPage struct {
	Funding       []FundingFlowView `json:"funding"`
	NextBeforeSeq *wire.Int         `json:"nextBeforeSeq" unit:"seq"`
}

// LiquidationView is SPEC's Liquidation.
type LiquidationView struct {
	AccountID            string     `json:"accountId"`
	PositionID           string     `json:"positionId"`
	MarketID             string     `json:"marketId"`
	Side                 string     `json:"side" enum:"long,short"`
	ClosedContracts      wire.Int   `json:"closedContracts" unit:"contracts"`
	Partial              bool       `json:"partial"`
	ExecPriceQ8          wire.Int   `json:"execPriceQ8" unit:"q8"`
	Oracle               OracleView `json:"oracle"`
	SpreadQ9             wire.Int   `json:"spreadQ9" unit:"q9"`
	RealizedPnlMsat      wire.Int   `json:"realizedPnlMsat" unit:"msat"`
	FundingSettledMsat   wire.Int   `json:"fundingSettledMsat" unit:"msat" doc:"always 0: funding settles at each boundary, none is outstanding at a liquidation"`
	PenaltyMsat          wire.Int   `json:"penaltyMsat" unit:"msat"`
	RemainderMsat        *wire.Int  `json:"remainderMsat,omitempty" unit:"msat" doc:"full liquidations: the margin left after loss and penalty, returned to the free balance"`
	DeficitMsat          wire.Int   `json:"deficitMsat" unit:"msat"`
	InsuranceCoveredMsat wire.Int   `json:"insuranceCoveredMsat" unit:"msat"`
	ADLTriggered         bool       `json:"adlTriggered"`
	RemainingContracts   wire.Int   `json:"remainingContracts" unit:"contracts"`
	RemainingMarginMsat  wire.Int   `json:"remainingMarginMsat" unit:"msat"`
	Seq                  wire.Int   `json:"seq" unit:"seq"`
	TsMs                 wire.Int   `json:"tsMs" unit:"ms"`
}

// NewLiquidationView renders a liquidation.
func NewLiquidationView(l *Liquidation) LiquidationView {
	v := LiquidationView{AccountID: l.AccountID, PositionID: PositionIDString(l.PositionID), MarketID: l.MarketID,
		Side: l.Side.PositionName(), ClosedContracts: wire.Int(l.Closed), Partial: l.Partial, ExecPriceQ8: wire.Int(l.ExecQ8),
		Oracle:   OracleView{MidQ8: wire.Int(l.OracleMidQ8), ConfQ9: wire.Int(l.OracleConfQ9), TsMs: wire.Int(l.OracleTsMs)},
		SpreadQ9: wire.Int(l.SpreadQ9), RealizedPnlMsat: wire.Int(l.RealizedPnlMsat), PenaltyMsat: wire.Int(l.PenaltyMsat),
		DeficitMsat: wire.Int(l.DeficitMsat), InsuranceCoveredMsat: wire.Int(l.InsuranceCoveredMsat), ADLTriggered: l.ADLTriggered,
		RemainingContracts: wire.Int(l.RemainingContracts), RemainingMarginMsat: wire.Int(l.RemainingMarginMsat),
		Seq: wire.Int(l.Seq), TsMs: wire.Int(l.TsMs)}
	if !l.Partial {
		v.RemainderMsat = wire.Ptr(l.RemainderMsat)
	}
	return v
}

// LiquidationsPage is SPEC's liquidations page.
type LiquidationsPage struct {
	Liquidations  []LiquidationView `json:"liquidations"`
	NextBeforeSeq *wire.Int         `json:"nextBeforeSeq" unit:"seq"`
}

// FundingFlows returns up to limit of an account's funding flows with seq
// below beforeSeq (0: from the newest), newest first.
func (s *State) FundingFlows(accountID string, beforeSeq uint64, limit int) FundingPage {
	page := FundingPage{Funding: []FundingFlowView{}}
	if a, ok := s.Accounts[accountID]; ok {
		page.Funding, page.NextBeforeSeq = newestFirst(a.FundingFlows, func(f *FundingFlow) uint64 { return f.Seq }, NewFundingFlowView, beforeSeq, limit)
	}
	return page
}

// Liquidations returns up to limit of an account's liquidations with seq
// below beforeSeq (0: from the newest), newest first.
func (s *State) Liquidations(accountID string, beforeSeq uint64, limit int) LiquidationsPage {
	page := LiquidationsPage{Liquidations: []LiquidationView{}}
	if a, ok := s.Accounts[accountID]; ok {
		page.Liquidations, page.NextBeforeSeq = newestFirst(a.Liquidations, func(l *Liquidation) uint64 { return l.Seq }, NewLiquidationView, beforeSeq, limit)
	}
	return page
}

// newestFirst pages a seq-ordered record list (oldest first): up to limit
// views of records with seq below beforeSeq (0: all), newest first, and
// the cursor of the next page (nil when none is left).
func newestFirst[R any, V any](recs []R, seqOf func(R) uint64, view func(R) V, beforeSeq uint64, limit int) ([]V, *wire.Int) {
	out := []V{}
	end := len(recs)
	if beforeSeq > 0 {
		end = sort.Search(len(recs), func(i int) bool { return seqOf(recs[i]) >= beforeSeq })
	}
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, view(recs[i]))
	}
	if n := len(out); n > 0 && end-n > 0 {
		return out, wire.Ptr(int64(seqOf(recs[end-n])))
	}
	return out, nil
}

// FillsPage is SPEC's fills page.
type FillsPage struct {
	Fills         []FillView `json:"fills"`
	NextBeforeSeq *wire.Int  `json:"nextBeforeSeq" unit:"seq"`
}

// Fills returns up to limit of an account's fills with seq below beforeSeq
// (0: from the newest), newest first.
func (s *State) Fills(accountID string, beforeSeq uint64, limit int) FillsPage {
	page := FillsPage{Fills: []FillView{}}
	a, ok := s.Accounts[accountID]
	if !ok {
		return page
	}
	page.Fills, page.NextBeforeSeq = newestFirst(a.Fills, func(f *Fill) uint64 { return f.Seq }, NewFillView, beforeSeq, limit)
	return page
}

// OrdersPage is SPEC's orders page.
type OrdersPage struct {
	Orders        []OrderView `json:"orders"`
	NextBeforeSeq *wire.Int   `json:"nextBeforeSeq" unit:"seq"`
}

// Orders returns up to limit of an account's kept orders whose latest
// change has a seq below beforeSeq (0: from the newest), newest change
// first, keeping only the given statuses (none: all).
func (s *State) OrdersPage(accountID string, statuses []string, beforeSeq uint64, limit int) OrdersPage {
	page := OrdersPage{Orders: []OrderView{}}
	a, ok := s.Accounts[accountID]
	if !ok {
		return page
	}
	want := map[string]bool{}
	for _, st := range statuses {
		want[st] = true
	}
	var orders []*Order
	for _, no := range a.OrderNos {
		o := s.Orders[no]
		if (beforeSeq == 0 || o.Seq < beforeSeq) && (len(want) == 0 || want[o.Status]) {
			orders = append(orders, o)
		}
	}
	page.Orders, page.NextBeforeSeq = byLatestChange(orders, NewOrderView, limit)
	return page
}
