package workload

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
)

// Trading: funded trader accounts (Env.Traders, kept apart from the
// accounts whose balance the linearizability checker models, since fills
// move their balances) place market orders on both markets, rest limit
// orders far from the price and cancel them. Every order's idempotency
// key is its order id; an order or cancel with an unknown outcome is
// retried with the same key after the faults heal, like every write.
//
// The dead-man switch (POST /v1/cancel-all-after) is in cancelafter.go;
// the orders it cancels are among those this file rests. Triggers and
// brackets are in triggers.go.

// maxWorkloadContracts bounds an order's size (within the market's own
// limits) so margin stays a small share of a trader's funds.
const maxWorkloadContracts = 50

// Leverage: one order in defaultLeverageOneIn sends none (the market's
// most, 100x by default); the others ask for one of leverages. Positions
// at 2x-5x ride out the scripted moves and the crashes, those at 10x-25x
// go in a crash, those at 50x-100x in an ordinary move (maintenance is
// 0.5%), so liquidations, partial and full, happen in every run.
const defaultLeverageOneIn = 5

var leverages = []int64{2, 3, 5, 10, 20, 25, 50, 75, 100}

// withLeverage sets a leverage on body (none on reduce-only orders, which
// open nothing).
func withLeverage(rng *rand.Rand, body client.OrderRequest) client.OrderRequest {
	if body.ReduceOnly || rng.Intn(defaultLeverageOneIn) == 0 {
		return body
	}
	v := strconv.FormatInt(leverages[rng.Intn(len(leverages))], 10)
	body.Leverage = &v
	return body
}

// MarketInfo is what the workload knows of a market.
type MarketInfo struct {
	ID           string
	FeedID       string // the oracle feed that prices it
	TickQ8       int64
	MinContracts int64
	MaxContracts int64
	MidQ8        int64 // the mid when the run started
}

// LoadMarkets reads the live markets that have a price.
func LoadMarkets(ctx context.Context, c *client.Client, node string) ([]MarketInfo, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, ms := c.Markets(octx, node)
	if ms == nil {
		return nil, fmt.Errorf("markets: %d %s %s", res.Status, res.Code, res.Error)
	}
	return marketInfos(ms)
}

func marketInfos(ms []client.Market) ([]MarketInfo, error) {
	var out []MarketInfo
	for _, m := range ms {
		if m.Status != "live" || m.LastPrice == nil {
			continue
		}
		mi := MarketInfo{ID: m.MarketID, FeedID: m.OracleFeedID}
		var errs [4]error
		mi.TickQ8, errs[0] = strconv.ParseInt(m.TickSizeQ8, 10, 64)
		mi.MinContracts, errs[1] = strconv.ParseInt(m.MinOrderContracts, 10, 64)
		mi.MaxContracts, errs[2] = strconv.ParseInt(m.MaxOrderContracts, 10, 64)
		mi.MidQ8, errs[3] = strconv.ParseInt(m.LastPrice.MidQ8, 10, 64)
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("market %s: %w", m.MarketID, err)
			}
		}
		if mi.TickQ8 > 0 && mi.MidQ8 > 0 {
			out = append(out, mi)
		}
	}
	return out, nil
}

// restingSet is a trader's orders that may be resting: acknowledged as
// resting, or placed with an unknown outcome.
type restingSet struct {
	mu  sync.Mutex
	ids []string
}

func (r *restingSet) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

// take removes and returns a random id ("" when empty).
func (r *restingSet) take(rng *rand.Rand) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 {
		return ""
	}
	i := rng.Intn(len(r.ids))
	id := r.ids[i]
	r.ids[i] = r.ids[len(r.ids)-1]
	r.ids = r.ids[:len(r.ids)-1]
	return id
}

// PlaceMarket places a market order of random side and size.
func PlaceMarket(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if len(e.Markets) == 0 {
		return ReadBalance(ctx, e, p, acct)
	}
	m := e.Markets[p.Rand.Intn(len(e.Markets))]
	body := client.OrderRequest{MarketID: m.ID, Side: side(p.Rand), Type: "market", Contracts: size(p.Rand, m)}
	return placeOrder(ctx, e, p, acct, body)
}

// PlaceLimit rests a limit order far from the price (half the starting
// mid for a buy, one and a half times it for a sell), so it stays resting
// until canceled unless the price moves that far.
func PlaceLimit(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	if len(e.Markets) == 0 {
		return ReadBalance(ctx, e, p, acct)
	}
	m := e.Markets[p.Rand.Intn(len(e.Markets))]
	s := side(p.Rand)
	var px int64
	if s == "buy" {
		px = max(m.MidQ8/2/m.TickQ8, 1) * m.TickQ8
	} else {
		px = (m.MidQ8*3/2/m.TickQ8 + 1) * m.TickQ8
	}
	lp := strconv.FormatInt(px, 10)
	body := client.OrderRequest{MarketID: m.ID, Side: s, Type: "limit", Contracts: size(p.Rand, m), LimitPriceQ8: &lp}
	return placeOrder(ctx, e, p, acct, body)
}

