package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Orders, positions and fills (SPEC sections 2 and 4). The state machine
// (fsm/trade) decides every trading rule, including which combinations of
// type, triggerPriceQ8, trigger and bracket make sense; these handlers
// decode, turn a request into a command or a read, and answer.

func init() { routeSets = append(routeSets, (*Server).orderRoutes) }

// OrderTrigger is the trigger block of an order request.
type OrderTrigger struct {
	Kind  string   `json:"kind" req:"true" enum:"entry,stop,take_profit"`
	Level wire.Int `json:"level" req:"true" unit:"q8" min:"1"`
}

// OrderBracket is the bracket block of an order request.
type OrderBracket struct {
	EntryKind           string    `json:"entryKind" req:"true" enum:"market,trigger"`
	EntryLevel          *wire.Int `json:"entryLevel" unit:"q8" min:"1"`
	StopLevel           *wire.Int `json:"stopLevel" unit:"q8" min:"1"`
	TakeProfitLevel     *wire.Int `json:"takeProfitLevel" unit:"q8" min:"1"`
	StopContracts       *wire.Int `json:"stopContracts" unit:"contracts" min:"1"`
	TakeProfitContracts *wire.Int `json:"takeProfitContracts" unit:"contracts" min:"1"`
}

// OrderRequest is the body of POST /v1/orders. The idempotency-key is the
// order id.
type OrderRequest struct {
	MarketID       string        `json:"marketId" req:"true" maxLen:"32"`
	Side           string        `json:"side" req:"true" enum:"buy,sell"`
	Type           string        `json:"type" req:"true" enum:"market,limit,stop_market,take_profit_market"`
	Contracts      wire.Int      `json:"contracts" req:"true" unit:"contracts" min:"1"`
	ReduceOnly     bool          `json:"reduceOnly" req:"true" doc:"true: the order may only reduce the position; never increases or flips it"`
	LimitPriceQ8   *wire.Int     `json:"limitPriceQ8" unit:"q8" min:"1" doc:"required for limit orders; a multiple of tickSizeQ8"`
	TriggerPriceQ8 *wire.Int     `json:"triggerPriceQ8" unit:"q8" min:"1" doc:"required for stop_market and take_profit_market: the oracle mid that fires it (a stop buys on a rise and sells on a fall; a take-profit the other way); a multiple of tickSizeQ8"`
	Leverage       *wire.Int     `json:"leverage" unit:"int" min:"1" doc:"margin the opened contracts take: notional / leverage (at least the market's imRateQ9); 1 to maxLeverage, default maxLeverage. Isolated: a position's margin is what its fills put in. A fill that opens contracts and would leave the position under maintenance at the mid (spread and impact beyond what initial margin holds above it) is refused insufficient_margin: the order with 400, a resting limit is canceled and a trigger blocked with that reason"`
	MaxSlippageQ9  *wire.Int     `json:"maxSlippageQ9" unit:"q9" min:"0" max:"999999999" doc:"refuse rather than fill worse than the oracle mid by more than this fraction (a trigger that fires beyond it is blocked with reason slippage; a limit order waits). A limit order's bound below the market's baseSpreadQ9 could never fill and is refused, 400 validation"`
	Trigger        *OrderTrigger `json:"trigger" doc:"with type market: a trigger that executes the order when the mid reaches level; entry fires toward the level from the current mid"`
	Bracket        *OrderBracket `json:"bracket" doc:"with type market: an entry (market now, or a trigger at entryLevel) plus reduce-only stop and take-profit legs in one OCO group named by the order id; legs have ids <orderId>.stop and <orderId>.tp and cover the entry's contracts (or stopContracts, takeProfitContracts), at most what the entry opens: one that first closes an opposite position opens less"`
}

// OrdersQuery is the query of GET /v1/orders. status may repeat.
type OrdersQuery struct {
	State     *string   `json:"state" enum:"resting,armed" doc:"answers the triggers page: live triggers in this state (resting: bracket legs waiting for their entry; armed: in the price index). A resting limit order is no trigger: the orders page lists it with status accepted"`
	Status    *string   `json:"status" enum:"accepted,filled,canceled,rejected" repeat:"true" doc:"repeatable; keeps only these statuses"`
	Limit     *wire.Int `json:"limit" unit:"int" min:"1" max:"200" doc:"page size: 1 to 200, default 50"`
	BeforeSeq *wire.Int `json:"beforeSeq" unit:"seq" min:"1" doc:"only orders whose latest change has a seq below this (the previous page's nextBeforeSeq); omit for the newest"`
}

