package trade

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// Env is what the trading book needs from the state machine for one entry.
type Env struct {
	Ledger *ledger.Ledger
	Market *market.State
	NowMs  int64
	// NextSeq allocates a fresh seq from the shared space; it is called
	// only once every check has passed.
	NextSeq func() uint64
	// Emit publishes an account event with its seq.
	Emit func(kind, accountID string, seq uint64, data any)
	// Reserve, when set, makes room for n more events (a funding
	// boundary emits one per holder): a hint, it changes no event.
	Reserve func(n int)
	// FeeSplit, when set, is called once for every order fill (not for
	// liquidation or ADL closes, which pay no fee), after the fill's
	// ledger legs (the whole fee is in ledger.FeeRevenue) and before the
	// fill is recorded and announced. It may move part of the fee on out
	// of ledger.FeeRevenue (the referral programme: a discount back to the
	// trader, a reward to a payable) and returns the fill's referral
	// block, or nil. The fill's FeeMsat becomes the fee less the block's
	// DiscountMsat.
	FeeSplit func(f *Fill) *Referral
	// Level is the cluster's feature level (fsm.State.FeatureLevel): apply
	// behaviour that changed since trading shipped is gated on it.
	Level uint32

	// adl is the running sweep's auto-deleveraging ranking (liquidate.go);
	// nil outside a sweep.
	adl *adlRanking
	// work counts fills, liquidations and ended orders as they happen; an
	// act on a book charges its budget by the difference over an item
	// (actBudget). Never reset (the Env outlives entries) and never part
	// of the state.
	work int
}

// LevelExactFunding is the feature level (fsm.FeatureLevel) from which a
// funding receiver is paid the exact amount rounded down once (OnFunding).
const LevelExactFunding uint32 = 3

// PlaceRequest is an order as the API decoded it. OrderID is the client's
// idempotency key: SPEC makes the key the order id.
type PlaceRequest struct {
	OrderID        string `cbor:"1,keyasint"`
	MarketID       string `cbor:"2,keyasint"`
	Side           string `cbor:"3,keyasint"`
	Type           string `cbor:"4,keyasint"`
	Contracts      int64  `cbor:"5,keyasint"`
	ReduceOnly     bool   `cbor:"6,keyasint"`
	LimitPriceQ8   int64  `cbor:"7,keyasint,omitempty"`
	HasMaxSlippage bool   `cbor:"8,keyasint,omitempty"`
	MaxSlippageQ9  int64  `cbor:"9,keyasint,omitempty"`
	// TriggerPriceQ8 is the level of a stop_market or take_profit_market
	// order (0: not given).
	TriggerPriceQ8 int64 `cbor:"10,keyasint,omitempty"`
	// TriggerKind and TriggerLevelQ8 are the trigger block of a market
	// order (empty: not given).
	TriggerKind    string          `cbor:"11,keyasint,omitempty"`
	TriggerLevelQ8 int64           `cbor:"12,keyasint,omitempty"`
	Bracket        *BracketRequest `cbor:"13,keyasint,omitempty"`
	// Leverage asks for the margin of the contracts the order opens: 1
	// to maxLeverage (0: maxLeverage, the market's imRateQ9).
	Leverage int64 `cbor:"14,keyasint,omitempty"`
}

// Created is the answer to an order placement (SPEC: 201 {orderId, status}).
type Created struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
}

// Prior answers a placement whose order id the account already used: the
// order's current status when the request is the same (a late retry,
// after the idempotency store forgot it), idempotency_key_reused when it
// differs. ok is false when the id is new.
func (s *State) Prior(accountID, orderID string, reqHash []byte) (Created, bool, *wire.Refusal) {
	return s.PriorIn(s.Accounts[accountID], orderID, reqHash)
}

// PriorIn is Prior for the trading account a (State.Account; nil before
// the account's first order).
func (s *State) PriorIn(a *Account, orderID string, reqHash []byte) (Created, bool, *wire.Refusal) {
	o, ok := s.orderIn(a, orderID)
	if !ok {
		return Created{}, false, nil
	}
	if !bytes.Equal(o.ReqHash, reqHash) {
		return Created{}, true, wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused,
			"order id %q was already used for another order", orderID)
	}
	return Created{OrderID: o.OrderID, Status: o.Status}, true, nil
}

