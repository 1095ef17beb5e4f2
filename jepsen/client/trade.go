package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Market is the part of GET /v1/markets the trading workload needs.
type Market struct {
	MarketID          string `json:"marketId"`
	OracleFeedID      string `json:"oracleFeedId"`
	Status            string `json:"status"`
	TickSizeQ8        string `json:"tickSizeQ8"`
	MinOrderContracts string `json:"minOrderContracts"`
	MaxOrderContracts string `json:"maxOrderContracts"`
	NextFundingTsMs   string `json:"nextFundingTsMs"`
	LastPrice         *struct {
		MidQ8 string `json:"midQ8"`
	} `json:"lastPrice"`
}

// Markets lists the markets (public).
func (c *Client) Markets(ctx context.Context, addr string) (Result, []Market) {
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/markets"})
	if res.Type != "ok" {
		return res, nil
	}
	var ms []Market
	if err := res.Decode(&ms); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, nil
	}
	return res, ms
}

// OrderRequest is the body of POST /v1/orders (the fields the workload
// uses). The idempotency key is the order id.
type OrderRequest struct {
	MarketID       string        `json:"marketId"`
	Side           string        `json:"side"`
	Type           string        `json:"type"`
	Contracts      string        `json:"contracts"`
	ReduceOnly     bool          `json:"reduceOnly"`
	Leverage       *string       `json:"leverage,omitempty"`
	LimitPriceQ8   *string       `json:"limitPriceQ8,omitempty"`
	TriggerPriceQ8 *string       `json:"triggerPriceQ8,omitempty"`
	Trigger        *OrderTrigger `json:"trigger,omitempty"`
	Bracket        *OrderBracket `json:"bracket,omitempty"`
}

// OrderTrigger is the trigger block of a market order: kind entry, stop
// or take_profit, at level.
type OrderTrigger struct {
	Kind  string `json:"kind"`
	Level string `json:"level"`
}

// OrderBracket is the bracket block of a market order. The legs get the
// ids <orderId>.stop and <orderId>.tp.
type OrderBracket struct {
	EntryKind           string  `json:"entryKind"`
	EntryLevel          *string `json:"entryLevel,omitempty"`
	StopLevel           *string `json:"stopLevel,omitempty"`
	TakeProfitLevel     *string `json:"takeProfitLevel,omitempty"`
	StopContracts       *string `json:"stopContracts,omitempty"`
	TakeProfitContracts *string `json:"takeProfitContracts,omitempty"`
}

// Bracket leg ids: the bracket's order id with these suffixes.
const (
	StopLegSuffix       = ".stop"
	TakeProfitLegSuffix = ".tp"
)

// OrderAnswer is the 201 answer of POST /v1/orders.
type OrderAnswer struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
}

// PlaceOrder places an order whose id is idemKey.
func (c *Client) PlaceOrder(ctx context.Context, addr, apiKey, idemKey string, body OrderRequest) (Result, *OrderAnswer) {
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: "/v1/orders",
		Header: map[string]string{"idempotency-key": idemKey, "x-api-key": apiKey}, Body: body, IsWrite: true})
	if res.Type != "ok" {
		return res, nil
	}
	var a OrderAnswer
	if err := res.Decode(&a); err != nil || a.OrderID != idemKey || a.Status == "" {
		return malformed(res, err, "order answer without its orderId or status"), nil
	}
	return res, &a
}

// CancelAnswer is the 200 answer of DELETE /v1/orders/{id}.
type CancelAnswer struct {
	OrderID  string `json:"orderId"`
	Canceled bool   `json:"canceled"`
}

// CancelOrder cancels an order under its own idempotency key.
func (c *Client) CancelOrder(ctx context.Context, addr, apiKey, idemKey, orderID string) (Result, *CancelAnswer) {
	res := c.Do(ctx, Request{Method: http.MethodDelete, Addr: addr, Path: "/v1/orders/" + url.PathEscape(orderID),
		Header: map[string]string{"idempotency-key": idemKey, "x-api-key": apiKey}, IsWrite: true})
	if res.Type != "ok" {
		return res, nil
	}
	var a CancelAnswer
	if err := res.Decode(&a); err != nil || a.OrderID != orderID {
		return malformed(res, err, "cancel answer for another order"), nil
	}
	return res, &a
}

