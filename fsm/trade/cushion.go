package trade

import (
	"github.com/perpd/perpd/fsm/market"
)

// The spread cushion: what a market's rates must leave for a fill that
// opens at the market's most leverage (imRateQ9) to stay above
// maintenance (LevelOpensAboveMaintenance refuses it otherwise).
//
// A fill at the mid m with spread s (exec m(1+s) for a buy, m(1-s) for a
// sell) holds margin im x V(exec) and is down the spread at the mid. With
// V(P) = n/P (inverse) or n·k·P (quanto) it stays above maintenance,
// margin + PnL > mm x V(m), exactly when
//
//	inverse long:  s < (im - mm) / (1 + mm)
//	inverse short: s < (im - mm) / (1 - mm)
//	quanto long:   s < (im - mm) / (1 - im)
//	quanto short:  s < (im - mm) / (1 + im)
//
// The last is the smallest, so s < (im - mm) / (1 + im) holds for every
// side and contract type. What this leaves out is the execution price's
// rounding to the tick (up to one tick over the mid, which depends on the
// price, unknown here): a fill it pushes over is refused, never taken.

// OpenSpreadQ9 is the spread one maximum-size order pays when it opens
// into a balanced book: the base spread plus its skew impact (ImpactQ9 of
// maxOrderContracts at zero net open interest: ImpactAtCapQ9 /
// (2 x OICapOrders), 0.0025%, whatever the market's size).
func OpenSpreadQ9(p *market.Params) (int64, error) {
	impact, err := ImpactQ9(Long, p.MaxOrderContracts, 0, OICapContracts(p))
	if err != nil {
		return 0, err
	}
	return p.BaseSpreadQ9 + impact, nil
}

// OpenSpreadLimitQ9 is the largest spread (q9) at which a fill opening at
// imRateQ9 leaves its position above maintenance at the mid for either
// side and contract type (before the tick): the largest s with
// s x (1e9 + im) < (im - mm) x 1e9. It is negative when im <= mm.
func OpenSpreadLimitQ9(p *market.Params) int64 {
	im, mm := p.IMRateQ9, p.MMRateQ9
	if im <= mm || im <= 0 || im > q9 {
		return -1
	}
	// (im - mm) x 1e9 <= 1e18 and 1e9 + im <= 2e9: int64 holds both.
	return ((im-mm)*q9 - 1) / (q9 + im)
}

// OpenSpreadExcessQ9 is by how much OpenSpreadQ9 passes
// OpenSpreadLimitQ9 (positive: a maximum-size order into a balanced book
// cannot open at the market's most leverage), with both figures.
func OpenSpreadExcessQ9(p *market.Params) (excess, spread, limit int64, err error) {
	if spread, err = OpenSpreadQ9(p); err != nil {
		return 0, 0, 0, err
	}
	limit = OpenSpreadLimitQ9(p)
	return spread - limit, spread, limit, nil
}
