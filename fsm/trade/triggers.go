package trade

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// Triggers and brackets. A trigger is a market order that waits in the
// market's price index for the oracle mid to reach its level, then
// executes against the print that reached it. Nothing is reserved while it
// waits: margin, fee, limits and reduce-only are checked when it fires,
// and a trigger that cannot execute then is blocked (terminal, with the
// reason's code). A bracket is an entry (a market order, or an entry
// trigger) and one or two reduce-only legs, a stop and a take-profit, in
// one OCO group named by the bracket's order id; the legs wait (resting)
// until the entry executes, then arm. When one leg executes the other is
// cancelled, and armed legs go when the position they protect closes.

// Trigger kinds (SPEC: trigger view).
const (
	KindEntry      = "entry"
	KindStop       = "stop"
	KindTakeProfit = "take_profit"
)

// Trigger statuses (SPEC section 3).
const (
	// TrigResting: a bracket leg waiting for its entry to execute.
	TrigResting = "resting"
	// TrigArmed: in the price index, fires when the mid reaches its level.
	TrigArmed = "armed"
	// TrigBlocked: it fired and could not execute (reason says why).
	TrigBlocked   = "blocked"
	TrigExecuted  = "executed"
	TrigCancelled = "cancelled"
)

var trigStateOf = map[string]string{StatusFilled: TrigExecuted, StatusCanceled: TrigCancelled, StatusRejected: TrigBlocked}

// Reasons the engine gives when it ends a trigger or order (besides the
// refusal codes a blocked trigger carries).
const (
	ReasonOCO            = "oco"             // the other leg of the bracket executed
	ReasonPositionClosed = "position_closed" // the position the leg protected closed or flipped
	ReasonEntryCanceled  = "entry_canceled"  // the bracket's entry was cancelled before it executed
	ReasonEntryBlocked   = "entry_blocked"   // the bracket's entry fired and could not execute
	ReasonSlippage       = "slippage"        // the execution price was beyond maxSlippageQ9
)

// Bracket leg order ids: the bracket's id with these suffixes.
const (
	StopLegSuffix       = ".stop"
	TakeProfitLegSuffix = ".tp"
)

// BracketRequest is the bracket block of an order (zero: not given).
type BracketRequest struct {
	EntryKind           string `cbor:"1,keyasint"`
	EntryLevelQ8        int64  `cbor:"2,keyasint,omitempty"`
	StopLevelQ8         int64  `cbor:"3,keyasint,omitempty"`
	TakeProfitLevelQ8   int64  `cbor:"4,keyasint,omitempty"`
	StopContracts       int64  `cbor:"5,keyasint,omitempty"`
	TakeProfitContracts int64  `cbor:"6,keyasint,omitempty"`
}

// BracketEntryMarket and BracketEntryTrigger are the entry kinds.
const (
	BracketEntryMarket  = "market"
	BracketEntryTrigger = "trigger"
)

// validateBracket checks a bracket's shape (the levels' order against the
// price is checked at placement).
func validateBracket(r *PlaceRequest, p *market.Params) *wire.Refusal {
	b := r.Bracket
	if r.ReduceOnly {
		return refuse(wire.CodeValidation, "a bracket's entry opens a position: reduceOnly must be false")
	}
	switch b.EntryKind {
	case BracketEntryMarket:
		if b.EntryLevelQ8 != 0 {
			return refuse(wire.CodeValidation, "a market-entry bracket takes no entryLevel")
		}
	case BracketEntryTrigger:
		if ref := onGrid("entryLevel", b.EntryLevelQ8, p); ref != nil {
			return ref
		}
	default:
		return refuse(wire.CodeValidation, "bracket entryKind %q is not market or trigger", b.EntryKind)
	}
	if b.StopLevelQ8 == 0 && b.TakeProfitLevelQ8 == 0 {
		return refuse(wire.CodeValidation, "a bracket needs stopLevel, takeProfitLevel or both")
	}
	legs := []struct {
		name          string
		level, contrs int64
	}{{"stop", b.StopLevelQ8, b.StopContracts}, {"takeProfit", b.TakeProfitLevelQ8, b.TakeProfitContracts}}
	for _, l := range legs {
		if l.level == 0 {
			if l.contrs != 0 {
				return refuse(wire.CodeValidation, "%sContracts without %sLevel", l.name, l.name)
			}
			continue
		}
		if ref := onGrid(l.name+"Level", l.level, p); ref != nil {
			return ref
		}
		if l.contrs != 0 && (l.contrs < p.MinOrderContracts || l.contrs > r.Contracts) {
			return refuse(wire.CodeValidation, "%sContracts %d outside [%d, %d]", l.name, l.contrs, p.MinOrderContracts, r.Contracts)
		}
	}
	return nil
}