// validate checks the request on its own and against the market's grid,
// and says what it asks for: its side and, for a standalone trigger, the
// trigger's kind and level.
func validate(r *PlaceRequest, p *market.Params) (Side, string, int64, *wire.Refusal) {
	var side Side
	switch r.Side {
	case "buy":
		side = Long
	case "sell":
		side = Short
	default:
		return 0, "", 0, refuse(wire.CodeValidation, "side %q is not buy or sell", r.Side)
	}
	if r.OrderID == "" || len(r.OrderID) > OrderIDLenMax {
		return 0, "", 0, refuse(wire.CodeValidation, "order id must be 1..%d characters", OrderIDLenMax)
	}
	if r.Contracts < p.MinOrderContracts || r.Contracts > p.MaxOrderContracts {
		return 0, "", 0, refuse(wire.CodeValidation, "contracts %d outside [%d, %d]", r.Contracts, p.MinOrderContracts, p.MaxOrderContracts)
	}
	if r.HasMaxSlippage && (r.MaxSlippageQ9 < 0 || r.MaxSlippageQ9 >= q9) {
		return 0, "", 0, refuse(wire.CodeValidation, "maxSlippageQ9 %d outside [0, 1e9)", r.MaxSlippageQ9)
	}
	if r.Leverage < 0 || r.Leverage > p.MaxLeverage {
		return 0, "", 0, refuse(wire.CodeValidation, "leverage %d beyond maxLeverage %d", r.Leverage, p.MaxLeverage)
	}
	hasTrigger := r.TriggerKind != "" || r.TriggerLevelQ8 != 0
	var kind string
	var level int64
	switch r.Type {
	case TypeMarket:
		if r.LimitPriceQ8 != 0 || r.TriggerPriceQ8 != 0 {
			return 0, "", 0, refuse(wire.CodeValidation, "a market order takes no limitPriceQ8 or triggerPriceQ8 (use trigger or bracket)")
		}
		if hasTrigger && r.Bracket != nil {
			return 0, "", 0, refuse(wire.CodeValidation, "an order takes a trigger or a bracket, not both")
		}
		if hasTrigger {
			switch r.TriggerKind {
			case KindEntry, KindStop, KindTakeProfit:
			default:
				return 0, "", 0, refuse(wire.CodeValidation, "trigger kind %q is not entry, stop or take_profit", r.TriggerKind)
			}
			kind, level = r.TriggerKind, r.TriggerLevelQ8
		}
	case TypeLimit:
		if r.LimitPriceQ8 == 0 {
			return 0, "", 0, refuse(wire.CodeValidation, "a limit order needs limitPriceQ8")
		}
		if ref := onGrid("limitPriceQ8", r.LimitPriceQ8, p); ref != nil {
			return 0, "", 0, ref
		}
		if r.TriggerPriceQ8 != 0 || hasTrigger || r.Bracket != nil {
			return 0, "", 0, refuse(wire.CodeValidation, "a limit order takes no triggerPriceQ8, trigger or bracket")
		}
	case TypeStopMarket, TypeTakeProfitMarket:
		if r.TriggerPriceQ8 == 0 {
			return 0, "", 0, refuse(wire.CodeValidation, "a %s order needs triggerPriceQ8", r.Type)
		}
		if r.LimitPriceQ8 != 0 || hasTrigger || r.Bracket != nil {
			return 0, "", 0, refuse(wire.CodeValidation, "a %s order takes no limitPriceQ8, trigger or bracket", r.Type)
		}
		kind, level = KindStop, r.TriggerPriceQ8
		if r.Type == TypeTakeProfitMarket {
			kind = KindTakeProfit
		}
	default:
		return 0, "", 0, refuse(wire.CodeValidation, "type %q is not market, limit, stop_market or take_profit_market", r.Type)
	}
	if kind != "" {
		if ref := onGrid("trigger level", level, p); ref != nil {
			return 0, "", 0, ref
		}
	}
	if r.Bracket != nil {
		if ref := validateBracket(r, p); ref != nil {
			return 0, "", 0, ref
		}
	}
	return side, kind, level, nil
}

// onGrid checks a price against the market's range and tick.
func onGrid(name string, q8 int64, p *market.Params) *wire.Refusal {
	if q8 <= 0 || q8 > market.PriceQ8Max {
		return refuse(wire.CodeValidation, "%s %d outside [1, %d]", name, q8, market.PriceQ8Max)
	}
	if q8%p.TickSizeQ8 != 0 {
		return refuse(wire.CodeValidation, "%s %d is not a multiple of tickSizeQ8 %d", name, q8, p.TickSizeQ8)
	}
	return nil
}

