package trade

import (
	"math/big"
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

// aboveMaintenanceExact reports whether a position opened at spread s (q9)
// from mid m, with margin exactly imRate x its value at the execution
// price, holds margin + PnL > mmRate x its value at the mid: on exact
// rationals, with no tick and no rounding (per contract; the mid's scale
// cancels out of the comparison).
func aboveMaintenanceExact(ct market.ContractType, side Side, im, mm, s int64) bool {
	one := big.NewRat(1, 1)
	r := func(v int64) *big.Rat { return big.NewRat(v, market.Q9) }
	exec := new(big.Rat).Add(one, new(big.Rat).Mul(big.NewRat(int64(side), 1), r(s))) // mid = 1
	value := func(p *big.Rat) *big.Rat {
		if ct == market.Inverse {
			return new(big.Rat).Inv(p)
		}
		return new(big.Rat).Set(p)
	}
	margin := new(big.Rat).Mul(r(im), value(exec))
	// PnL at the mid (exit 1): inverse side x (1/entry - 1/exit),
	// quanto side x (exit - entry).
	var pnl *big.Rat
	if ct == market.Inverse {
		pnl = new(big.Rat).Sub(new(big.Rat).Inv(exec), one)
	} else {
		pnl = new(big.Rat).Sub(one, exec)
	}
	pnl.Mul(pnl, big.NewRat(int64(side), 1))
	equity := new(big.Rat).Add(margin, pnl)
	return equity.Cmp(new(big.Rat).Mul(r(mm), value(one))) > 0
}

// TestOpenSpreadLimitIsTheTightestExactBound: at OpenSpreadLimitQ9 a
// max-leverage open of either side of either contract type stays above
// maintenance at the mid; one q9 more puts the quanto short (the tightest
// of the four) at or under it. For several margin pairs, including 1x.
func TestOpenSpreadLimitIsTheTightestExactBound(t *testing.T) {
	for _, rates := range [][2]int64{{10_000_000, 5_000_000}, {10_000_000, 9_999_999}, {100_000_000, 80_000_000},
		{1_000_000_000, 500_000_000}, {3_333_334, 1_666_667}, {20_000_000, 1}} {
		im, mm := rates[0], rates[1]
		p := &market.Params{IMRateQ9: im, MMRateQ9: mm}
		limit := OpenSpreadLimitQ9(p)
		if limit < 0 {
			t.Fatalf("im %d mm %d: limit %d", im, mm, limit)
		}
		for _, ct := range []market.ContractType{market.Inverse, market.Quanto} {
			for _, side := range []Side{Long, Short} {
				if !aboveMaintenanceExact(ct, side, im, mm, limit) {
					t.Errorf("im %d mm %d: %s %s at the limit %d is under maintenance", im, mm, ct, side.PositionName(), limit)
				}
			}
		}
		if aboveMaintenanceExact(market.Quanto, Short, im, mm, limit+1) {
			t.Errorf("im %d mm %d: a quanto short one q9 past the limit %d is still above maintenance: the limit is not tight", im, mm, limit)
		}
	}
	if l := OpenSpreadLimitQ9(&market.Params{IMRateQ9: 5, MMRateQ9: 5}); l >= 0 {
		t.Fatalf("no cushion gave limit %d", l)
	}
}

// TestOpenSpreadIsBaseAndOneMaxOrdersImpact: the impact of one max-size
// order into a balanced book is ImpactAtCapQ9 / (2 x OICapOrders) at any
// market size.
func TestOpenSpreadIsBaseAndOneMaxOrdersImpact(t *testing.T) {
	for _, maxOrder := range []int64{1, 7, 1_000_000, market.OrderContractsCeiling} {
		p := &market.Params{BaseSpreadQ9: 200_000, MaxOrderContracts: maxOrder}
		if s, err := OpenSpreadQ9(p); err != nil || s != 200_000+ImpactAtCapQ9/(2*OICapOrders) {
			t.Fatalf("maxOrder %d: spread %d, %v", maxOrder, s, err)
		}
	}
}