// triggerDir is the way the mid must move for a trigger of kind on side to
// fire, given its level and the reference price it must not have reached
// yet (the mid, or a bracket's entry level): a stop buys on a rise and
// sells on a fall, a take-profit the other way round, an entry fires
// toward its level from wherever the price is. A level already reached is
// refused: such an order should be a market order.
func triggerDir(kind string, side Side, levelQ8, refQ8 int64) (market.Direction, *wire.Refusal) {
	var dir market.Direction
	switch {
	case kind == KindEntry && levelQ8 > refQ8, kind == KindStop && side == Long, kind == KindTakeProfit && side == Short:
		dir = market.Rising
	case kind == KindEntry && levelQ8 < refQ8, kind == KindStop && side == Short, kind == KindTakeProfit && side == Long:
		dir = market.Falling
	default:
		return 0, refuse(wire.CodeValidation, "entry level %d equals the price %d", levelQ8, refQ8)
	}
	if reached(dir, levelQ8, refQ8) {
		return 0, refuse(wire.CodeValidation, "%s %s level %d is already reached at %d", side.Name(), kind, levelQ8, refQ8)
	}
	return dir, nil
}

// reached reports whether a mid of midQ8 has reached a level.
func reached(dir market.Direction, levelQ8, midQ8 int64) bool {
	if dir == market.Rising {
		return midQ8 >= levelQ8
	}
	return midQ8 <= levelQ8
}

func typeOfKind(kind string) string {
	switch kind {
	case KindStop:
		return TypeStopMarket
	case KindTakeProfit:
		return TypeTakeProfitMarket
	}
	return TypeMarket
}

// roomFor refuses when the account or the market's index cannot take n
// more live orders. Checks only look: a refusal creates nothing.
func (s *State) roomFor(env *Env, accountID, marketID string, n int, reducing bool) *wire.Refusal {
	if a, ok := s.Accounts[accountID]; ok && a.Resting+n > RestingOrdersPerAccountMax {
		return refuse(wire.CodeValidation, "at most %d live orders and triggers per account", RestingOrdersPerAccountMax)
	}
	return s.indexRoom(env, marketID, n, reducing)
}

// LevelIndexReserve is the feature level (fsm.FeatureLevel) from which the
// last IndexReservedForReducing entries of a market's price index take only
// reduce-only orders and triggers. Found by a review on 2026-11-27: about
// 5,000 accounts of 200 far-away one-contract orders each (a few hundred
// sats of reservation in all) filled a market's index, and from then no
// trader could place a stop-loss to protect a position.
const LevelIndexReserve uint32 = 4

// IndexReservedForReducing is the share of a market's price index kept for
// reduce-only entries from LevelIndexReserve: a tenth.
const IndexReservedForReducing = market.PriceIndexEntriesMax / 10

// LevelReserveProtects is the feature level (fsm.FeatureLevel) from which
// a reduce-only entry (trigger or resting limit) may use the reducing
// reserve of a market's price index only to protect a position: its
// account holds one on the other side, and its live reduce-only entries
// on this side in the market, the new one included, total at most
// ReserveCoverMultiple times it. Found by reviews on 2026-11-27: a
// reduce-only trigger needs no position and no money, so accounts
// without positions could fill the reserve, and then no trader could
// place a stop-loss; and one tiny position let an account put all its
// 200 entries into the reserve.
const LevelReserveProtects uint32 = 7

