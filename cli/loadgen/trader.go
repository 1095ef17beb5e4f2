package loadgen

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/perpd/perpd/fsm/wire"
)

// Trader behaviour bounds.
const (
	// Leverage of every order: far from the 100x maximum, so the small
	// positions a trader holds survive the price path without liquidation.
	Leverage = 10
	// MaxContracts is the largest market order: 1 to this many contracts.
	MaxContracts = 3
	// RestingMax bounds a trader's own resting orders (the venue allows
	// 200 per account): at the bound a drawn limit order cancels the
	// oldest one instead, so a long run never hits the venue's cap.
	RestingMax = 100
	// marketsEvery is how many operations a trader runs between two reads
	// of GET /v1/markets (its view of mids and ticks).
	marketsEvery = 50
	// limitAwayMinBps..limitAwayMaxBps is how far from the mid a limit
	// order rests (2% to 5%): near enough to be a real book, far enough
	// that it rarely fills during a run.
	limitAwayMinBps = 200
	limitAwayMaxBps = 500
	// failPause is the pause after a failure that is not a 429 (a node
	// down answers at once; without it a trader would spin).
	failPause = 100 * time.Millisecond
)

// market is what a trader knows of one market.
type market struct {
	id       string
	tickQ8   int64
	minC     int64
	maxC     int64
	midQ8    int64
	hasPrice bool
}

// marketView is the part of GET /v1/markets a trader reads.
type marketView struct {
	MarketID          string   `json:"marketId"`
	Status            string   `json:"status"`
	TickSizeQ8        wire.Int `json:"tickSizeQ8"`
	MinOrderContracts wire.Int `json:"minOrderContracts"`
	MaxOrderContracts wire.Int `json:"maxOrderContracts"`
	LastPrice         *struct {
		MidQ8 wire.Int `json:"midQ8"`
	} `json:"lastPrice"`
}

// trader is one simulated account. It runs on one goroutine.
type trader struct {
	id   int
	base string
	key  string
	rng  *rand.Rand
	cl   *client
	mix  Mix
	// markets is the last view of the live markets; sinceMarkets counts
	// the operations run since it was read.
	markets      []market
	sinceMarkets int
	// resting are the trader's own resting limit orders, oldest first.
	resting []string
	// long is, per market, the contracts a filled market buy opened that
	// the next market order on it sells back: positions stay small.
	long map[string]int64
}

func newTrader(id int, base string, seed uint64, cl *client, mix Mix) *trader {
	return &trader{id: id, base: base, rng: rand.New(rand.NewPCG(seed, uint64(id))), cl: cl, mix: mix, long: map[string]int64{}}
}

// wait sleeps d, or until the deadline or the end of ctx.
func wait(ctx context.Context, d time.Duration, deadline time.Time) {
	if left := time.Until(deadline); d > left {
		d = left
	}
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// pause backs off after a failed attempt: a 429's Retry-After, or
// failPause after any other failure.
func pause(ctx context.Context, o outcome, deadline time.Time) {
	switch {
	case o.ok || o.aborted:
	case o.retryAfter > 0:
		wait(ctx, o.retryAfter, deadline)
	default:
		wait(ctx, failPause, deadline)
	}
}

// setup signs the trader up and takes one faucet grant, retrying what may
// pass later (429 after its Retry-After, transport errors, 5xx) until the
// deadline. It reports whether the trader is ready to trade. The faucet's
// retries repeat its idempotency-key, so a grant that applied unseen is
// answered, not granted again; a signup's take a fresh one, since a
// replayed signup never returns the account's key (it answers 409).
func (t *trader) setup(ctx context.Context, deadline time.Time) bool {
	var signedUp struct {
		APIKey string `json:"apiKey"`
	}
	if !t.retry(ctx, deadline, call{op: OpSignup, method: http.MethodPost, base: t.base, path: "/v1/signup", write: true, body: struct{}{}}, &signedUp) {
		return false
	}
	t.key = signedUp.APIKey
	return t.retry(ctx, deadline, call{op: OpFaucet, method: http.MethodPost, base: t.base, path: "/v1/faucet", key: t.key,
		write: true, idem: newIdemKey(), body: struct{}{}}, nil)
}

// retry repeats c until it succeeds, is refused for good, or the deadline.
func (t *trader) retry(ctx context.Context, deadline time.Time, c call, out any) bool {
	for ctx.Err() == nil && time.Now().Before(deadline) {
		o := t.cl.do(ctx, c, out)
		if o.ok {
			return true
		}
		if !retryable(o.code) {
			return false
		}
		pause(ctx, o, deadline)
	}
	return false
}

// retryable: refusals that may pass if asked again later.
func retryable(code string) bool {
	switch code {
	case wire.CodeRateLimited, wire.CodeUnavailable, CodeTransport:
		return true
	}
	return len(code) == len("http_5xx") && code[:6] == "http_5"
}

// run loops the mix until the deadline.
func (t *trader) run(ctx context.Context, deadline time.Time) {
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var o outcome
		if len(t.markets) == 0 || t.sinceMarkets >= marketsEvery {
			if o = t.readMarkets(ctx); o.ok && len(t.markets) == 0 {
				wait(ctx, failPause, deadline) // no live, priced market yet
			}
		} else {
			t.sinceMarkets++
			o = t.step(ctx, t.mix.pick(t.rng))
		}
		pause(ctx, o, deadline)
	}
}

