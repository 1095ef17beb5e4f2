package trade

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

// The per-market order bounds of SPEC section 8 (minOrderContracts,
// maxOrderContracts, tickSizeQ8, maxLeverage) and the order id's length,
// each at its boundary: the bound itself is accepted, one past it is
// refused 400 validation (the order placement status of SPEC section 7).
func TestValidateOrderBoundaries(t *testing.T) {
	p := market.DefaultCatalogue()[0]
	if p.MinOrderContracts < 1 || p.MaxOrderContracts <= p.MinOrderContracts || p.MaxLeverage < 1 || p.TickSizeQ8 < 1 {
		t.Fatalf("catalogue params %+v: fix the test", p)
	}
	topQ8 := market.PriceQ8Max / p.TickSizeQ8 * p.TickSizeQ8
	base := func() PlaceRequest {
		return PlaceRequest{OrderID: "o", MarketID: p.MarketID, Side: "buy", Type: TypeMarket, Contracts: p.MinOrderContracts}
	}
	for _, tc := range []struct {
		name string
		edit func(*PlaceRequest)
		ok   bool
	}{
		{"min contracts", func(r *PlaceRequest) { r.Contracts = p.MinOrderContracts }, true},
		{"below min contracts", func(r *PlaceRequest) { r.Contracts = p.MinOrderContracts - 1 }, false},
		{"max contracts", func(r *PlaceRequest) { r.Contracts = p.MaxOrderContracts }, true},
		{"above max contracts", func(r *PlaceRequest) { r.Contracts = p.MaxOrderContracts + 1 }, false},
		{"max leverage", func(r *PlaceRequest) { r.Leverage = p.MaxLeverage }, true},
		{"above max leverage", func(r *PlaceRequest) { r.Leverage = p.MaxLeverage + 1 }, false},
		{"negative leverage", func(r *PlaceRequest) { r.Leverage = -1 }, false},
		{"order id at its limit", func(r *PlaceRequest) { r.OrderID = strings.Repeat("k", OrderIDLenMax) }, true},
		{"order id one past", func(r *PlaceRequest) { r.OrderID = strings.Repeat("k", OrderIDLenMax+1) }, false},
		{"limit price on the tick", func(r *PlaceRequest) { r.Type, r.LimitPriceQ8 = TypeLimit, p.TickSizeQ8 }, true},
		{"limit price off the tick", func(r *PlaceRequest) { r.Type, r.LimitPriceQ8 = TypeLimit, p.TickSizeQ8+1 }, p.TickSizeQ8 == 1},
		{"highest limit price", func(r *PlaceRequest) { r.Type, r.LimitPriceQ8 = TypeLimit, topQ8 }, true},
		{"one tick above the highest", func(r *PlaceRequest) { r.Type, r.LimitPriceQ8 = TypeLimit, topQ8+p.TickSizeQ8 }, false},
		{"slippage just under 1", func(r *PlaceRequest) { r.HasMaxSlippage, r.MaxSlippageQ9 = true, q9-1 }, true},
		{"slippage of 1", func(r *PlaceRequest) { r.HasMaxSlippage, r.MaxSlippageQ9 = true, q9 }, false},
	} {
		r := base()
		tc.edit(&r)
		_, _, _, ref := validate(&r, &p)
		if tc.ok && ref != nil {
			t.Errorf("%s: refused %v", tc.name, ref)
		}
		if !tc.ok && (ref == nil || ref.Status != 400 || ref.Code != "validation") {
			t.Errorf("%s: %+v, want 400 validation", tc.name, ref)
		}
	}
}
