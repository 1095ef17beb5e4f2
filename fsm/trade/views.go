package trade

import (
	"sort"

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
	Reason    *string  `json:"reason"`
}

// NewOrderView renders an order.
func NewOrderView(o *Order) OrderView {
	v := OrderView{OrderID: o.OrderID, MarketID: o.MarketID, Side: o.Side.Name(), Type: o.Type,
		Contracts: wire.Int(o.Contracts), Status: o.Status}
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
	Reason         *string  `json:"reason"`
	OCOGroup       *string  `json:"ocoGroup"`
}

// NewTriggerView renders a trigger.
func NewTriggerView(o *Order) TriggerView {
	v := TriggerView{OrderID: o.OrderID, MarketID: o.MarketID, Kind: o.Kind, Side: o.Side.Name(),
		Contracts: wire.Int(o.Contracts), TriggerPriceQ8: wire.Int(o.TriggerQ8), ReduceOnly: o.ReduceOnly, Status: o.TrigState}
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
	sort.Slice(live, func(i, j int) bool { return live[i].Seq > live[j].Seq })
	for i, o := range live {
		if i == limit {
			next := wire.Int(live[i-1].Seq)
			page.NextBeforeSeq = &next
			break
		}
		page.Triggers = append(page.Triggers, NewTriggerView(o))
	}
	return page
}

// PositionView is SPEC's Position.
type PositionView struct {
	MarketID         string   `json:"marketId"`
	Side             string   `json:"side" enum:"long,short"`
	Contracts        wire.Int `json:"contracts" unit:"contracts"`
	EntryPriceQ8     wire.Int `json:"entryPriceQ8" unit:"q8"`
	MarginMsat       wire.Int `json:"marginMsat" unit:"msat"`
	FundingClockTsMs wire.Int `json:"fundingClockTsMs" unit:"ms"`
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

// ReferralView is a fill's referral block; null until the referral
// programme exists.
type ReferralView struct {
	Code          string   `json:"code"`
	GrossFeeMsat  wire.Int `json:"grossFeeMsat" unit:"msat"`
	DiscountMsat  wire.Int `json:"discountMsat" unit:"msat"`
	PolicyVersion wire.Int `json:"policyVersion" unit:"int"`
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
	SpreadQ9           wire.Int       `json:"spreadQ9" unit:"q9"`
	TradeNotionalMsat  wire.Int       `json:"tradeNotionalMsat" unit:"msat"`
	FeeMsat            wire.Int       `json:"feeMsat" unit:"msat"`
	ImpactMsat         wire.Int       `json:"impactMsat" unit:"msat"`
	RebateDivertedMsat wire.Int       `json:"rebateDivertedMsat" unit:"msat"`
	RealizedPnlMsat    wire.Int       `json:"realizedPnlMsat" unit:"msat"`
	FundingSettledMsat wire.Int       `json:"fundingSettledMsat" unit:"msat"`
	ReleasedMarginMsat wire.Int       `json:"releasedMarginMsat" unit:"msat"`
	ReservedMarginMsat wire.Int       `json:"reservedMarginMsat" unit:"msat"`
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
		PositionAfter: afterView(f.After), Seq: wire.Int(f.Seq), TsMs: wire.Int(f.TsMs)}
}

// Positions returns an account's open positions, by market id.
func (s *State) Positions(accountID string) []PositionView {
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
		out = append(out, PositionView{MarketID: id, Side: p.Side.PositionName(), Contracts: wire.Int(p.Contracts),
			EntryPriceQ8: wire.Int(p.EntryQ8), MarginMsat: wire.Int(p.MarginMsat), FundingClockTsMs: wire.Int(p.FundingClockTsMs)})
	}
	return out
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
	// Fills are stored in seq order: find the first at or past beforeSeq.
	end := len(a.Fills)
	if beforeSeq > 0 {
		end = sort.Search(len(a.Fills), func(i int) bool { return a.Fills[i].Seq >= beforeSeq })
	}
	for i := end - 1; i >= 0 && len(page.Fills) < limit; i-- {
		page.Fills = append(page.Fills, NewFillView(a.Fills[i]))
	}
	if n := len(page.Fills); n > 0 && end-n > 0 {
		next := page.Fills[n-1].Seq
		page.NextBeforeSeq = &next
	}
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
	sort.Slice(orders, func(i, j int) bool { return orders[i].Seq > orders[j].Seq })
	for i, o := range orders {
		if i == limit {
			next := wire.Int(orders[i-1].Seq)
			page.NextBeforeSeq = &next
			break
		}
		page.Orders = append(page.Orders, NewOrderView(o))
	}
	return page
}
