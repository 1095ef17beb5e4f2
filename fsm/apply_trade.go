package fsm

import (
	"net/http"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Trading: command types 80-99.
const (
	CmdPlaceOrder  CmdType = 80 // a trader places a market or limit order
	CmdCancelOrder CmdType = 81 // a trader cancels a resting order
	// 82: CmdCancelAllAfter, in apply_cancelafter.go.
)

func init() {
	register(CmdPlaceOrder, applyPlaceOrder)
	register(CmdCancelOrder, applyCancelOrder)
	fillHooks = append(fillHooks, func(s *State) {
		if s.Trade == nil {
			s.Trade = trade.NewState()
		}
		s.Trade.FillNil()
	})
	fundingHooks = append(fundingHooks, func(c *Ctx, ev market.FundingEvent) {
		c.St.Trade.OnFunding(c.tradeEnv(), ev)
	})
	paramsHooks = append(paramsHooks, func(c *Ctx, marketID string) {
		c.St.Trade.OnParams(c.tradeEnv(), marketID)
	})
	printHooks = append(printHooks, func(c *Ctx, marketID string) {
		c.St.Trade.OnPrint(c.tradeEnv(), marketID)
	})
	// What an act on a book left at its budget (trade.LevelBookBudget)
	// goes on at the next entries that advance log time, a tick a second
	// when nothing else comes; BooksBehind is empty below that level.
	registerTimer(func(c *Ctx) { c.St.Trade.ContinueBooks(c.tradeEnv()) })
	invariantChecks = append(invariantChecks, func(st *State) error {
		return st.Trade.CheckInvariants(st.Ledger, st.Market, false, st.NowMs)
	})
}

// tradeEnv hands the trading book the ledger, the markets, the entry's
// time, the shared seq space and the entry's event queue. Its functions
// are bound once per Ctx and read the Ctx when called, so an order does
// not pay for fresh closures (a Machine reuses its Ctx for every entry).
func (c *Ctx) tradeEnv() *trade.Env {
	env := &c.tenv
	if env.Emit == nil {
		env.NextSeq, env.Emit, env.FeeSplit, env.Reserve = c.nextSeq, c.emitTrade, c.feeSplit, c.reserveEvents
	}
	env.Ledger, env.Market, env.NowMs, env.Level = c.St.Ledger, c.St.Market, c.Now(), c.St.FeatureLevel
	return env
}

// Other domains take part in trading: the referral programme splits fees
// (tradeFeeSplit) and the leaderboards watch fills, funding flows and
// liquidations (tradeEventHooks); apply_growth.go sets both at init.
var (
	tradeFeeSplit   func(c *Ctx, f *trade.Fill) *trade.Referral
	tradeEventHooks []func(c *Ctx, accountID string, data any)
)

func (c *Ctx) nextSeq() uint64 { return c.St.NextSeq() }

// emitTrade queues a trading event, then shows it to the hooks.
func (c *Ctx) emitTrade(kind, accountID string, seq uint64, data any) {
	c.Emit(Event{Seq: seq, Kind: kind, Account: accountID, Data: data})
	for _, h := range tradeEventHooks {
		h(c, accountID, data)
	}
}

// feeSplit is trade.Env.FeeSplit: nil (no referral block) without a
// programme to split the fee.
func (c *Ctx) feeSplit(f *trade.Fill) *trade.Referral {
	if tradeFeeSplit == nil {
		return nil
	}
	return tradeFeeSplit(c, f)
}

// applyPlaceOrder places an order (scope trade). The order id is the
// client's idempotency key; a late retry of the same order, after the
// idempotency store forgot it, answers the order's current status. The
// market must be open (checkMarketOpen) before the book looks at it.
func applyPlaceOrder(c *Ctx) (int, any, *wire.Refusal) {
	var p trade.PlaceRequest
	if ref := c.decodePlace(&p); ref != nil {
		return 0, nil, ref
	}
	key, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade)
	if ref != nil {
		return 0, nil, ref
	}
	// The trading account is looked up once and carried through.
	acct := c.St.Trade.Account(c.Cmd.Account)
	prior, used, ref := c.St.Trade.PriorIn(acct, p.OrderID, c.Cmd.ReqHash)
	if ref != nil {
		return 0, nil, ref
	}
	if used {
		return http.StatusCreated, c.answerCreated(prior), nil
	}
	if ref := checkMarketOpen(c.St, p.MarketID, c.Now()); ref != nil {
		return 0, nil, ref
	}
	created, ref := c.St.Trade.PlaceIn(c.tradeEnv(), acct, c.Cmd.Account, p, c.Cmd.ReqHash)
	if ref != nil {
		return 0, nil, ref
	}
	key.Touch(c.Now())
	return http.StatusCreated, c.answerCreated(created), nil
}

// answerCreated hands an order's answer to okResult by a pointer into
// the Ctx: a trade.Created in the handler's any would be an allocation,
// and okResult writes this one without reflection.
func (c *Ctx) answerCreated(v trade.Created) *trade.Created {
	c.created = v
	return &c.created
}

// decodePlace is Decode for an order, the canonical form without
// reflection and, for the order and market ids, without allocating
// (fastdecode.go). Unmarshal gets a copy on the heap, so that p
// can stay on the caller's stack.
func (c *Ctx) decodePlace(p *trade.PlaceRequest) *wire.Refusal {
	if decodePlaceShared(c.Cmd.Payload, p, c.Cmd.IdemKey, c.St.Market) {
		return nil
	}
	q := new(trade.PlaceRequest)
	if ref := c.Decode(q); ref != nil {
		return ref
	}
	*p = *q
	return nil
}

// CancelOrderPayload names the order to cancel.
type CancelOrderPayload struct {
	OrderID string `cbor:"1,keyasint"`
}

// CancelResult is SPEC's answer to DELETE /v1/orders/{id}.
type CancelResult struct {
	OrderID  string `json:"orderId"`
	Canceled bool   `json:"canceled"`
}

// applyCancelOrder cancels a resting order (scope trade), releasing its
// reservation. An order that already filled or was canceled answers
// canceled false; an unknown id, and another account's order alike, is
// not_found.
func applyCancelOrder(c *Ctx) (int, any, *wire.Refusal) {
	var p CancelOrderPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	key, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade)
	if ref != nil {
		return 0, nil, ref
	}
	found, canceled := c.St.Trade.Cancel(c.tradeEnv(), c.Cmd.Account, p.OrderID)
	if !found {
		return 0, nil, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "order %q not found", p.OrderID)
	}
	key.Touch(c.Now())
	return http.StatusOK, CancelResult{OrderID: p.OrderID, Canceled: canceled}, nil
}