// CreatedOrder is the 201 answer of POST /v1/orders.
type CreatedOrder struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status" enum:"accepted,filled,canceled,rejected,resting,working"`
}

func (s *Server) orderRoutes() []*Route {
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/orders", Summary: "Place an order; the idempotency-key is the order id",
			Auth: Keyed, Scope: "trade", Budget: "order", Idem: true, Request: OrderRequest{}, Routine: true, Refuses400: true,
			Responses: map[int]any{201: CreatedOrder{}, 400: wire.ErrorBody{}},
			Refuses: map[int][]string{400: {wire.CodeInsufficientBalance, wire.CodeInsufficientMargin, wire.CodeMarketHalted,
				wire.CodeOICap, wire.CodeOracleStale, wire.CodePositionLimit, wire.CodeReduceOnly}},
			IdemRetry: idemReplay + " The key is the order id: after the 24 hours the same key and body answers 201 with the order's " +
				"current status for as long as the order is kept (every live order, and the newest 1000 closed ones of the account), " +
				"and places nothing.",
			Handler: s.placeOrder},
		{Method: http.MethodGet, Path: "/v1/orders", Summary: "Orders, newest change first; with state, the triggers page",
			Auth: Keyed, Scope: "read", Budget: "read", Query: OrdersQuery{},
			Responses: map[int]any{200: oneOf{trade.OrdersPage{}, trade.TriggersPage{}}, 400: wire.ErrorBody{}}, Handler: s.orders},
		{Method: http.MethodGet, Path: "/v1/orders/:id", Summary: "One order's status",
			Auth: Keyed, Scope: "read", Budget: "read",
			Responses: map[int]any{200: trade.OrderView{}, 404: wire.ErrorBody{}}, Handler: s.order},
		{Method: http.MethodDelete, Path: "/v1/orders/:id", Summary: "Cancel an order, a trigger or a whole bracket (by its id)",
			Auth: Keyed, Scope: "trade", Budget: "order", Idem: true, IdemOwnNamespace: true, Routine: true,
			Responses: map[int]any{200: fsm.CancelResult{}, 404: wire.ErrorBody{}}, Handler: s.cancelOrder},
		{Method: http.MethodGet, Path: "/v1/positions", Summary: "Open positions, with their liquidation price",
			Auth: Keyed, Scope: "read", Budget: "read",
			Responses: map[int]any{200: []trade.PositionView{}}, Handler: s.positions},
		{Method: http.MethodGet, Path: "/v1/fills", Summary: "Fills, newest first",
			Auth: Keyed, Scope: "read", Budget: "read", Query: PageQuery{},
			Responses: map[int]any{200: trade.FillsPage{}}, Handler: s.fills},
	}
}

func (s *Server) placeOrder(c *gin.Context) {
	var req OrderRequest
	if !s.decode(c, &req) {
		return
	}
	key, _ := idemKeyOf(c)
	p := trade.PlaceRequest{OrderID: key, MarketID: req.MarketID, Side: req.Side, Type: req.Type,
		Contracts: int64(req.Contracts), ReduceOnly: req.ReduceOnly,
		LimitPriceQ8: intOr0(req.LimitPriceQ8), TriggerPriceQ8: intOr0(req.TriggerPriceQ8), Leverage: intOr0(req.Leverage)}
	if req.MaxSlippageQ9 != nil {
		p.HasMaxSlippage, p.MaxSlippageQ9 = true, int64(*req.MaxSlippageQ9)
	}
	if t := req.Trigger; t != nil {
		p.TriggerKind, p.TriggerLevelQ8 = t.Kind, int64(t.Level)
	}
	if b := req.Bracket; b != nil {
		p.Bracket = &trade.BracketRequest{EntryKind: b.EntryKind, EntryLevelQ8: intOr0(b.EntryLevel),
			StopLevelQ8: intOr0(b.StopLevel), TakeProfitLevelQ8: intOr0(b.TakeProfitLevel),
			StopContracts: intOr0(b.StopContracts), TakeProfitContracts: intOr0(b.TakeProfitContracts)}
	}
	// By pointer: req is on the heap already (decode), and requestHash
	// writes an *OrderRequest's canonical JSON itself.
	res, ok := s.submit(c, fsm.CmdPlaceOrder, p, &req)
	if !ok {
		return
	}
	respond(c, res)
}

