package trade

import (
	"fmt"

	"github.com/perpd/perpd/fsm/market"
)

// Maintenance and the liquidation index. A position is liquidatable when
// margin + unrealised PnL <= maintenance, with maintenance the notional at
// the oracle mid times mmRateQ9, all evaluated as exact rationals (no
// rounding). For a given position that condition holds exactly on one side
// of a threshold price P* (below it for a long, above it for a short), so
// each position sits in its market's liquidation index at floor(P*) for a
// long (Falling) or ceil(P*) for a short (Rising): the mid has reached the
// level exactly when the condition holds. Prints then find what is due
// with one descent (PriceIndex.Reached), never a scan of positions.

// liqThreshold returns P* as num/den for pos, or ok false when no positive
// price makes it liquidatable (an inverse short whose margin covers its
// whole value, a quanto long likewise).
//
//	inverse long:  P* = n*1e19*E*(1e9+mm) / (1e9*(M*E + n*1e19))
//	inverse short: P* = n*1e19*E*(1e9-mm) / (1e9*(n*1e19 - M*E))   when n*1e19 > M*E
//	quanto long:   P* = 1e9*(n*E*k - M*1e8) / (n*k*(1e9-mm))        when n*E*k > M*1e8
//	quanto short:  P* = 1e9*(n*E*k + M*1e8) / (n*k*(1e9+mm))
//
// with n contracts, E the entry (q8), M the margin (msat), k the quanto
// multiplier (msat per contract per dollar) and mm the maintenance rate (q9).
func liqThreshold(p *market.Params, pos Position) (num, den wide, ok bool) {
	n, e, m, mm, bq9 := w(pos.Contracts), w(pos.EntryQ8), w(pos.MarginMsat), w(p.MMRateQ9), w(q9)
	if p.ContractType == market.Inverse {
		nv := mulw(n, wu(inverseScale)) // n*1e19
		if pos.Side == Long {
			return mulw(nv, e, addw(bq9, mm)), mulw(bq9, addw(mulw(m, e), nv)), true
		}
		d := subw(nv, mulw(m, e))
		if d.sign() <= 0 {
			return wide{}, wide{}, false
		}
		return mulw(nv, e, subw(bq9, mm)), mulw(bq9, d), true
	}
	k := w(*p.QuantoMultiplierMsat)
	nek, mq8 := mulw(n, e, k), mulw(m, w(q8))
	if pos.Side == Long {
		d := subw(nek, mq8)
		if d.sign() <= 0 {
			return wide{}, wide{}, false
		}
		return mulw(bq9, d), mulw(n, k, subw(bq9, mm)), true
	}
	return mulw(bq9, addw(nek, mq8)), mulw(n, k, addw(bq9, mm)), true
}

// LiqLevel is pos's level in the liquidation index and the way the mid
// must move to reach it; ok false when no price in [1, PriceQ8Max] makes it
// liquidatable. A threshold beyond the price range is clamped into it (the
// position is due at any price).
func LiqLevel(p *market.Params, pos Position) (levelQ8 int64, dir market.Direction, ok bool) {
	num, den, ok := liqThreshold(p, pos)
	if !ok {
		return 0, 0, false
	}
	if pos.Side == Long {
		l := floorw(num, den)
		if l.sign() <= 0 && !l.bad {
			return 0, 0, false
		}
		if v, err := l.toInt64(); err == nil && v <= market.PriceQ8Max {
			return v, market.Falling, true
		}
		return market.PriceQ8Max, market.Falling, true
	}
	v, err := ceilw(num, den).toInt64()
	if err != nil || v > market.PriceQ8Max {
		return 0, 0, false
	}
	return max(v, 1), market.Rising, true
}

// UnderMaintenance reports whether pos is liquidatable at midQ8: margin +
// unrealised PnL <= maintenance, exactly (mid <= P* for a long, >= for a
// short).
func UnderMaintenance(p *market.Params, pos Position, midQ8 int64) bool {
	num, den, ok := liqThreshold(p, pos)
	if !ok {
		return false
	}
	c := cmpw(mulw(w(midQ8), den), num)
	if pos.Side == Long {
		return c <= 0
	}
	return c >= 0
}

// liqIndex returns the market's liquidation index (keyed by account id).
func (b *Book) liqIndex() *market.PriceIndex {
	if b.Liq == nil {
		b.Liq = market.NewPriceIndex()
	}
	return b.Liq
}

// indexPosition puts the account's position in the market's liquidation
// index at its current level, or takes it out (flat, or never
// liquidatable).
func (s *State) indexPosition(env *Env, accountID, marketID string) {
	s.indexPositionAt(env, accountID, marketID, s.Position(accountID, marketID))
}