// ReserveCoverMultiple is how many times its position an account's
// reduce-only entries on one side of a market may cover in the index's
// reducing reserve: a stop-loss and a take-profit for all of it.
const ReserveCoverMultiple = 2

// protects reports whether a new entry of contracts on side in marketID
// counts as reducing for the index reserve (LevelReserveProtects).
func (s *State) protects(env *Env, accountID, marketID string, side Side, contracts int64, reduceOnly bool) bool {
	if !reduceOnly {
		return false
	}
	if env.Level < LevelReserveProtects {
		return true
	}
	a := s.Accounts[accountID]
	pos := a.position(marketID)
	if pos.Contracts == 0 || pos.Side == side {
		return false
	}
	total, entries := contracts, 1
	for _, no := range a.Live { // at most RestingOrdersPerAccountMax
		if o := s.Orders[no]; o != nil && o.MarketID == marketID && o.Side == side && o.ReduceOnly {
			total += o.Contracts
			entries++
		}
	}
	if env.Level >= LevelReserveCountsEntries && entries > ReserveCoverMultiple {
		return false
	}
	return total <= ReserveCoverMultiple*pos.Contracts
}

// LevelReserveCountsEntries is the feature level (fsm.FeatureLevel) from
// which an account's live reduce-only entries on one side of a market
// (the new one included) also number at most ReserveCoverMultiple for a
// new one to use the index's reducing reserve. Found by a review on
// 2026-11-28: LevelReserveProtects bounds their contracts only, so a
// 200-contract long (about 2,000 sats of margin at 100x) put 200
// one-contract stops in the reserve, and 500 such accounts filled it.
const LevelReserveCountsEntries uint32 = 8

// indexRoom refuses n more entries in marketID's price index when it would
// pass PriceIndexEntriesMax, or, for entries that can open exposure, from
// LevelIndexReserve, PriceIndexEntriesMax - IndexReservedForReducing.
func (s *State) indexRoom(env *Env, marketID string, n int, reducing bool) *wire.Refusal {
	b, ok := s.Books[marketID]
	if !ok {
		return nil
	}
	limit := market.PriceIndexEntriesMax
	if !reducing && env.Level >= LevelIndexReserve {
		limit -= IndexReservedForReducing
	}
	if b.Index.Len()+n > limit {
		if limit < market.PriceIndexEntriesMax {
			return refuse(wire.CodeValidation, "market %s holds the most resting orders it takes; room is left only for reduce-only orders and triggers", marketID)
		}
		return refuse(wire.CodeValidation, "market %s holds the most resting orders it can", marketID)
	}
	return nil
}

// placeTrigger places a standalone trigger (stop_market, take_profit_market
// or a market order with a trigger block), armed at once.
func (s *State) placeTrigger(env *Env, pr market.Print, accountID string, r PlaceRequest, side Side, kind string, level int64, reqHash []byte) (Created, *wire.Refusal) {
	dir, ref := triggerDir(kind, side, level, pr.MidQ8)
	if ref != nil {
		return Created{}, ref
	}
	if ref := s.roomFor(env, accountID, r.MarketID, 1, s.protects(env, accountID, r.MarketID, side, r.Contracts, r.ReduceOnly)); ref != nil {
		return Created{}, ref
	}
	o := &Order{OrderID: r.OrderID, AccountID: accountID, MarketID: r.MarketID, Side: side, Type: typeOfKind(kind),
		Contracts: r.Contracts, ReduceOnly: r.ReduceOnly, HasMaxSlippage: r.HasMaxSlippage, MaxSlippageQ9: r.MaxSlippageQ9,
		ReqHash: reqHash, CreatedTsMs: env.NowMs, Kind: kind, TriggerQ8: level, Dir: dir, Leverage: r.Leverage}
	s.newTrigger(o)
	s.arm(o, pr.MidQ8)
	s.changed(env, o)
	return Created{OrderID: o.OrderID, Status: StatusWorking}, nil
}