// step runs one operation of the mix.
func (t *trader) step(ctx context.Context, op string) outcome {
	switch op {
	case OpMarket:
		return t.marketOrder(ctx)
	case OpLimit:
		if len(t.resting) >= RestingMax {
			return t.cancel(ctx, 0)
		}
		return t.limitOrder(ctx)
	case OpCancel:
		if len(t.resting) == 0 {
			return t.limitOrder(ctx)
		}
		return t.cancel(ctx, t.rng.IntN(len(t.resting)))
	case OpRead:
		paths := [...]string{"/v1/positions", "/v1/fills", "/v1/account"}
		return t.cl.do(ctx, call{op: OpRead, method: http.MethodGet, base: t.base, path: paths[t.rng.IntN(len(paths))], key: t.key}, nil)
	}
	panic("loadgen: unknown operation " + op)
}

// readMarkets refreshes the trader's view of the live, priced markets.
func (t *trader) readMarkets(ctx context.Context) outcome {
	var views []marketView
	o := t.cl.do(ctx, call{op: OpMarkets, method: http.MethodGet, base: t.base, path: "/v1/markets"}, &views)
	if !o.ok {
		return o
	}
	t.sinceMarkets = 0
	t.markets = t.markets[:0]
	for _, v := range views {
		if v.Status != "live" || v.LastPrice == nil || v.TickSizeQ8 <= 0 || v.LastPrice.MidQ8 <= 0 {
			continue
		}
		t.markets = append(t.markets, market{id: v.MarketID, tickQ8: int64(v.TickSizeQ8), minC: int64(v.MinOrderContracts),
			maxC: int64(v.MaxOrderContracts), midQ8: int64(v.LastPrice.MidQ8), hasPrice: true})
	}
	return o
}

// orderBody is the body of POST /v1/orders as the traders send it.
type orderBody struct {
	MarketID     string    `json:"marketId"`
	Side         string    `json:"side"`
	Type         string    `json:"type"`
	Contracts    wire.Int  `json:"contracts"`
	ReduceOnly   bool      `json:"reduceOnly"`
	LimitPriceQ8 *wire.Int `json:"limitPriceQ8,omitempty"`
	Leverage     wire.Int  `json:"leverage"`
}

// created is the 201 answer of POST /v1/orders.
type created struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
}

// contracts draws an order size from 1 to MaxContracts, within the
// market's bounds.
func (t *trader) contracts(m market) int64 {
	c := 1 + t.rng.Int64N(MaxContracts)
	return min(max(c, m.minC), max(m.maxC, m.minC))
}