// Balances is GET /v1/account's free and reserved balances.
type Balances struct {
	FreeMsat, ReservedMsat int64
}

// AccountBalances reads free and reserved, not before minIndex.
func (c *Client) AccountBalances(ctx context.Context, addr, apiKey string, minIndex uint64) (Result, *Balances) {
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/account", Header: readHeader(apiKey, minIndex)})
	if res.Type != "ok" {
		return res, nil
	}
	var a AccountAnswer
	if err := res.Decode(&a); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, nil
	}
	free, err1 := strconv.ParseInt(a.FreeMsat, 10, 64)
	reserved, err2 := strconv.ParseInt(a.ReservedMsat, 10, 64)
	if err1 != nil || err2 != nil {
		res.Type, res.Error = "fail", "freeMsat or reservedMsat is not a decimal integer"
		return res, nil
	}
	return res, &Balances{FreeMsat: free, ReservedMsat: reserved}
}

// Position is one record of GET /v1/positions.
type Position struct {
	MarketID   string `json:"marketId"`
	Side       string `json:"side"`
	Contracts  string `json:"contracts"`
	MarginMsat string `json:"marginMsat"`
}

// Positions lists the account's open positions, not before minIndex.
func (c *Client) Positions(ctx context.Context, addr, apiKey string, minIndex uint64) (Result, []Position) {
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/positions", Header: readHeader(apiKey, minIndex)})
	if res.Type != "ok" {
		return res, nil
	}
	var ps []Position
	if err := res.Decode(&ps); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, nil
	}
	return res, ps
}

// Fill is one record of GET /v1/fills (the fields the checkers use).
type Fill struct {
	OrderID         string `json:"orderId"`
	MarketID        string `json:"marketId"`
	Side            string `json:"side"`
	ClosedContracts string `json:"closedContracts"`
	OpenedContracts string `json:"openedContracts"`
	FeeMsat         string `json:"feeMsat"`
	RealizedPnlMsat string `json:"realizedPnlMsat"`
	DeficitMsat     string `json:"deficitMsat"`
	// FundingSettledMsat is always 0 (funding settles at boundaries).
	FundingSettledMsat string `json:"fundingSettledMsat"`
	// PositionAfter is the position the fill left (null: flat).
	PositionAfter *PositionAfter `json:"positionAfter"`
	Seq           string         `json:"seq"`
	TsMs          string         `json:"tsMs"`
}

// PositionAfter is a fill's positionAfter.
type PositionAfter struct {
	Side       string `json:"side"`
	Contracts  string `json:"contracts"`
	MarginMsat string `json:"marginMsat"`
}

// FillsPage is the body of GET /v1/fills.
type FillsPage struct {
	Fills         []Fill  `json:"fills"`
	NextBeforeSeq *string `json:"nextBeforeSeq"`
}

// Fills reads one page of fills, newest first, not before minIndex.
func (c *Client) Fills(ctx context.Context, addr, apiKey, beforeSeq string, limit int, minIndex uint64) (Result, *FillsPage) {
	var p FillsPage
	return c.page(ctx, addr, apiKey, "/v1/fills", beforeSeq, limit, minIndex, &p), &p
}

// Liquidation is one record of GET /v1/liquidations (SPEC's
// Liquidation; the fields the checkers use). RemainderMsat is set for full
// liquidations only.
type Liquidation struct {
	PositionID           string  `json:"positionId"`
	MarketID             string  `json:"marketId"`
	Side                 string  `json:"side"`
	ClosedContracts      string  `json:"closedContracts"`
	Partial              bool    `json:"partial"`
	ExecPriceQ8          string  `json:"execPriceQ8"`
	RealizedPnlMsat      string  `json:"realizedPnlMsat"`
	FundingSettledMsat   string  `json:"fundingSettledMsat"`
	PenaltyMsat          string  `json:"penaltyMsat"`
	RemainderMsat        *string `json:"remainderMsat"`
	DeficitMsat          string  `json:"deficitMsat"`
	InsuranceCoveredMsat string  `json:"insuranceCoveredMsat"`
	ADLTriggered         bool    `json:"adlTriggered"`
	RemainingContracts   string  `json:"remainingContracts"`
	RemainingMarginMsat  string  `json:"remainingMarginMsat"`
	Seq                  string  `json:"seq"`
	TsMs                 string  `json:"tsMs"`
}