// placeBracket places a bracket: the entry (filled now for a market entry,
// armed for a trigger entry) and its legs. The legs' levels must lie on
// the right side of the entry: for a long, stop < entry < take-profit,
// where the entry is the mid for a market entry and the entry level for a
// trigger entry.
func (s *State) placeBracket(env *Env, m *market.MarketState, pr market.Print, pos Position, accountID string,
	r PlaceRequest, side Side, reqHash []byte) (Created, *wire.Refusal) {
	b := r.Bracket
	if m.Params.Status == market.StatusReduceOnly {
		return Created{}, refuse(wire.CodeReduceOnly, "market %s is reduce-only: a bracket's entry would open a position", r.MarketID)
	}
	refQ8, entryDir := pr.MidQ8, market.Direction(0)
	if b.EntryKind == BracketEntryTrigger {
		var ref *wire.Refusal
		if entryDir, ref = triggerDir(KindEntry, side, b.EntryLevelQ8, pr.MidQ8); ref != nil {
			return Created{}, ref
		}
		refQ8 = b.EntryLevelQ8
	}
	type leg struct {
		id, kind         string
		level, contracts int64
		dir              market.Direction
	}
	var legs []leg
	for _, l := range []leg{
		{r.OrderID + StopLegSuffix, KindStop, b.StopLevelQ8, b.StopContracts, 0},
		{r.OrderID + TakeProfitLegSuffix, KindTakeProfit, b.TakeProfitLevelQ8, b.TakeProfitContracts, 0},
	} {
		if l.level == 0 {
			continue
		}
		dir, ref := triggerDir(l.kind, -side, l.level, refQ8)
		if ref != nil {
			return Created{}, ref
		}
		if _, taken := s.Order(accountID, l.id); taken {
			return Created{}, wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused, "order id %q, the bracket's %s leg, is already used", l.id, l.kind)
		}
		l.dir = dir
		if l.contracts == 0 {
			l.contracts = r.Contracts
		}
		legs = append(legs, l)
	}
	parts := len(legs)
	if entryDir != 0 {
		parts++
	}
	if ref := s.roomFor(env, accountID, r.MarketID, parts, false); ref != nil {
		return Created{}, ref
	}
	entry := &Order{OrderID: r.OrderID, AccountID: accountID, MarketID: r.MarketID, Side: side, Type: TypeMarket,
		Contracts: r.Contracts, HasMaxSlippage: r.HasMaxSlippage, MaxSlippageQ9: r.MaxSlippageQ9,
		ReqHash: reqHash, CreatedTsMs: env.NowMs, OCOGroup: r.OrderID, Leverage: r.Leverage}
	var pl Plan
	if entryDir == 0 {
		qt, err := QuoteTrade(m, pr, side, r.Contracts)
		if err != nil {
			return Created{}, refuse(wire.CodeValidation, "order cannot be priced: %v", err)
		}
		if r.HasMaxSlippage && !WithinSlippage(side, qt.ExecQ8, qt.MidQ8, r.MaxSlippageQ9) {
			return Created{}, refuse(wire.CodeValidation, "execution price %d would be worse than mid %d by more than maxSlippageQ9 %d",
				qt.ExecQ8, qt.MidQ8, r.MaxSlippageQ9)
		}
		var ref *wire.Refusal
		if pl, ref = planOrderFill(env, m, pos, side, r.Contracts, r.Leverage, qt, env.Ledger.Balance(ledger.Free(accountID))); ref != nil {
			return Created{}, ref
		}
		if !s.positionRoom(r.MarketID, pos, side, r.Contracts) {
			return Created{}, refuse(wire.CodeValidation, "market %s holds the most positions it can", r.MarketID)
		}
	}
	// Every check has passed: mutate from here on.
	var a *Account
	if entryDir != 0 {
		entry.Kind, entry.TriggerQ8, entry.Dir = KindEntry, b.EntryLevelQ8, entryDir
		a = s.newTrigger(entry)
	} else {
		a = s.newOrder(entry)
	}
	var legOrders []*Order
	for _, l := range legs {
		o := &Order{OrderID: l.id, AccountID: accountID, MarketID: r.MarketID, Side: -side, Type: typeOfKind(l.kind),
			Contracts: l.contracts, ReduceOnly: true, CreatedTsMs: env.NowMs, Kind: l.kind, TriggerQ8: l.level, Dir: l.dir,
			OCOGroup: r.OrderID, Parent: entry.No}
		s.newTrigger(o)
		entry.Legs = append(entry.Legs, o.No)
		legOrders = append(legOrders, o)
	}
	if len(legOrders) == 2 {
		legOrders[0].Sibling, legOrders[1].Sibling = legOrders[1].No, legOrders[0].No
	}
	if entryDir == 0 {
		// The fill arms the legs (afterFill).
		s.fill(env, a, entry, pl, 0)
		s.sweep(env, r.MarketID)
		return Created{OrderID: entry.OrderID, Status: StatusFilled}, nil
	}
	s.arm(entry, pr.MidQ8)
	s.changed(env, entry)
	for _, o := range legOrders {
		s.changed(env, o)
	}
	return Created{OrderID: entry.OrderID, Status: StatusWorking}, nil
}