// reducing reports whether an order of q contracts on side only reduces
// pos (never increases or flips it).
func reducing(pos Position, side Side, q int64) bool {
	return pos.Contracts > 0 && pos.Side == -side && q <= pos.Contracts
}

// Place places an order for accountID. The caller has checked the actor,
// the prior use of the order id and that the market is open (not halted,
// oracle fresh). A market order fills at once against the oracle's last
// print; a limit order fills at once when its execution price is no worse
// than its limit, and otherwise rests with its margin and fee reserved.
func (s *State) Place(env *Env, accountID string, r PlaceRequest, reqHash []byte) (Created, *wire.Refusal) {
	return s.PlaceIn(env, s.Accounts[accountID], accountID, r, reqHash)
}

// PlaceIn is Place for accountID's trading account a (State.Account; nil
// before its first order), which a market or limit order then carries
// through instead of looking it up again.
func (s *State) PlaceIn(env *Env, a *Account, accountID string, r PlaceRequest, reqHash []byte) (Created, *wire.Refusal) {
	m, ok := env.Market.MarketsByID[r.MarketID]
	if !ok {
		return Created{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "market %q not found", r.MarketID)
	}
	p := &m.Params
	side, kind, level, ref := validate(&r, p)
	if ref != nil {
		return Created{}, ref
	}
	if env.Level >= LevelADLIDsReserved && strings.HasPrefix(r.OrderID, ADLOrderPrefix) {
		return Created{}, refuse(wire.CodeValidation, "order ids starting with %q are reserved: they name the fills of auto-deleveraging", ADLOrderPrefix)
	}
	pr, ok := env.Market.LastPrint(r.MarketID)
	if !ok {
		return Created{}, refuse(wire.CodeOracleStale, "market %s has no oracle print", r.MarketID)
	}
	pos := a.position(r.MarketID)
	mustReduce := r.ReduceOnly || p.Status == market.StatusReduceOnly
	switch {
	case r.Bracket != nil:
		return s.placeBracket(env, m, pr, pos, accountID, r, side, reqHash)
	case kind != "":
		// A trigger's reduce-only promise is kept when it fires (a stop
		// may be placed before its position exists); a market in
		// reduce_only takes only reduce-only triggers.
		if p.Status == market.StatusReduceOnly && !r.ReduceOnly {
			return Created{}, refuse(wire.CodeReduceOnly, "market %s is reduce-only: triggers must be reduceOnly", r.MarketID)
		}
		return s.placeTrigger(env, pr, accountID, r, side, kind, level, reqHash)
	}
	if mustReduce && !reducing(pos, side, r.Contracts) {
		return Created{}, refuse(wire.CodeReduceOnly, "order of %d contracts would not only reduce the %d-contract position", r.Contracts, pos.Contracts)
	}
	qt, err := QuoteTrade(m, pr, side, r.Contracts)
	if err != nil {
		return Created{}, refuse(wire.CodeValidation, "order cannot be priced: %v", err)
	}
	var free int64
	if a != nil {
		free = env.Ledger.Balance(a.ledgerFree(accountID))
	} else {
		free = env.Ledger.Balance(ledger.Free(accountID))
	}
	o := &Order{OrderID: r.OrderID, AccountID: accountID, MarketID: r.MarketID, Side: side, Type: r.Type,
		Contracts: r.Contracts, LimitQ8: r.LimitPriceQ8, ReduceOnly: r.ReduceOnly, HasMaxSlippage: r.HasMaxSlippage,
		MaxSlippageQ9: r.MaxSlippageQ9, ReqHash: reqHash, CreatedTsMs: env.NowMs, Leverage: r.Leverage}
	slippageOK := !r.HasMaxSlippage || WithinSlippage(side, qt.ExecQ8, qt.MidQ8, r.MaxSlippageQ9)
	if r.Type == TypeMarket {
		if !slippageOK {
			return Created{}, refuse(wire.CodeValidation, "execution price %d would be worse than mid %d by more than maxSlippageQ9 %d",
				qt.ExecQ8, qt.MidQ8, r.MaxSlippageQ9)
		}
	}
	if r.Type == TypeMarket || (slippageOK && noWorse(side, qt.ExecQ8, r.LimitPriceQ8)) {
		pl, ref := planOrderFill(env, m, pos, side, r.Contracts, r.Leverage, qt, free)
		if ref != nil {
			return Created{}, ref
		}
		if !s.positionRoom(r.MarketID, pos, side, r.Contracts) {
			return Created{}, refuse(wire.CodeValidation, "market %s holds the most positions it can", r.MarketID)
		}
		a = s.newOrderIn(a, o)
		s.fill(env, a, o, pl, 0)
		// Below LevelOpensAboveMaintenance a fill could leave its position
		// below maintenance (a spread beyond what initial margin holds
		// above it); whatever is due goes now.
		s.sweep(env, r.MarketID)
		return Created{OrderID: o.OrderID, Status: StatusFilled}, nil
	}
	if env.Level >= LevelSlippageBelowSpread && r.HasMaxSlippage && r.MaxSlippageQ9 < p.BaseSpreadQ9 {
		// Every execution pays at least the base spread: such an order
		// could never fill, and waiting it would be checked again on every
		// print that moves toward it, for a reservation of a few msat.
		return Created{}, refuse(wire.CodeValidation, "maxSlippageQ9 %d is below the market's baseSpreadQ9 %d: the order could never fill",
			r.MaxSlippageQ9, p.BaseSpreadQ9)
	}
	return s.rest(env, a, o, pos, qt.MidQ8, free)
}