// LiquidationsPage is the body of GET /v1/liquidations.
type LiquidationsPage struct {
	Liquidations  []Liquidation `json:"liquidations"`
	NextBeforeSeq *string       `json:"nextBeforeSeq"`
}

// Liquidations reads one page of liquidations, newest first, not before
// minIndex.
func (c *Client) Liquidations(ctx context.Context, addr, apiKey, beforeSeq string, limit int, minIndex uint64) (Result, *LiquidationsPage) {
	var p LiquidationsPage
	return c.page(ctx, addr, apiKey, "/v1/liquidations", beforeSeq, limit, minIndex, &p), &p
}

// FundingFlow is one record of GET /v1/funding (SPEC's Funding flow).
type FundingFlow struct {
	Seq          string `json:"seq"`
	BoundaryTsMs string `json:"boundaryTsMs"`
	MarketID     string `json:"marketId"`
	RateQ9       string `json:"rateQ9"`
	FlowMsat     string `json:"flowMsat"`
	PaidMsat     string `json:"paidMsat"`
	PositionID   string `json:"positionId"`
}

// FundingPage is the body of GET /v1/funding.
type FundingPage struct {
	Funding       []FundingFlow `json:"funding"`
	NextBeforeSeq *string       `json:"nextBeforeSeq"`
}

// Funding reads one page of funding flows, newest first, not before
// minIndex.
func (c *Client) Funding(ctx context.Context, addr, apiKey, beforeSeq string, limit int, minIndex uint64) (Result, *FundingPage) {
	var p FundingPage
	return c.page(ctx, addr, apiKey, "/v1/funding", beforeSeq, limit, minIndex, &p), &p
}

// Order is one record of GET /v1/orders.
type Order struct {
	OrderID   string  `json:"orderId"`
	MarketID  string  `json:"marketId"`
	Side      string  `json:"side"`
	Type      string  `json:"type"`
	Contracts string  `json:"contracts"`
	Status    string  `json:"status"`
	Reason    *string `json:"reason"`
}

// OrdersPage is the body of GET /v1/orders.
type OrdersPage struct {
	Orders        []Order `json:"orders"`
	NextBeforeSeq *string `json:"nextBeforeSeq"`
}

// Orders reads one page of orders, newest change first, not before
// minIndex; status keeps only that status (empty: all).
func (c *Client) Orders(ctx context.Context, addr, apiKey, status, beforeSeq string, limit int, minIndex uint64) (Result, *OrdersPage) {
	path := "/v1/orders"
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	var p OrdersPage
	return c.page(ctx, addr, apiKey, path, beforeSeq, limit, minIndex, &p), &p
}

// Trigger is one record of the triggers page (SPEC's trigger view).
type Trigger struct {
	OrderID        string  `json:"orderId"`
	MarketID       string  `json:"marketId"`
	Kind           string  `json:"kind"`
	Side           string  `json:"side"`
	Contracts      string  `json:"contracts"`
	TriggerPriceQ8 string  `json:"triggerPriceQ8"`
	ReduceOnly     bool    `json:"reduceOnly"`
	Status         string  `json:"status"`
	Reason         *string `json:"reason"`
	OCOGroup       *string `json:"ocoGroup"`
}

// TriggersPage is the body of GET /v1/orders?state=...
type TriggersPage struct {
	Triggers      []Trigger `json:"triggers"`
	NextBeforeSeq *string   `json:"nextBeforeSeq"`
}