// newTrigger records a live trigger, waiting (resting) until armed, and
// returns its trading account.
func (s *State) newTrigger(o *Order) *Account {
	a := s.newOrder(o)
	o.Status, o.TrigState = StatusAccepted, TrigResting
	s.goLive(a, o)
	a.Triggers = append(a.Triggers, o.No) // numbers only grow: stays sorted
	return a
}

// arm puts a trigger in its market's price index.
func (s *State) arm(o *Order, midQ8 int64) { s.armIn(o, midQ8, false) }

// armIn is arm; past lets the entry in beyond the index's bound (a leg
// whose room was taken when its bracket was placed).
func (s *State) armIn(o *Order, midQ8 int64, past bool) {
	book := s.book(o.MarketID)
	if book.LastMidQ8 == 0 {
		book.LastMidQ8 = midQ8
	}
	insert := book.Index.Insert
	if past {
		insert = book.Index.InsertPast
	}
	if err := insert(indexID(o.No), o.TriggerQ8, o.Dir); err != nil {
		panic("trade: index trigger " + o.OrderID + ": " + err.Error())
	}
	o.TrigState, o.LevelQ8 = TrigArmed, o.TriggerQ8
}

// armLeg arms a bracket leg once its entry executed. A leg whose level the
// price already passed (the entry fired on a gap) executes at once.
func (s *State) armLeg(env *Env, o *Order) {
	m := env.Market.MarketsByID[o.MarketID]
	pr, _ := env.Market.LastPrint(o.MarketID)
	if reached(o.Dir, o.TriggerQ8, pr.MidQ8) {
		s.execTrigger(env, m, pr, o)
		return
	}
	s.armIn(o, pr.MidQ8, env.Level >= LevelLegsArmPast)
	s.changed(env, o)
}

// LevelLegsArmPast is the feature level (fsm.FeatureLevel) from which a
// bracket leg arms even when its market's price index is full. A bracket
// with a trigger entry takes room for its entry and legs when it is
// placed, but only the entry enters the index then; the legs go in when
// it fires. Below this level, reduce-only triggers (which need no
// position) could fill the index meanwhile, the second leg's insert
// failed and every replica halted on that print (found by a review on
// 2026-11-27). The index may then pass its bound by at most one entry
// per such bracket that fired (its entry leaves, two legs come in), and
// every one of those brackets held a slot: it never holds more than twice
// PriceIndexEntriesMax, and nothing new is placed while it is past it.
const LevelLegsArmPast uint32 = 6

