package trade

import (
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

// Worked liquidation prices (checked by hand with exact fractions):
//
//	inverse long 10,000 @ 100,000 with 0.01 BTC margin (10x):
//	  P* = n*1e19*E*(1e9+mm) / (1e9*(M*E + n*1e19)) = 100,000 * 1.005/1.1 = 91,363.63636...
//	inverse short, same:  P* = 100,000 * 0.995/0.9 = 110,555.5555...
//	quanto long 1,000 @ 3,400 (300 msat/contract/$) with 10% margin:
//	  P* = 1e9*(n*E*k - M*1e8) / (n*k*(1e9-mm)) = 3,075.37688442...
//	quanto short, same:   P* = 3,721.39303482...
func TestLiquidationLevelsWorkedExamples(t *testing.T) {
	cat := market.DefaultCatalogue()
	btc, eth := &cat[0], &cat[1]
	for _, c := range []struct {
		name  string
		p     *market.Params
		pos   Position
		level int64
		dir   market.Direction
	}{
		{"inverse long", btc, Position{Side: Long, Contracts: 10_000, EntryQ8: 100_000 * q8, MarginMsat: 1_000_000_000}, 9_136_363_636_363, market.Falling},
		{"inverse short", btc, Position{Side: Short, Contracts: 10_000, EntryQ8: 100_000 * q8, MarginMsat: 1_000_000_000}, 11_055_555_555_556, market.Rising},
		{"quanto long", eth, Position{Side: Long, Contracts: 1_000, EntryQ8: 3_400 * q8, MarginMsat: 102_000_000}, 307_537_688_442, market.Falling},
		{"quanto short", eth, Position{Side: Short, Contracts: 1_000, EntryQ8: 3_400 * q8, MarginMsat: 102_000_000}, 372_139_303_483, market.Rising},
	} {
		level, dir, ok := LiqLevel(c.p, c.pos)
		if !ok || level != c.level || dir != c.dir {
			t.Errorf("%s: level %d dir %d ok %v, want %d %d", c.name, level, dir, ok, c.level, c.dir)
		}
		// The level is exactly where the condition starts to hold.
		beyond := level + int64(dir)
		if !UnderMaintenance(c.p, c.pos, level) || UnderMaintenance(c.p, c.pos, level-int64(dir)) || !UnderMaintenance(c.p, c.pos, beyond) {
			t.Errorf("%s: maintenance does not switch at the level %d", c.name, level)
		}
		// And it is the definition: margin + PnL <= maintenance at the level.
		pnl, _ := PnLMsat(c.p, c.pos.Side, c.pos.Contracts, c.pos.EntryQ8, level)
		notional, _ := NotionalMsat(c.p, c.pos.Contracts, level)
		if mm, _ := rateOf(notional, c.p.MMRateQ9); c.pos.MarginMsat+pnl > mm {
			t.Errorf("%s: at %d margin %d + pnl %d above maintenance %d", c.name, level, c.pos.MarginMsat, pnl, mm)
		}
	}
	// A 1x inverse short (margin = its whole value) cannot be liquidated.
	if _, _, ok := LiqLevel(btc, Position{Side: Short, Contracts: 10_000, EntryQ8: 100_000 * q8, MarginMsat: 10_000_000_000}); ok {
		t.Error("1x inverse short has a liquidation level")
	}
}

func TestMarginRateFollowsLeverage(t *testing.T) {
	p := &market.DefaultCatalogue()[0]
	for lev, want := range map[int64]int64{0: 10_000_000, 100: 10_000_000, 10: 100_000_000, 3: 333_333_334, 1: 1_000_000_000} {
		if got := MarginRateQ9(p, lev); got != want {
			t.Errorf("leverage %d: rate %d, want %d", lev, got, want)
		}
	}
}