// CancelResting cancels one of the trader's possibly resting orders, or
// rests one when it has none.
func CancelResting(ctx context.Context, e *Env, p *Process, acct *Account) history.Type {
	id := acct.resting.take(p.Rand)
	if id == "" {
		return PlaceLimit(ctx, e, p, acct)
	}
	return CancelOrder(ctx, e, p, acct, id)
}

func placeOrder(ctx context.Context, e *Env, p *Process, acct *Account, body client.OrderRequest) history.Type {
	body = withLeverage(p.Rand, body)
	key := idemKey(p.Rand, "order")
	spec := orderSpec(key, body)
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FOrder, Account: acct.ID,
		IdemKey: key, Order: key, Detail: orderDetail(body), Spec: spec})
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, a := e.Client.PlaceOrder(octx, p.Node, acct.APIKey, key, body)
	done := history.Op{}
	res.Fill(&done)
	if a != nil {
		done.OrderStatus = a.Status
	}
	e.Rec.Complete(inv, done)
	for _, id := range mayRest(p.Rand, key, spec, res.Type, done.OrderStatus) {
		acct.resting.add(id)
	}
	if res.Type == history.Info {
		e.AddPending(Pending{Op: inv, Account: acct, Body: body})
	}
	return res.Type
}

// CancelOrder cancels orderID under a fresh idempotency key.
func CancelOrder(ctx context.Context, e *Env, p *Process, acct *Account, orderID string) history.Type {
	key := idemKey(p.Rand, "cancel")
	inv := e.Rec.Invoke(history.Op{Process: p.ID, Node: p.Node, F: history.FCancel, Account: acct.ID,
		IdemKey: key, Order: orderID})
	octx, cancel := opCtx(ctx)
	defer cancel()
	res, a := e.Client.CancelOrder(octx, p.Node, acct.APIKey, key, orderID)
	done := history.Op{}
	res.Fill(&done)
	if a != nil {
		done.OrderStatus = cancelStatus(a.Canceled)
	}
	e.Rec.Complete(inv, done)
	if res.Type == history.Info {
		e.AddPending(Pending{Op: inv, Account: acct})
	}
	return res.Type
}

// retryTrade resends a pending order or cancel with its key.
func retryTrade(ctx context.Context, e *Env, node string, pend Pending, done *history.Op) {
	switch pend.Op.F {
	case history.FOrder:
		res, a := e.Client.PlaceOrder(ctx, node, pend.Account.APIKey, pend.Op.IdemKey, pend.Body.(client.OrderRequest))
		res.Fill(done)
		if a != nil {
			done.OrderStatus = a.Status
		}
	case history.FCancel:
		res, a := e.Client.CancelOrder(ctx, node, pend.Account.APIKey, pend.Op.IdemKey, pend.Op.Order)
		res.Fill(done)
		if a != nil {
			done.OrderStatus = cancelStatus(a.Canceled)
		}
	}
}

// Cancel answers as recorded in Op.OrderStatus.
const (
	CancelCanceled    = "canceled"
	CancelNotCanceled = "not-canceled"
)

func cancelStatus(canceled bool) string {
	if canceled {
		return CancelCanceled
	}
	return CancelNotCanceled
}

func side(rng *rand.Rand) string {
	if rng.Intn(2) == 0 {
		return "buy"
	}
	return "sell"
}

func size(rng *rand.Rand, m MarketInfo) string {
	hi := min(m.MaxContracts, max(m.MinContracts, maxWorkloadContracts))
	return strconv.FormatInt(m.MinContracts+rng.Int63n(hi-m.MinContracts+1), 10)
}

func orderDetail(b client.OrderRequest) string {
	d := fmt.Sprintf("%s %s %s %s", b.Type, b.Side, b.Contracts, b.MarketID)
	if b.Leverage != nil {
		d += " " + *b.Leverage + "x"
	}
	if b.LimitPriceQ8 != nil {
		d += " @" + *b.LimitPriceQ8
	}
	if b.TriggerPriceQ8 != nil {
		d += " trigger " + *b.TriggerPriceQ8
	}
	if t := b.Trigger; t != nil {
		d += " " + t.Kind + " " + t.Level
	}
	if br := b.Bracket; br != nil {
		d += " bracket " + br.EntryKind
		for _, f := range []struct {
			name string
			v    *string
		}{{"entry", br.EntryLevel}, {"stop", br.StopLevel}, {"tp", br.TakeProfitLevel}, {"stopN", br.StopContracts}, {"tpN", br.TakeProfitContracts}} {
			if f.v != nil {
				d += " " + f.name + "=" + *f.v
			}
		}
	}
	return d
}