// LevelSlippageBelowSpread is the feature level (fsm.FeatureLevel) from
// which a limit order whose maxSlippageQ9 is below its market's
// baseSpreadQ9 is refused (validation) instead of resting. Found by a
// review on 2026-11-27: such an order can never fill, yet each print that
// crosses it re-indexes it one q8 unit beyond the mid, where the next
// print in that direction crosses it again. A buy limit at the top price
// reserves 2 msat; 20,000 of them (100 accounts) cost every falling print
// about 120 ms of apply on a shared test machine, linear in their number
// up to the index's bound.
const LevelSlippageBelowSpread uint32 = 8

// noWorse reports whether execQ8 is no worse for side than the limit.
func noWorse(side Side, execQ8, limitQ8 int64) bool {
	if side == Long {
		return execQ8 <= limitQ8
	}
	return execQ8 >= limitQ8
}

// Reservation is what a resting limit order sets aside: the initial margin
// of the contracts it would open at its limit price (against the position
// as it is at placement) plus the taker fee on all its contracts at the
// limit price. Reduce-only orders open nothing.
func Reservation(p *market.Params, pos Position, side Side, q, limitQ8, leverage int64, reduceOnly bool) (int64, error) {
	opening := q
	if pos.Contracts > 0 && pos.Side == -side {
		opening -= min(q, pos.Contracts)
	}
	if reduceOnly {
		opening = 0
	}
	notional, err := NotionalMsat(p, q, limitQ8)
	if err != nil {
		return 0, err
	}
	fee, err := TakerFeeMsat(notional, p.TakerFeeQ9)
	if err != nil {
		return 0, err
	}
	openNotional, err := NotionalMsat(p, opening, limitQ8)
	if err != nil {
		return 0, err
	}
	im, err := InitialMarginMsat(openNotional, MarginRateQ9(p, leverage), p.MaxLeverage)
	if err != nil {
		return 0, err
	}
	if im > 1<<62 || fee > 1<<62 {
		return 0, fmt.Errorf("%w: reservation", ErrMath)
	}
	return im + fee, nil
}

// restLevel is where a resting order waits in the index: at its limit, or,
// when the mid is already at or through the limit but the execution price
// is not (the spread), one q8 unit beyond the current mid, so that the next
// print moving in the order's favour checks it again.
func restLevel(side Side, limitQ8, midQ8 int64) (int64, market.Direction) {
	if side == Long {
		return max(1, min(limitQ8, midQ8-1)), market.Falling
	}
	return min(market.PriceQ8Max, max(limitQ8, midQ8+1)), market.Rising
}

