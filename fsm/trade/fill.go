package trade

import (
	"fmt"
	"strconv"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// fill carries out a plan for order o of the trading account a: the ledger legs, the position, the
// market's open interest and volume, the fill record and the order's
// change, each announced with a fresh seq (fill, then order, then
// position). reservedMsat is the reservation the order released for this
// fill (0 for an order that never rested).
func (s *State) fill(env *Env, a *Account, o *Order, pl Plan, reservedMsat int64) {
	acct, mkt := o.AccountID, o.MarketID
	l := env.Ledger
	free, margin := a.ledgerFree(acct), a.ledgerMargin(acct, mkt)
	transfer(l, ledger.House, margin, pl.HouseToMargin)
	transfer(l, margin, ledger.House, pl.MarginToHouse)
	transfer(l, margin, ledger.FeeRevenue, pl.FeeFromMargin)
	transfer(l, margin, free, pl.MarginToFree)
	transfer(l, free, ledger.FeeRevenue, pl.FeeFromFree)
	transfer(l, free, margin, pl.FreeToMargin)

	if pl.After.Contracts == 0 {
		delete(a.Positions, mkt)
		s.noteHolder(acct, mkt, false)
	} else {
		if pl.Before.Contracts == 0 || pl.Before.Side != pl.After.Side {
			s.NextPositionNo++
			pl.After.ID = s.NextPositionNo
		}
		// A position the account held changes in place (as funding and
		// margin moves change it): no new one to allocate.
		var p *Position
		if pl.Before.Contracts > 0 {
			p = a.Positions[mkt]
		}
		if p != nil {
			*p = pl.After
		} else {
			p = new(Position)
			*p = pl.After
			a.Positions[mkt] = p
			s.noteHolder(acct, mkt, true)
		}
	}
	s.indexPositionAt(env, acct, mkt, pl.After)
	if pl.Closed > 0 {
		mustOI(env.Market.AddOpenInterest(mkt, market.Side(pl.Before.Side), -pl.Closed))
	}
	if pl.Opened > 0 {
		mustOI(env.Market.AddOpenInterest(mkt, market.Side(pl.Side), pl.Opened))
	}
	// Volume feeds candles and 24h stats; it is not money, and the only
	// error (a bar's volume overflowing int64) cannot arise from orders
	// bounded by maxOrderContracts, so it is ignored rather than halting.
	_ = env.Market.RecordFill(mkt, pl.Closed+pl.Opened, env.NowMs)

	f := &Fill{OrderID: o.OrderID, AccountID: acct, MarketID: mkt, Side: pl.Side,
		Closed: pl.Closed, Opened: pl.Opened, ExecQ8: pl.Quote.ExecQ8,
		OracleMidQ8: pl.Quote.MidQ8, OracleConfQ9: pl.Quote.ConfQ9, OracleTsMs: pl.Quote.OracleTsMs,
		SpreadQ9: pl.Quote.SpreadQ9, TradeNotionalMsat: pl.TradeNotionalMsat, FeeMsat: pl.FeeMsat,
		ImpactMsat: pl.ImpactMsat, RealizedPnlMsat: pl.RealizedPnlMsat, ReleasedMarginMsat: pl.ReleasedMarginMsat,
		ReservedMarginMsat: reservedMsat, DeficitMsat: pl.DeficitMsat, After: pl.After,
		Seq: env.NextSeq(), TsMs: env.NowMs}
	if env.FeeSplit != nil {
		if r := env.FeeSplit(f); r != nil {
			f.Referral = r
			f.FeeMsat -= r.DiscountMsat
		}
	}
	s.recordFill(env, a, f)
	s.close(env, a, o, StatusFilled, "")
	s.changed(env, o)
	env.Emit("position", acct, env.NextSeq(), FillPositionEvent{f})
	s.afterFill(env, a, o, pl)
}

// recordFill keeps a fill (bounded) and announces it. The event holds the
// fill itself (FillEvent), as the position event that follows does
// (FillPositionEvent): they are rendered when a subscriber reads them.
func (s *State) recordFill(env *Env, a *Account, f *Fill) {
	a.Fills = append(a.Fills, f)
	if len(a.Fills) > FillsKept {
		a.Fills = a.Fills[len(a.Fills)-FillsKept:]
	}
	env.Emit("fill", f.AccountID, f.Seq, FillEvent{f})
}

func mustOI(err error) {
	if err != nil {
		panic(fmt.Sprintf("trade: open interest: %v", err))
	}
}

// LevelStalePrintWaits is the feature level (fsm.FeatureLevel) from which
// a print that is already stale when it lands (its observation time older
// than oracleStalenessMs at log time) fills no resting limit order and
// executes no trigger. Found by a review on 2026-11-27: placement refused
// such a market (oracle_stale) and no liquidation ran on it, but the book
// filled and executed at that old price, which a feed lagging the market
// hands to whoever knows the newer one.
const LevelStalePrintWaits uint32 = 7

// LevelHaltResume is the feature level (fsm.FeatureLevel) from which a
// halted market's book does not act on prints: its resting orders and
// triggers keep their levels and the mid the index was last checked
// against, and when the market resumes (OnParams, at a fresh print) or
// the next print comes, every level the price passed meanwhile is
// checked. Found by a review of 2026-11-27: below it a limit order a
// print crossed during a halt was re-indexed one q8 unit past that mid,
// so a buy limit at 99,000 passed by 95,000 stayed unfilled at a live mid
// of 95,500; and a stop the price passed during a halt was blocked for
// good (market_halted), leaving its position unprotected after it.
const LevelHaltResume uint32 = 7

// LevelReindexPast is the feature level (fsm.FeatureLevel) from which a
// resting limit order that a print crossed but could not fill goes back
// into the price index even when the index is at or past its bound: it
// held a place there already. Found by a review on 2026-11-28: bracket
// legs arm past the bound (LevelLegsArmPast), so a full index may hold
// PriceIndexEntriesMax + 1 entries; a crossed limit order was taken out,
// its bounded insert failed, and every replica halted on that print.
const LevelReindexPast uint32 = 8

// OnPrint liquidates what the newest print made due (liquidate.go), then
// checks the market's resting limit orders and armed triggers against it: only the entries whose level the mid crossed
// since the last check (the price index; no scan), in the order the price
// met them. A crossed limit order fills when its execution price is no
// worse than its limit; otherwise it waits again one q8 unit beyond the
// current mid. A limit order that can no longer be filled is canceled with
// the reason's code: reduce_only (a reduce-only order whose position is
// gone or turned), insufficient_margin, insufficient_balance,
// position_limit, oi_cap. A crossed trigger executes as a market order or
// is blocked (triggers.go).
func (s *State) OnPrint(env *Env, marketID string) {
	m, ok := env.Market.MarketsByID[marketID]
	pr, printed := env.Market.LastPrint(marketID)
	if !ok || !printed {
		return
	}
	book, ok := s.Books[marketID]
	if !ok {
		return
	}
	if env.Level >= LevelStalePrintWaits && env.Market.IsStale(marketID, env.NowMs) {
		// A print already stale when it lands is one the venue refuses to
		// trade at (placement) and liquidate at (sweep): the book is not
		// checked against it either, and LastMidQ8 stays at the last fresh
		// mid, so the next fresh print checks what was crossed since.
		return
	}
	if env.Level >= LevelHaltResume && m.Params.Status == market.StatusHalted {
		// The book waits for the market: nothing is checked against
		// this print, and the index keeps the mid it last acted on, so
		// the first check after the halt (OnParams resuming the market,
		// or the next print) acts on every level passed meanwhile.
		return
	}
	s.walk(env, m, book, pr)
}

// walk is OnPrint's work once the market may act: the sweep, then the
// index entries crossed between the mid the book last acted on and pr's.
func (s *State) walk(env *Env, m *market.MarketState, book *Book, pr market.Print) {
	marketID := m.Params.MarketID
	old := book.LastMidQ8
	book.LastMidQ8 = pr.MidQ8
	// Risk first: a position this print takes below maintenance is
	// liquidated before its own stop or limit could close it.
	s.sweep(env, marketID)
	if old == 0 || book.Index.Len() == 0 {
		return
	}
	defer s.sweep(env, marketID)
	for _, id := range book.Index.Crossed(old, pr.MidQ8) {
		if _, live := book.Index.Entries[id]; !live {
			continue // ended by an earlier entry of this print (OCO, a closed position)
		}
		no, _ := strconv.ParseUint(id, 10, 64)
		o := s.Orders[no]
		if o == nil || o.Status != StatusAccepted {
			panic(fmt.Sprintf("trade: index entry %s has no live order", id))
		}
		if o.Kind != "" {
			book.Index.Remove(id)
			s.execTrigger(env, m, pr, o)
			continue
		}
		s.tryResting(env, m, pr, book, o)
	}
}

func (s *State) tryResting(env *Env, m *market.MarketState, pr market.Print, book *Book, o *Order) {
	book.Index.Remove(indexID(o.No))
	wait := func() { s.indexIn(book, o, pr.MidQ8, env.Level >= LevelReindexPast) }
	if m.Params.Status == market.StatusHalted {
		wait()
		return
	}
	a := s.account(o.AccountID)
	pos := a.position(o.MarketID)
	q := o.Contracts
	if o.ReduceOnly || m.Params.Status == market.StatusReduceOnly {
		if pos.Contracts == 0 || pos.Side != -o.Side {
			s.finish(env, o, StatusCanceled, wire.CodeReduceOnly)
			return
		}
		q = min(q, pos.Contracts) // never flips: trimmed to the position
	}
	qt, err := QuoteTrade(m, pr, o.Side, q)
	if err != nil || !noWorse(o.Side, qt.ExecQ8, o.LimitQ8) ||
		(o.HasMaxSlippage && !WithinSlippage(o.Side, qt.ExecQ8, qt.MidQ8, o.MaxSlippageQ9)) {
		wait()
		return
	}
	free := env.Ledger.Balance(a.ledgerFree(o.AccountID)) + o.ReservedMsat
	pl, ref := planOrderFill(env, m, pos, o.Side, q, o.Leverage, qt, free)
	if ref == nil && !s.positionRoom(o.MarketID, pos, o.Side, q) {
		ref = refuse(wire.CodeValidation, "market %s holds the most positions it can", o.MarketID)
	}
	if ref != nil {
		s.finish(env, o, StatusCanceled, ref.Code)
		return
	}
	reserved := o.ReservedMsat
	transfer(env.Ledger, a.ledgerReserved(o.AccountID), a.ledgerFree(o.AccountID), reserved)
	o.ReservedMsat = 0
	s.fill(env, a, o, pl, reserved)
}