// marketOrder buys a few contracts of a random market, or sells back
// what the last buy there opened.
func (t *trader) marketOrder(ctx context.Context) outcome {
	m := t.markets[t.rng.IntN(len(t.markets))]
	body := orderBody{MarketID: m.id, Type: "market", Leverage: Leverage}
	if open := t.long[m.id]; open > 0 {
		body.Side, body.Contracts = "sell", wire.Int(open)
	} else {
		body.Side, body.Contracts = "buy", wire.Int(t.contracts(m))
	}
	var res created
	o := t.cl.do(ctx, call{op: OpMarket, method: http.MethodPost, base: t.base, path: "/v1/orders", key: t.key, write: true, body: body}, &res)
	if o.ok && res.Status == "filled" {
		if body.Side == "buy" {
			t.long[m.id] = int64(body.Contracts)
		} else {
			delete(t.long, m.id)
		}
	}
	return o
}

// limitOrder rests one contract 2-5% away from the mid: below it to buy,
// above it to sell, on the market's tick.
func (t *trader) limitOrder(ctx context.Context) outcome {
	m := t.markets[t.rng.IntN(len(t.markets))]
	side := "buy"
	if t.rng.IntN(2) == 1 {
		side = "sell"
	}
	bps := int64(limitAwayMinBps) + t.rng.Int64N(limitAwayMaxBps-limitAwayMinBps+1)
	price := LimitPrice(m.midQ8, m.tickQ8, bps, side == "buy")
	body := orderBody{MarketID: m.id, Side: side, Type: "limit", Contracts: wire.Int(max(m.minC, 1)),
		LimitPriceQ8: &price, Leverage: Leverage}
	var res created
	o := t.cl.do(ctx, call{op: OpLimit, method: http.MethodPost, base: t.base, path: "/v1/orders", key: t.key, write: true, body: body}, &res)
	if o.ok && (res.Status == "resting" || res.Status == "accepted") {
		t.resting = append(t.resting, res.OrderID)
	}
	return o
}

// LimitPrice is mid moved bps basis points away (down for a buy, up for a
// sell) and rounded away from the mid onto the tick; never below a tick.
func LimitPrice(midQ8, tickQ8, bps int64, buy bool) wire.Int {
	// Exact and overflow-free for any price up to 2^63/1e4 q8.
	away := midQ8/10_000*bps + midQ8%10_000*bps/10_000
	if buy {
		p := (midQ8 - away) / tickQ8 * tickQ8
		return wire.Int(max(p, tickQ8))
	}
	p := midQ8 + away
	return wire.Int((p + tickQ8 - 1) / tickQ8 * tickQ8)
}

// cancel cancels the trader's i-th resting order. Answered either way
// (canceled, or already filled or canceled: 200 or 404), the order is no
// longer the trader's to cancel.
func (t *trader) cancel(ctx context.Context, i int) outcome {
	id := t.resting[i]
	o := t.cl.do(ctx, call{op: OpCancel, method: http.MethodDelete, base: t.base, path: "/v1/orders/" + id, key: t.key, write: true}, nil)
	if o.ok || o.code == wire.CodeNotFound {
		t.resting = append(t.resting[:i], t.resting[i+1:]...)
	}
	return o
}

// limits reads the trader's budgets and the tier that sizes them.
func (t *trader) limits(ctx context.Context, deadline time.Time) (Limits, bool) {
	var l Limits
	ok := t.retry(ctx, deadline, call{op: OpLimits, method: http.MethodGet, base: t.base, path: "/v1/limits", key: t.key}, &l)
	return l, ok
}

// Limits is the part of GET /v1/limits the run reports.
type Limits struct {
	Tier    string `json:"tier"`
	Budgets map[string]struct {
		LimitPerMin int `json:"limitPerMin"`
		Burst       int `json:"burst"`
	} `json:"budgets"`
}

// String writes the budgets as "order 6000/min burst 2000, ...".
func (l Limits) String() string {
	s := ""
	for _, name := range []string{"read", "order", "withdraw"} {
		b, ok := l.Budgets[name]
		if !ok {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += name + " " + strconv.Itoa(b.LimitPerMin) + "/min burst " + strconv.Itoa(b.Burst)
	}
	return s
}
