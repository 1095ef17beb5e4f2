package trade

import (
	"fmt"
	"slices"
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
	env.work++
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
	budget := newActBudget(env)
	s.actOnPrint(env, marketID, &budget)
}

// actOnPrint is OnPrint within an act's budget.
func (s *State) actOnPrint(env *Env, marketID string, budget *actBudget) {
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
	s.walk(env, m, book, pr, budget)
}

// BookActBudget bounds what one act on a market's book does from
// LevelBookBudget: one print, one funding boundary or parameter change,
// or the continuation of the books left behind (all of them, at one
// entry). Each fill, liquidation and ended order (a cancel, a blocked
// trigger) costs one unit, and each resting order or trigger the price
// crossed at least one: a crossed order whose fill closes a position and
// cancels the account's bracket legs costs them all. An item is started
// while the budget has room, and the first item of an act always is, so
// every act makes progress and passes the budget by at most one item's
// work (an account's orders, or a liquidation's auto-deleveraging). A
// print may cross every entry of an index (PriceIndexEntriesMax) and a
// sweep may reach every position of a market: 100,000 crossed orders held
// apply for 1.27 s, 880,000 for 21 s (resource review, 2026-11-29). At
// 2-15 us a unit the budget is 0.02-0.15 s.
const BookActBudget = 10_000

// LevelBookBudget is the feature level (fsm.FeatureLevel) from which acts
// on a book stop at BookActBudget. What an act leaves is continued at the
// next entries that advance log time (ContinueBooks), within one budget
// for all the books behind, against the print of that moment: the positions still due
// at it are liquidated, and the resting orders and triggers still on the
// far side of its mid are checked, in the order the price meets them; one
// the price has since left again waits for it to come back.
const LevelBookBudget uint32 = 13

// actBudgetLimit is BookActBudget, unless a test set another.
var actBudgetLimit = BookActBudget

// SetBookActBudgetForTest makes acts stop at n units until the returned
// function restores BookActBudget, so that a random simulation leaves its
// books behind all the time. For tests only, and never while another test
// applies entries: it is one variable for the whole process.
func SetBookActBudgetForTest(n int) (restore func()) {
	if n < 1 {
		panic("trade: an act budget is at least one unit")
	}
	old := actBudgetLimit
	actBudgetLimit = n
	return func() { actBudgetLimit = old }
}

// actBudget is what one act on a book has spent (BookActBudget).
type actBudget struct {
	limit int // 0: unlimited (below LevelBookBudget)
	spent int
}

func newActBudget(env *Env) actBudget {
	if env.Level < LevelBookBudget {
		return actBudget{}
	}
	return actBudget{limit: actBudgetLimit}
}

// start reports whether another item may start (always the first, as a
// limit is at least one unit) and charges the item's first unit.
func (b *actBudget) start() bool {
	if b.exhausted() {
		return false
	}
	b.spent++
	return true
}

// charge adds what an item did beyond its first unit: the work counted
// on env (fills, liquidations, ended orders) since work0.
func (b *actBudget) charge(env *Env, work0 int) {
	b.spent += max(0, env.work-work0-1)
}

// room is how many more items the act may start: no limit when
// unlimited (-1), at least one otherwise.
func (b *actBudget) room() int {
	if b.limit == 0 {
		return -1
	}
	return max(1, b.limit-b.spent)
}

// exhausted reports whether a limited budget has no room left.
func (b *actBudget) exhausted() bool { return b.limit > 0 && b.spent >= b.limit }

// walk is OnPrint's work once the market may act: the sweep, then the
// index entries crossed between the mid the book last acted on and pr's.
// From LevelBookBudget it stops at the act's budget; a book left behind
// (State.BooksBehind) is walked again from the next entries, then by what
// the index holds on the far side of the mid (Reached): every entry was
// put on the near side of the mid of its time, so those are exactly the
// ones the price has passed and not yet met (crossed or reached).
func (s *State) walk(env *Env, m *market.MarketState, book *Book, pr market.Print, budget *actBudget) {
	marketID := m.Params.MarketID
	old := book.LastMidQ8
	book.LastMidQ8 = pr.MidQ8
	behind := s.behind(marketID)
	if behind {
		s.setBehind(marketID, false)
	}
	// Risk first: a position this print takes below maintenance is
	// liquidated before its own stop or limit could close it.
	if !s.sweepWithin(env, marketID, budget) {
		return // the book waits for the sweep to finish
	}
	if old == 0 || book.Index.Len() == 0 {
		return
	}
	defer s.sweepWithin(env, marketID, budget)
	var ids []string
	var more bool
	if behind {
		ids, more = book.Index.ReachedN(pr.MidQ8, budget.room())
	} else {
		ids, more = book.Index.CrossedN(old, pr.MidQ8, budget.room())
	}
	for _, id := range ids {
		if !budget.start() {
			more = true
			break
		}
		work0 := env.work
		s.actOnEntry(env, m, pr, book, id)
		budget.charge(env, work0)
	}
	if more {
		s.setBehind(marketID, true)
	}
}

// actOnEntry acts on one index entry the price crossed: a trigger
// executes (or is blocked), a resting limit order fills or waits.
func (s *State) actOnEntry(env *Env, m *market.MarketState, pr market.Print, book *Book, id string) {
	if _, live := book.Index.Entries[id]; !live {
		return // ended by an earlier entry of this print (OCO, a closed position)
	}
	no, _ := strconv.ParseUint(id, 10, 64)
	o := s.Orders[no]
	if o == nil || o.Status != StatusAccepted {
		panic(fmt.Sprintf("trade: index entry %s has no live order", id))
	}
	if o.Kind != "" {
		book.Index.Remove(id)
		s.execTrigger(env, m, pr, o)
		return
	}
	s.tryResting(env, m, pr, book, o)
}

// ContinueBooks is the timer of LevelBookBudget: every book an act left
// behind at its budget is walked again against its market's last print,
// in market id order, within one budget for all of them, when the market
// may act (OnPrint's conditions: a fresh print, not halted; and no print
// held past the jump guard, which OnParams asks too).
func (s *State) ContinueBooks(env *Env) {
	if len(s.BooksBehind) == 0 {
		return
	}
	// One act: the books share one budget, in market id order.
	budget := newActBudget(env)
	for _, id := range slices.Clone(s.BooksBehind) {
		if budget.exhausted() {
			return
		}
		if !printHeld(env, id) {
			s.actOnPrint(env, id, &budget)
		}
	}
}

// behind reports whether the market's book was left behind.
func (s *State) behind(marketID string) bool {
	_, found := slices.BinarySearch(s.BooksBehind, marketID)
	return found
}

// setBehind records or clears that an act left the market's book behind;
// BooksBehind stays sorted, one entry per market.
func (s *State) setBehind(marketID string, on bool) {
	i, found := slices.BinarySearch(s.BooksBehind, marketID)
	switch {
	case on && !found:
		s.BooksBehind = slices.Insert(s.BooksBehind, i, marketID)
	case !on && found:
		s.BooksBehind = slices.Delete(s.BooksBehind, i, i+1)
		if len(s.BooksBehind) == 0 {
			s.BooksBehind = nil // the encoded state of a book never behind
		}
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