// indexPositionAt is indexPosition for a caller that holds the position
// just stored (pos: zero when flat).
func (s *State) indexPositionAt(env *Env, accountID, marketID string, pos Position) {
	var p *market.Params
	if pos.Contracts > 0 {
		p = &env.Market.MarketsByID[marketID].Params
	}
	indexIn(env, s.book(marketID).liqIndex(), p, accountID, marketID, &pos)
}

// indexIn is indexPositionAt for a caller that already holds the market's
// liquidation index and parameters (p may be nil when pos is flat): a
// funding boundary indexes every holder of one market.
func indexIn(env *Env, liq *market.PriceIndex, p *market.Params, accountID, marketID string, pos *Position) {
	level, dir, ok := int64(0), market.Direction(0), false
	if pos.Contracts > 0 {
		level, dir, ok = LiqLevel(p, *pos)
	}
	if !ok {
		liq.Remove(accountID)
		return
	}
	var err error
	if env.Level >= LevelLiqIndexPast {
		err = liq.InsertPast(accountID, level, dir)
	} else {
		err = liq.Insert(accountID, level, dir)
	}
	if err != nil {
		// Opening is refused before the index fills (positionRoom), and
		// from LevelLiqIndexPast an existing position always gets in; a
		// failure here is a bug, and a position outside the index could
		// never be liquidated: halt rather than keep it.
		panic(fmt.Sprintf("trade: liquidation index %s/%s: %v", accountID, marketID, err))
	}
}

// LevelLiqIndexPast is the feature level (fsm.FeatureLevel) from which a
// position that becomes liquidatable enters its market's liquidation index
// even when the index is full. Positions that can never be liquidated (a
// 1x inverse short) stay out of the index, so more positions than it holds
// can be open; below this level one of them turning liquidatable (added
// to, or drained by funding) when the index was full halted every replica
// (noted by a review on 2026-11-27).
const LevelLiqIndexPast uint32 = 4

// PositionRoom is positionRoom for a trade planned outside the book (the
// USDx hedge's), which must ask before it moves money for the fill.
func (s *State) PositionRoom(marketID string, pos Position, side Side, q int64) bool {
	return s.positionRoom(marketID, pos, side, q)
}

// positionRoom refuses a fill that would open a new position when the
// market's liquidation index is full.
func (s *State) positionRoom(marketID string, pos Position, side Side, q int64) bool {
	opens := pos.Contracts == 0 || (pos.Side == -side && q > pos.Contracts)
	if !opens {
		return true
	}
	b, ok := s.Books[marketID]
	return !ok || b.Liq == nil || b.Liq.Len() < market.PriceIndexEntriesMax
}

// checkLiquidationIndex verifies, for CheckInvariants, that every position
// sits in its market's liquidation index at its current level (and nothing
// else does), and that none is left under maintenance at its market's
// fresh last print (halted markets, stale prints and, from
// LevelHeldPrintStopsRisk, a feed holding a print past the jump guard are
// exempt: no liquidation runs there).
func (s *State) checkLiquidationIndex(m *market.State, nowMs int64) error {
	indexed := map[string]int{}
	for id, a := range s.Accounts {
		for mid, pos := range a.Positions {
			ms := m.MarketsByID[mid]
			level, dir, ok := LiqLevel(&ms.Params, *pos)
			b := s.Books[mid]
			var e market.IndexEntry
			var in bool
			if b != nil && b.Liq != nil {
				e, in = b.Liq.Entries[id]
			}
			switch {
			case ok && (!in || e.LevelQ8 != level || e.Dir != dir):
				return fmt.Errorf("position %s/%s: liquidation level %d/%d, index has %+v", id, mid, level, dir, e)
			case !ok && in:
				return fmt.Errorf("position %s/%s: never liquidatable but indexed at %+v", id, mid, e)
			}
			if in {
				indexed[mid]++
			}
			pr, printed := m.LastPrint(mid)
			// A book left behind (LevelBookBudget) has due positions
			// waiting for the next entries by design.
			if printed && ms.Params.Status != market.StatusHalted && !m.IsStale(mid, nowMs) && !m.PrintHeld(mid) && !s.behind(mid) && UnderMaintenance(&ms.Params, *pos, pr.MidQ8) {
				return fmt.Errorf("position %s/%s %+v is under maintenance at %d after the entry", id, mid, *pos, pr.MidQ8)
			}
		}
	}
	for mid, b := range s.Books {
		if b.Liq != nil && b.Liq.Len() != indexed[mid] {
			return fmt.Errorf("market %s: %d liquidation entries, %d positions indexed", mid, b.Liq.Len(), indexed[mid])
		}
	}
	return nil
}