// Triggers reads one page of the live triggers in state (resting or
// armed), newest change first, not before minIndex.
func (c *Client) Triggers(ctx context.Context, addr, apiKey, state, beforeSeq string, limit int, minIndex uint64) (Result, *TriggersPage) {
	var p TriggersPage
	return c.page(ctx, addr, apiKey, "/v1/orders?state="+url.QueryEscape(state), beforeSeq, limit, minIndex, &p), &p
}

// page reads one cursor page into out; on anything but ok, out is unset
// and the result says why.
func (c *Client) page(ctx context.Context, addr, apiKey, path, beforeSeq string, limit int, minIndex uint64, out any) Result {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(limit))
	if beforeSeq != "" {
		q.Set("beforeSeq", beforeSeq)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: path + sep + q.Encode(), Header: readHeader(apiKey, minIndex)})
	if res.Type != "ok" {
		return res
	}
	if err := res.Decode(out); err != nil {
		res.Type, res.Error = "fail", err.Error()
	}
	return res
}

func readHeader(apiKey string, minIndex uint64) map[string]string {
	h := map[string]string{"x-api-key": apiKey}
	if minIndex > 0 {
		h[HeaderMinIndex] = strconv.FormatUint(minIndex, 10)
	}
	return h
}

// CancelAfterRequest is the body of POST /v1/cancel-all-after.
type CancelAfterRequest struct {
	TimeoutMs string `json:"timeoutMs"`
}

// CancelAfterAnswer is the 200 answer of POST /v1/cancel-all-after.
// DeadlineTsMs is in log time, nil when disarmed.
type CancelAfterAnswer struct {
	Armed        bool
	DeadlineTsMs *int64
}

// CancelAllAfter arms or refreshes (timeoutMs > 0) or disarms (0) the
// account's dead-man switch. An answer that contradicts the request
// (armed without a deadline, say) is returned as is: judging it is the
// checker's work.
func (c *Client) CancelAllAfter(ctx context.Context, addr, apiKey, idemKey string, timeoutMs int64) (Result, *CancelAfterAnswer) {
	res := c.Do(ctx, Request{Method: http.MethodPost, Addr: addr, Path: "/v1/cancel-all-after",
		Header: map[string]string{"idempotency-key": idemKey, "x-api-key": apiKey},
		Body:   CancelAfterRequest{TimeoutMs: strconv.FormatInt(timeoutMs, 10)}, IsWrite: true})
	if res.Type != "ok" {
		return res, nil
	}
	var raw struct {
		Armed        *bool   `json:"armed"`
		DeadlineTsMs *string `json:"deadlineTsMs"`
	}
	if err := res.Decode(&raw); err != nil || raw.Armed == nil {
		return malformed(res, err, "cancel-all-after answer without armed"), nil
	}
	a := &CancelAfterAnswer{Armed: *raw.Armed}
	if raw.DeadlineTsMs != nil {
		d, err := strconv.ParseInt(*raw.DeadlineTsMs, 10, 64)
		if err != nil {
			return malformed(res, err, ""), nil
		}
		a.DeadlineTsMs = &d
	}
	return res, a
}

// FundingBoundary is one record of GET /v1/markets/{id}/funding.
type FundingBoundary struct {
	TsMs   string `json:"tsMs"`
	RateQ9 string `json:"rateQ9"`
}

// MarketFunding reads a market's funding history (its last 100
// boundaries, oldest first), not before minIndex.
func (c *Client) MarketFunding(ctx context.Context, addr, marketID string, minIndex uint64) (Result, []FundingBoundary) {
	h := map[string]string{}
	if minIndex > 0 {
		h[HeaderMinIndex] = strconv.FormatUint(minIndex, 10)
	}
	res := c.Do(ctx, Request{Method: http.MethodGet, Addr: addr, Path: "/v1/markets/" + url.PathEscape(marketID) + "/funding", Header: h})
	if res.Type != "ok" {
		return res, nil
	}
	var bs []FundingBoundary
	if err := res.Decode(&bs); err != nil {
		res.Type, res.Error = "fail", err.Error()
		return res, nil
	}
	return res, bs
}