// rest rests o for its trading account a (nil before its first order).
func (s *State) rest(env *Env, a *Account, o *Order, pos Position, midQ8, free int64) (Created, *wire.Refusal) {
	p := &env.Market.MarketsByID[o.MarketID].Params
	// Checks only look: a refusal must not even create an empty account
	// or book.
	if a != nil && a.Resting >= RestingOrdersPerAccountMax {
		return Created{}, refuse(wire.CodeValidation, "at most %d resting orders per account", RestingOrdersPerAccountMax)
	}
	mustReduce := o.ReduceOnly || p.Status == market.StatusReduceOnly
	reserve, err := Reservation(p, pos, o.Side, o.Contracts, o.LimitQ8, o.Leverage, mustReduce)
	if err != nil {
		return Created{}, refuse(wire.CodeValidation, "order cannot be priced: %v", err)
	}
	if reserve > free {
		code := wire.CodeInsufficientMargin
		if mustReduce {
			code = wire.CodeInsufficientBalance
		}
		return Created{}, refuse(code, "free balance %d msat cannot reserve %d msat for this order", free, reserve)
	}
	if ref := s.indexRoom(env, o.MarketID, 1, s.protects(env, o.AccountID, o.MarketID, o.Side, o.Contracts, o.ReduceOnly)); ref != nil {
		return Created{}, ref
	}
	// Every check has passed: mutate from here on.
	book := s.book(o.MarketID)
	a = s.newOrderIn(a, o)
	if book.LastMidQ8 == 0 {
		book.LastMidQ8 = midQ8
	}
	transfer(env.Ledger, a.ledgerFree(o.AccountID), a.ledgerReserved(o.AccountID), reserve)
	o.ReservedMsat = reserve
	o.Status = StatusAccepted
	s.goLive(a, o)
	s.index(book, o, midQ8)
	s.changed(env, o)
	return Created{OrderID: o.OrderID, Status: StatusResting}, nil
}

func (s *State) index(book *Book, o *Order, midQ8 int64) { s.indexIn(book, o, midQ8, false) }

// indexIn is index; past lets the order in beyond the index's bound (an
// order put back after a print crossed it: it held its place already).
func (s *State) indexIn(book *Book, o *Order, midQ8 int64, past bool) {
	level, dir := restLevel(o.Side, o.LimitQ8, midQ8)
	insert := book.Index.Insert
	if past {
		insert = book.Index.InsertPast
	}
	if err := insert(indexID(o.No), level, dir); err != nil {
		panic(fmt.Sprintf("trade: index order %d: %v", o.No, err))
	}
	o.LevelQ8 = level
}

// goLive counts a newly live order (a resting limit or a trigger) on its
// account a: numbers only grow, so the lists stay sorted.
func (s *State) goLive(a *Account, o *Order) {
	a.Resting++
	a.Live = append(a.Live, o.No)
}

func (s *State) newOrder(o *Order) *Account { return s.newOrderIn(s.Accounts[o.AccountID], o) }

// newOrderIn records o for its trading account a, made first when nil, and
// returns the account.
func (s *State) newOrderIn(a *Account, o *Order) *Account {
	if a == nil {
		a = s.account(o.AccountID)
	}
	s.NextOrderNo++
	o.No = s.NextOrderNo
	s.Orders[o.No] = o
	a.OrderNos[o.OrderID] = o.No
	return a
}

// changed gives the order's change a fresh seq and announces it: an
// order event, or a trigger event for a trigger.
func (s *State) changed(env *Env, o *Order) {
	o.Seq = env.NextSeq()
	o.UpdatedTsMs = env.NowMs
	if o.Kind != "" {
		v := NewTriggerView(o)
		if env.Level < LevelViewsShowSeq {
			env.Emit("trigger", o.AccountID, o.Seq, triggerViewNoSeq{TriggerView: v})
			return
		}
		env.Emit("trigger", o.AccountID, o.Seq, v)
		return
	}
	v := NewOrderView(o)
	if env.Level < LevelViewsShowSeq {
		env.Emit("order", o.AccountID, o.Seq, orderViewNoSeq{OrderView: v})
		return
	}
	env.Emit("order", o.AccountID, o.Seq, v)
}

// LevelViewsShowSeq is the feature level (fsm.FeatureLevel) from which the
// data of order and trigger events carries the view's seq, as every other
// history record's does (docs/architecture.md, Events and seq). Below it
// an order or trigger view showed no seq, so a client resyncing from
// GET /v1/orders could not tell a buffered event it already had from a
// newer one, and the page's cursor was a number the page never showed
// (a review on 2026-11-27). The REST views always show it; only the
// events an old log replays keep their old bytes.
const LevelViewsShowSeq uint32 = 8

// orderViewNoSeq and triggerViewNoSeq render a view without its seq, as
// events did below LevelViewsShowSeq: the nil field of the same JSON name
// at the shallower depth hides the embedded one.
type orderViewNoSeq struct {
	OrderView
	Seq *struct{} `json:"seq,omitempty"`
}

type triggerViewNoSeq struct {
	TriggerView
	Seq *struct{} `json:"seq,omitempty"`
}

// transfer moves money the plan has already proven available; a failure is
// a bug, and the replica halts rather than keep half an entry.
func transfer(l *ledger.Ledger, from, to string, msat int64) {
	if msat == 0 {
		return
	}
	if err := l.Transfer(from, to, msat); err != nil {
		panic(fmt.Sprintf("trade: transfer %s -> %s %d: %v", from, to, msat, err))
	}
}

