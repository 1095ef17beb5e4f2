package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/jepsen/workload"
)

const (
	grantsPerTrader   = 3
	marketsWait       = 60 * time.Second
	cleanupRounds     = 5
	tradePageSize     = 200
	maxTradePages     = 100
	traderReadRetries = 10
)

// setupTraders creates and funds the trading accounts and learns the
// markets. A build without orders, or markets without a price within
// marketsWait, runs without trading and the report says so.
func (r *run) setupTraders(ctx context.Context) error {
	if r.opts.Traders <= 0 {
		return nil
	}
	if !r.cl.Probe(ctx, r.env.Nodes[0], "POST", "/v1/orders") {
		r.degraded("trading not exercised: the build under test has no POST /v1/orders")
		return nil
	}
	if !r.cl.Probe(ctx, r.env.Nodes[0], "POST", "/v1/cancel-all-after") {
		r.env.NoCancelAfter = true
		r.degraded("cancel-all-after not exercised: the build under test has no POST /v1/cancel-all-after")
	}
	deadline := time.Now().Add(marketsWait)
	for {
		ms, err := workload.LoadMarkets(ctx, r.cl, r.env.Nodes[0])
		if err == nil && len(ms) > 0 {
			r.env.Markets = ms
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.degraded(fmt.Sprintf("trading not exercised: no live market with a price after %v (%v)", marketsWait, err))
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, setupAccountsTimeout)
	defer cancel()
	pid := 150000
	for len(r.env.Traders) < r.opts.Traders {
		node := r.env.Nodes[len(r.env.Traders)%len(r.env.Nodes)]
		acct, _, why := workload.Signup(ctx, r.env, pid, node, fmt.Sprintf("jepsen-signup-%016x", r.rng.Uint64()))
		pid++
		if acct == nil {
			if ctx.Err() != nil {
				return fmt.Errorf("created only %d of %d traders: %s", len(r.env.Traders), r.opts.Traders, why)
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		for funded := 0; funded < grantsPerTrader && ctx.Err() == nil; pid++ {
			p := &workload.Process{ID: pid, Node: node, Rand: r.rng}
			if workload.Faucet(ctx, r.env, p, acct) == history.OK {
				funded++
			} else {
				time.Sleep(300 * time.Millisecond)
			}
		}
		r.env.Traders = append(r.env.Traders, acct)
	}
	r.logf("created %d funded traders; markets %v", len(r.env.Traders), marketIDs(r.env.Markets))
	return nil
}

func marketIDs(ms []workload.MarketInfo) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// cancelResting cancels every order still resting after the run (recorded
// like any cancel, so the checker holds them to "never fills"), so no
// print can fill one while the final views are read.
func (r *run) cancelResting(ctx context.Context) {
	pid := 350000
	for round := 0; round < cleanupRounds && ctx.Err() == nil; round++ {
		left := 0
		for i, a := range r.env.Traders {
			node := r.env.Nodes[(round+i)%len(r.env.Nodes)]
			ids, err := r.listResting(ctx, node, a.APIKey)
			if err != nil {
				left++
				continue
			}
			for _, id := range ids {
				p := &workload.Process{ID: pid, Node: node, Rand: r.rng}
				pid++
				if workload.CancelOrder(ctx, r.env, p, a, id) != history.OK {
					left++
				}
			}
		}
		r.resolvePending(ctx)
		if left == 0 {
			return
		}
		time.Sleep(time.Second)
	}
	r.logf("some resting orders could not be canceled after the run")
}

func (r *run) listResting(ctx context.Context, node, apiKey string) ([]string, error) {
	var ids []string
	before := ""
	for page := 0; page < maxTradePages; page++ {
		res, p := r.cl.Orders(ctx, node, apiKey, "accepted", before, tradePageSize, 0)
		if res.Type != history.OK {
			return nil, fmt.Errorf("orders on %s: %d %s %s", node, res.Status, res.Code, res.Error)
		}
		for _, o := range p.Orders {
			ids = append(ids, o.OrderID)
		}
		if p.NextBeforeSeq == nil || len(p.Orders) == 0 {
			return ids, nil
		}
		before = *p.NextBeforeSeq
	}
	return nil, errors.New("orders: too many pages")
}

// readTraders reads every trader's complete view on every node, not
// before the highest acknowledged index.
func (r *run) readTraders(ctx context.Context, final *checker.Final) {
	if len(r.env.Traders) == 0 {
		return
	}
	final.Traders = map[string]*checker.TraderFinal{}
	for _, a := range r.env.Traders {
		tf := &checker.TraderFinal{Nodes: map[string]*checker.TraderView{}}
		final.Traders[a.ID] = tf
		for _, node := range r.env.Nodes {
			for try := 0; try < traderReadRetries; try++ {
				v, err := r.traderView(ctx, node, a.APIKey)
				if err == nil {
					tf.Nodes[node] = v
					break
				}
				tf.Errors = append(tf.Errors, err.Error())
				time.Sleep(300 * time.Millisecond)
			}
		}
	}
}

func (r *run) traderView(ctx context.Context, node, apiKey string) (*checker.TraderView, error) {
	mi := r.env.MinIndex
	res, bal := r.cl.AccountBalances(ctx, node, apiKey, mi)
	if bal == nil {
		return nil, fmt.Errorf("account on %s: %d %s %s", node, res.Status, res.Code, res.Error)
	}
	v := &checker.TraderView{FreeMsat: bal.FreeMsat, ReservedMsat: bal.ReservedMsat}
	res, ps := r.cl.Positions(ctx, node, apiKey, mi)
	if res.Type != history.OK {
		return nil, fmt.Errorf("positions on %s: %d %s %s", node, res.Status, res.Code, res.Error)
	}
	for _, p := range ps {
		n, err1 := strconv.ParseInt(p.Contracts, 10, 64)
		m, err2 := strconv.ParseInt(p.MarginMsat, 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("position %s: %w", p.MarketID, err)
		}
		if p.Side == "short" {
			n = -n
		}
		v.Positions = append(v.Positions, checker.PositionFinal{MarketID: p.MarketID, Contracts: n, MarginMsat: m})
	}
	before := ""
	for page := 0; ; page++ {
		if page == maxTradePages {
			return nil, errors.New("fills: too many pages")
		}
		res, p := r.cl.Fills(ctx, node, apiKey, before, tradePageSize, mi)
		if res.Type != history.OK {
			return nil, fmt.Errorf("fills on %s: %d %s %s", node, res.Status, res.Code, res.Error)
		}
		for _, f := range p.Fills {
			ff, err := fillFinal(f.OrderID, f.MarketID, f.Side, f.Seq,
				f.ClosedContracts, f.OpenedContracts, f.FeeMsat, f.RealizedPnlMsat, f.DeficitMsat)
			if err != nil {
				return nil, err
			}
			v.Fills = append(v.Fills, ff)
		}
		if p.NextBeforeSeq == nil || len(p.Fills) == 0 {
			break
		}
		before = *p.NextBeforeSeq
	}
	before = ""
	for page := 0; ; page++ {
		if page == maxTradePages {
			return nil, errors.New("orders: too many pages")
		}
		res, p := r.cl.Orders(ctx, node, apiKey, "", before, tradePageSize, mi)
		if res.Type != history.OK {
			return nil, fmt.Errorf("orders on %s: %d %s %s", node, res.Status, res.Code, res.Error)
		}
		for _, o := range p.Orders {
			of := checker.OrderFinal{OrderID: o.OrderID, Status: o.Status}
			if o.Reason != nil {
				of.Reason = *o.Reason
			}
			v.Orders = append(v.Orders, of)
		}
		if p.NextBeforeSeq == nil || len(p.Orders) == 0 {
			break
		}
		before = *p.NextBeforeSeq
	}
	return v, nil
}

func fillFinal(orderID, marketID, side, seq string, nums ...string) (checker.FillFinal, error) {
	var v [5]int64
	for i, s := range nums {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return checker.FillFinal{}, fmt.Errorf("fill %s of order %s: %q: %w", seq, orderID, s, err)
		}
		v[i] = n
	}
	return checker.FillFinal{OrderID: orderID, MarketID: marketID, Buy: side == "buy", Seq: seq,
		Closed: v[0], Opened: v[1], FeeMsat: v[2], RealizedPnlMsat: v[3], DeficitMsat: v[4]}, nil
}