// execTrigger executes a trigger that fired (already out of the index) as
// a market order against pr, or blocks it: market_halted, reduce_only (a
// reduce-only trigger with no position to reduce), slippage, or the
// refusal code of the fill (insufficient_margin, insufficient_balance,
// position_limit, oi_cap). A reduce-only trigger is trimmed to the
// position, so it never flips.
func (s *State) execTrigger(env *Env, m *market.MarketState, pr market.Print, o *Order) {
	if m.Params.Status == market.StatusHalted {
		s.finish(env, o, StatusRejected, wire.CodeMarketHalted)
		return
	}
	a := s.account(o.AccountID)
	pos := a.position(o.MarketID)
	q := o.Contracts
	if o.ReduceOnly || m.Params.Status == market.StatusReduceOnly {
		if pos.Contracts == 0 || pos.Side != -o.Side {
			s.finish(env, o, StatusRejected, wire.CodeReduceOnly)
			return
		}
		q = min(q, pos.Contracts)
	}
	qt, err := QuoteTrade(m, pr, o.Side, q)
	if err != nil {
		s.finish(env, o, StatusRejected, wire.CodeValidation)
		return
	}
	if o.HasMaxSlippage && !WithinSlippage(o.Side, qt.ExecQ8, qt.MidQ8, o.MaxSlippageQ9) {
		s.finish(env, o, StatusRejected, ReasonSlippage)
		return
	}
	pl, ref := planOrderFill(env, m, pos, o.Side, q, o.Leverage, qt, env.Ledger.Balance(ledger.Free(o.AccountID)))
	if ref == nil && !s.positionRoom(o.MarketID, pos, o.Side, q) {
		ref = refuse(wire.CodeValidation, "market %s holds the most positions it can", o.MarketID)
	}
	if ref != nil {
		s.finish(env, o, StatusRejected, ref.Code)
		return
	}
	s.fill(env, a, o, pl, 0)
}

// afterFill keeps brackets straight after order o filled: an executed leg
// cancels its sibling (OCO); a position that closed or flipped cancels the
// armed legs that protected it; an executed bracket entry arms its legs.
func (s *State) afterFill(env *Env, a *Account, o *Order, pl Plan) {
	if o.Sibling != 0 {
		if sib, ok := s.Orders[o.Sibling]; ok && sib.Status == StatusAccepted {
			if left := s.bracketLeft(env, o, pl); left > 0 {
				// A partial leg executed: the other keeps protecting
				// what is left of the bracket's position, and no more.
				if sib.Contracts > left {
					sib.Contracts = left
					s.changed(env, sib)
				}
			} else {
				s.finish(env, sib, StatusCanceled, ReasonOCO)
			}
		}
	}
	if pl.Before.Contracts > 0 && (pl.After.Contracts == 0 || pl.After.Side != pl.Before.Side) {
		s.cancelLegs(env, a, o.MarketID)
	}
	// From LevelLegsNeedPosition, an entry whose fill left no position on
	// its side (it closed or only reduced an opposite one) has nothing for
	// its legs to protect: they go rather than wait, armed, for whatever
	// position the account opens next.
	orphan := env.Level >= LevelLegsNeedPosition && (pl.After.Contracts == 0 || pl.After.Side != pl.Side)
	// From LevelLegsSizedToEntry, an entry that opened fewer contracts
	// than it has (it first closed an opposite position) arms its legs
	// for what it opened only, and keeps that figure for bracketLeft.
	sized := len(o.Legs) > 0 && !orphan && env.Level >= LevelLegsSizedToEntry && pl.Opened < o.Contracts
	if sized {
		o.Opened = pl.Opened
	}
	for _, no := range o.Legs {
		if leg, ok := s.Orders[no]; ok && leg.Status == StatusAccepted && leg.TrigState == TrigResting {
			if orphan {
				s.finish(env, leg, StatusCanceled, ReasonPositionClosed)
				continue
			}
			if sized && leg.Contracts > pl.Opened {
				leg.Contracts = pl.Opened // armLeg announces the new size
			}
			s.armLeg(env, leg)
		}
	}
}

// bracketLeft is how many contracts of the position bracket leg o's entry
// opened are still open after the leg executed (plan pl), from
// LevelPartialLegsKeepSibling; 0 below it, or when the entry is no longer
// kept, or the position closed or flipped.
func (s *State) bracketLeft(env *Env, o *Order, pl Plan) int64 {
	if env.Level < LevelPartialLegsKeepSibling || pl.After.Contracts == 0 || pl.After.Side != pl.Before.Side {
		return 0
	}
	entry, ok := s.Orders[o.Parent]
	if !ok || entry.Status != StatusFilled {
		return 0
	}
	opened := entry.Contracts
	if env.Level >= LevelLegsSizedToEntry && entry.Opened > 0 {
		opened = entry.Opened
	}
	return min(max(opened-pl.Closed, 0), pl.After.Contracts)
}