// close ends an order, of the trading account a, that is no longer
// resting or was never resting.
func (s *State) close(env *Env, a *Account, o *Order, status, reason string) {
	if o.Status == StatusAccepted {
		a.Resting--
	}
	if o.Status == StatusAccepted {
		a.Live = removeNo(a.Live, o.No)
		if o.Kind != "" {
			a.Triggers = removeNo(a.Triggers, o.No)
		}
	}
	o.Status, o.Reason = status, reason
	if o.Kind != "" {
		o.TrigState = trigStateOf[status]
	}
	a.Closed = append(a.Closed, o.No)
	if len(a.Closed) > ClosedOrdersKept {
		i := 0
		if env.Level >= LevelEntryKeptWithLegs {
			// At most RestingOrdersPerAccountMax entries have a live leg,
			// fewer than ClosedOrdersKept: one without is always found.
			for i < len(a.Closed)-1 && s.hasLiveLeg(a.Closed[i]) {
				i++
			}
		}
		old := a.Closed[i]
		if i == 0 {
			a.Closed = a.Closed[1:]
		} else {
			a.Closed = slices.Delete(a.Closed, i, i+1)
		}
		if oo, ok := s.Orders[old]; ok {
			delete(a.OrderNos, oo.OrderID)
			delete(s.Orders, old)
		}
	}
}

// LevelEntryKeptWithLegs is the feature level (fsm.FeatureLevel) from
// which a bracket's executed entry is not dropped from the account's
// closed orders (ClosedOrdersKept) while one of its legs is live: the
// next oldest closed order goes instead. The entry's contracts are what
// LevelPartialLegsKeepSibling trims the other leg to, and its id is how
// the bracket is cancelled; found by the release review of 2026-11-27:
// after ClosedOrdersKept more orders (a bot's day) the entry was gone, a
// take-profit for 4,000 of 10,000 contracts cancelled the stop for the
// 6,000 left (oco), and the bracket's id answered 404 while its stop was
// live.
const LevelEntryKeptWithLegs uint32 = 8

// hasLiveLeg reports whether order no is a bracket entry with a live leg.
func (s *State) hasLiveLeg(no uint64) bool {
	o, ok := s.Orders[no]
	if !ok {
		return false
	}
	for _, l := range o.Legs {
		if leg, ok := s.Orders[l]; ok && leg.Status == StatusAccepted {
			return true
		}
	}
	return false
}

// Cancel cancels a live order, trigger or bracket. found is false for an
// unknown id (or one of another account); canceled is false when nothing
// was live any more (filled, canceled or blocked before). A bracket's id
// cancels whatever of the bracket is still live: the entry trigger with
// its waiting legs, or, once the entry executed, the armed legs.
func (s *State) Cancel(env *Env, accountID, orderID string) (found, canceled bool) {
	o, ok := s.Order(accountID, orderID)
	if !ok {
		return false, false
	}
	if o.Status == StatusAccepted {
		s.finish(env, o, StatusCanceled, "")
		return true, true
	}
	for _, no := range o.Legs {
		if leg, ok := s.Orders[no]; ok && leg.Status == StatusAccepted {
			s.finish(env, leg, StatusCanceled, "")
			canceled = true
		}
	}
	return true, canceled
}

// finish ends a live order without a fill: canceled (by its owner, the
// dead-man switch, OCO, a closed position) or rejected (a trigger that
// fired and could not execute: blocked, with the reason). Its index entry
// and reservation go; a bracket entry that ends this way takes its
// waiting legs with it.
func (s *State) finish(env *Env, o *Order, status, reason string) {
	env.work++
	s.Books[o.MarketID].Index.Remove(indexID(o.No))
	a := s.account(o.AccountID)
	if o.ReservedMsat != 0 { // transfer's no-op: no names needed
		transfer(env.Ledger, a.ledgerReserved(o.AccountID), a.ledgerFree(o.AccountID), o.ReservedMsat)
	}
	o.ReservedMsat = 0
	s.close(env, a, o, status, reason)
	s.changed(env, o)
	legReason := ReasonEntryCanceled
	if status == StatusRejected {
		legReason = ReasonEntryBlocked
	}
	for _, no := range o.Legs {
		if leg, ok := s.Orders[no]; ok && leg.Status == StatusAccepted {
			s.finish(env, leg, StatusCanceled, legReason)
		}
	}
}