// cancelOrder cancels by id. The request hash covers the order id (the
// actual path, not the route template), and cancels keep their own
// idempotency scope, so a client may use an order's id as the key of its
// cancel, and a key reused for another order's cancel is refused.
// maxOrderIDLen is the longest id an order, trigger or bracket leg can
// have: an order's id is its idempotency key, a leg's that plus a suffix.
var maxOrderIDLen = MaxIdemKeyLen + max(len(trade.StopLegSuffix), len(trade.TakeProfitLegSuffix))

// possibleOrderID reports whether some order could have id: at most
// maxOrderIDLen printable ASCII characters without spaces, as
// idempotency keys are.
func possibleOrderID(id string) bool {
	if id == "" || len(id) > maxOrderIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func (s *Server) cancelOrder(c *gin.Context) {
	// An id no order can have is unknown without asking the log: the path
	// is bounded only by the request line, and each cancel that reaches
	// the state machine is a log entry carrying it (load review of
	// 2026-11-27: 30 KB ids, one entry each).
	if !possibleOrderID(c.Param("id")) {
		notFound(c, "order")
		return
	}
	p := fsm.CancelOrderPayload{OrderID: c.Param("id")}
	cmd, err := s.command(c, fsm.CmdCancelOrder, p, p)
	if err != nil {
		unavailable(c, err.Error())
		return
	}
	cmd.IdemKey = "cancel:" + cmd.IdemKey
	res, ok := s.propose(c, cmd)
	if !ok {
		return
	}
	respond(c, res)
}

func (s *Server) orders(c *gin.Context) {
	var q OrdersQuery
	if err := decodeQuery(c, &q); err != nil {
		invalid(c, err.Error())
		return
	}
	// decodeQuery reads the last value of a repeated parameter; status is
	// repeatable, so every value is checked here.
	statuses := c.QueryArray("status")
	for _, st := range statuses {
		switch st {
		case trade.StatusAccepted, trade.StatusFilled, trade.StatusCanceled, trade.StatusRejected:
		default:
			invalid(c, "query status: must be one of accepted, filled, canceled, rejected")
			return
		}
	}
	limit, before := PageLimitDefault, uint64(0)
	if q.Limit != nil {
		limit = int(*q.Limit)
	}
	if q.BeforeSeq != nil {
		before = uint64(*q.BeforeSeq)
	}
	acct := callerOf(c).AccountID
	if q.State != nil {
		if len(statuses) > 0 {
			invalid(c, "query: state (the triggers page) and status (the orders page) do not combine")
			return
		}
		var page trade.TriggersPage
		s.Node.Machine().Read(func(st *fsm.State, _ uint64) { page = st.Trade.TriggersPage(acct, *q.State, before, limit) })
		c.JSON(http.StatusOK, page)
		return
	}
	var page trade.OrdersPage
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { page = st.Trade.OrdersPage(acct, statuses, before, limit) })
	c.JSON(http.StatusOK, page)
}

// order answers one order; another account's order is as unknown as one
// that never existed.
func (s *Server) order(c *gin.Context) {
	acct := callerOf(c).AccountID
	var v *trade.OrderView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		if o, ok := st.Trade.Order(acct, c.Param("id")); ok {
			ov := trade.NewOrderView(o)
			v = &ov
		}
	})
	if v == nil {
		notFound(c, "order")
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) positions(c *gin.Context) {
	acct := callerOf(c).AccountID
	var out []trade.PositionView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) { out = st.Trade.Positions(acct, st.Market) })
	c.JSON(http.StatusOK, out)
}

func (s *Server) fills(c *gin.Context) {
	s.accountPage(c, func(st *fsm.State, acct string, before uint64, limit int) any {
		return st.Trade.Fills(acct, before, limit)
	})
}

// intOr0 is an optional integer's value, 0 when absent (every such field
// has a minimum of 1, so 0 means "not given" on the command).
func intOr0(v *wire.Int) int64 {
	if v == nil {
		return 0
	}
	return int64(*v)
}