// LevelPartialLegsKeepSibling is the feature level (fsm.FeatureLevel) from
// which a bracket leg that executes for part of the bracket's position
// (takeProfitContracts or stopContracts below the entry's) leaves the
// other leg armed for the rest, trimmed to it, instead of cancelling it
// (oco). Below it a take-profit for 5 of 10 contracts cancelled the stop
// for all 10, and the 5 left had no stop (a trading review of
// 2026-11-27). A leg that leaves nothing of the bracket's position still
// cancels the other (oco).
const LevelPartialLegsKeepSibling uint32 = 8

// LevelLegsNeedPosition is the feature level (fsm.FeatureLevel) from which
// a bracket's legs are cancelled (position_closed) when its entry's fill
// leaves no position on the entry's side. Found by a review on 2026-11-27:
// a buy bracket whose entry closed a 1,000-contract short armed its sell
// legs on a flat account; an unrelated 500-contract long opened later was
// then closed by the orphan take-profit at 111,000.
const LevelLegsNeedPosition uint32 = 8

// LevelLegsSizedToEntry is the feature level (fsm.FeatureLevel) from
// which a bracket entry that opens fewer contracts than it has (it first
// closed an opposite position: a buy of 1,000 on a 800-contract short
// opens 200) arms its legs trimmed to what it opened, records that in
// Order.Opened, and a partial leg trims the other to what is left of it
// (bracketLeft). Found by a review on 2026-11-29: the legs kept the
// entry's 1,000, and after the trader bought 2,000 more with another
// order the bracket's stop closed 1,000, 800 of them contracts the stop
// never protected (LevelLegsNeedPosition covered only an entry that
// opened nothing).
const LevelLegsSizedToEntry uint32 = 9

// cancelLegs cancels the trading account a's armed bracket legs in a
// market: the position they protected closed or flipped.
func (s *State) cancelLegs(env *Env, a *Account, marketID string) {
	for _, no := range append([]uint64(nil), a.Triggers...) {
		leg := s.Orders[no]
		if leg.Status == StatusAccepted && leg.Parent != 0 && leg.TrigState == TrigArmed && leg.MarketID == marketID {
			s.finish(env, leg, StatusCanceled, ReasonPositionClosed)
		}
	}
}

func removeNo(nos []uint64, no uint64) []uint64 {
	i := sort.Search(len(nos), func(i int) bool { return nos[i] >= no })
	if i < len(nos) && nos[i] == no {
		return append(nos[:i], nos[i+1:]...)
	}
	return nos
}

// checkTrigger verifies a live trigger's bookkeeping (CheckInvariants).
func (s *State) checkTrigger(o *Order) error {
	a := s.Accounts[o.AccountID]
	i := sort.Search(len(a.Triggers), func(i int) bool { return a.Triggers[i] >= o.No })
	switch {
	case i == len(a.Triggers) || a.Triggers[i] != o.No:
		return fmt.Errorf("live trigger %s/%s is not listed", o.AccountID, o.OrderID)
	case o.ReservedMsat != 0:
		return fmt.Errorf("trigger %s/%s reserves %d", o.AccountID, o.OrderID, o.ReservedMsat)
	case o.TrigState == TrigResting:
		if p, ok := s.Orders[o.Parent]; !ok || p.Status != StatusAccepted || p.Kind != KindEntry {
			return fmt.Errorf("resting leg %s/%s has no live entry", o.AccountID, o.OrderID)
		}
	case o.TrigState != TrigArmed || o.LevelQ8 != o.TriggerQ8:
		return fmt.Errorf("live trigger %s/%s is %s at %d", o.AccountID, o.OrderID, o.TrigState, o.LevelQ8)
	}
	return nil
}
