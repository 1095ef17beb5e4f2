package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/jepsen/workload"
)

const (
	grantsPerTrader   = 3
	marketsWait       = 60 * time.Second
	cleanupRounds     = 8
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
			r.movePrices(ctx, ms)
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

// cancelResting cancels every order and trigger still live after the run
// (recorded like any cancel, so the checker holds them to "never fills"),
// so no print can fill or fire one while the final views are read. A
// trader is settled once a node lists nothing live for it at or past the
// highest acknowledged index; a second listing on that node, answered
// after the first was read, gives an index from which nothing of the
// trader can change, and the final views are read at or past it.
func (r *run) cancelResting(ctx context.Context) {
	pid := 350000
	r.settled = map[string]bool{}
	for round := 0; round < cleanupRounds && ctx.Err() == nil; round++ {
		minIndex := r.ackedIndex()
		left := 0
		for i, a := range r.env.Traders {
			if r.settled[a.ID] {
				continue
			}
			left++
			node := r.env.Nodes[(round+i)%len(r.env.Nodes)]
			ids, _, err := r.listLive(ctx, node, a.APIKey, minIndex)
			if err != nil {
				continue
			}
			if len(ids) == 0 {
				again, at, err := r.listLive(ctx, node, a.APIKey, minIndex)
				if err == nil && len(again) == 0 {
					r.settled[a.ID] = true
					r.quietIndex = max(r.quietIndex, at)
					left--
				}
				continue
			}
			for _, id := range ids {
				p := &workload.Process{ID: pid, Node: node, Rand: r.rng}
				pid++
				workload.CancelOrder(ctx, r.env, p, a, id)
			}
		}
		r.resolvePending(ctx)
		if left == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.logf("%d of %d traders still had live orders or could not be listed after the run", len(r.env.Traders)-len(r.settled), len(r.env.Traders))
}

// ackedIndex is the highest raft index an acknowledged operation returned.
func (r *run) ackedIndex() uint64 {
	var idx uint64
	for _, op := range r.rec.Ops() {
		if op.Type == history.OK && op.RaftIndex > idx {
			idx = op.RaftIndex
		}
	}
	return idx
}

// listLive lists a trader's live orders and triggers (status accepted) on
// node, not before minIndex, and the highest X-Raft-Index it was answered
// with.
func (r *run) listLive(ctx context.Context, node, apiKey string, minIndex uint64) ([]string, uint64, error) {
	var ids []string
	var at uint64
	before := ""
	for page := 0; page < maxTradePages; page++ {
		res, p := r.cl.Orders(ctx, node, apiKey, "accepted", before, tradePageSize, minIndex)
		if res.Type != history.OK {
			return nil, 0, fmt.Errorf("orders on %s: %d %s %s", node, res.Status, res.Code, res.Error)
		}
		at = max(at, res.RaftIndex)
		for _, o := range p.Orders {
			ids = append(ids, o.OrderID)
		}
		if p.NextBeforeSeq == nil || len(p.Orders) == 0 {
			return ids, at, nil
		}
		before = *p.NextBeforeSeq
	}
	return nil, 0, errors.New("orders: too many pages")
}

// readTraders reads every trader's complete view on every node, not
// before the highest acknowledged index.
func (r *run) readTraders(ctx context.Context, final *checker.Final) {
	if len(r.env.Traders) == 0 {
		return
	}
	final.Traders = map[string]*checker.TraderFinal{}
	for _, a := range r.env.Traders {
		tf := &checker.TraderFinal{Settled: r.settled[a.ID]}
		tf.Nodes, tf.Errors = readOnEveryNode(r.env.Nodes, func(node string) (*checker.TraderView, error) {
			v, err := r.traderView(ctx, node, a.APIKey)
			if err == nil {
				r.corruptView(node, v)
			}
			return v, err
		})
		final.Traders[a.ID] = tf
	}
}

// readOnEveryNode reads one account's final view on each node, trying a
// node up to traderReadRetries times; it returns the views it got, by
// node, and every error met on the way.
func readOnEveryNode[V any](nodes []string, read func(node string) (V, error)) (map[string]V, []string) {
	views, errs := map[string]V{}, []string(nil)
	for _, node := range nodes {
		for try := 0; try < traderReadRetries; try++ {
			v, err := read(node)
			if err == nil {
				views[node] = v
				break
			}
			errs = append(errs, err.Error())
			time.Sleep(300 * time.Millisecond)
		}
	}
	return views, errs
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
			ff, err := fillFinal(f)
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
			n, err := strconv.ParseInt(o.Contracts, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("order %s: contracts %q: %w", o.OrderID, o.Contracts, err)
			}
			of := checker.OrderFinal{OrderID: o.OrderID, MarketID: o.MarketID, Type: o.Type, Buy: o.Side == "buy",
				Contracts: n, Status: o.Status, Reason: deref(o.Reason)}
			v.Orders = append(v.Orders, of)
		}
		if p.NextBeforeSeq == nil || len(p.Orders) == 0 {
			break
		}
		before = *p.NextBeforeSeq
	}
	for _, state := range []string{"armed", "resting"} {
		ts, err := r.triggers(ctx, node, apiKey, state, mi)
		if err != nil {
			return nil, err
		}
		v.Triggers = append(v.Triggers, ts...)
	}
	if err := r.riskRecords(ctx, node, apiKey, mi, v); err != nil {
		return nil, err
	}
	return v, nil
}

// riskRecords reads every page of a trader's liquidations and funding
// flows into v. A build without the routes (404 on the first page) has
// none to list.
func (r *run) riskRecords(ctx context.Context, node, apiKey string, minIndex uint64, v *checker.TraderView) error {
	before := ""
	for page := 0; ; page++ {
		if page == maxTradePages {
			return errors.New("liquidations: too many pages")
		}
		res, p := r.cl.Liquidations(ctx, node, apiKey, before, tradePageSize, minIndex)
		if res.Type != history.OK {
			if page == 0 && res.Status == 404 && res.Code == "not_found" {
				break
			}
			return fmt.Errorf("liquidations on %s: %d %s %s", node, res.Status, res.Code, res.Error)
		}
		for _, l := range p.Liquidations {
			lf, err := liquidationFinal(l)
			if err != nil {
				return err
			}
			v.Liquidations = append(v.Liquidations, lf)
		}
		if p.NextBeforeSeq == nil || len(p.Liquidations) == 0 {
			break
		}
		before = *p.NextBeforeSeq
	}
	before = ""
	for page := 0; ; page++ {
		if page == maxTradePages {
			return errors.New("funding: too many pages")
		}
		res, p := r.cl.Funding(ctx, node, apiKey, before, tradePageSize, minIndex)
		if res.Type != history.OK {
			if page == 0 && res.Status == 404 && res.Code == "not_found" {
				return nil
			}
			return fmt.Errorf("funding on %s: %d %s %s", node, res.Status, res.Code, res.Error)
		}
		for _, g := range p.Funding {
			n, err := ints("funding flow "+g.Seq, g.BoundaryTsMs, g.RateQ9, g.FlowMsat, g.PaidMsat)
			if err != nil {
				return err
			}
			v.Funding = append(v.Funding, checker.FundingFinal{MarketID: g.MarketID, BoundaryTsMs: n[0], RateQ9: n[1],
				FlowMsat: n[2], PaidMsat: n[3], PositionID: g.PositionID, Seq: g.Seq})
		}
		if p.NextBeforeSeq == nil || len(p.Funding) == 0 {
			return nil
		}
		before = *p.NextBeforeSeq
	}
}

// ints parses decimal strings in order; what names the record in errors.
func ints(what string, xs ...string) ([]int64, error) {
	out := make([]int64, len(xs))
	for i, x := range xs {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", what, x, err)
		}
		out[i] = v
	}
	return out, nil
}

func liquidationFinal(l client.Liquidation) (checker.LiquidationFinal, error) {
	v, err := ints("liquidation "+l.Seq, l.ClosedContracts, l.ExecPriceQ8, l.RealizedPnlMsat, l.FundingSettledMsat, l.PenaltyMsat,
		l.DeficitMsat, l.InsuranceCoveredMsat, l.RemainingContracts, l.RemainingMarginMsat)
	if err != nil {
		return checker.LiquidationFinal{}, err
	}
	lf := checker.LiquidationFinal{PositionID: l.PositionID, MarketID: l.MarketID, Long: l.Side == "long", Closed: v[0],
		Partial: l.Partial, ExecQ8: v[1], RealizedPnlMsat: v[2], FundingSettledMsat: v[3], PenaltyMsat: v[4],
		DeficitMsat: v[5], InsuranceCoveredMsat: v[6], ADLTriggered: l.ADLTriggered, RemainingContracts: v[7],
		RemainingMarginMsat: v[8], Seq: l.Seq, TsMs: int64Of(l.TsMs)}
	if l.RemainderMsat != nil {
		rm, err := ints("liquidation "+l.Seq, *l.RemainderMsat)
		if err != nil {
			return checker.LiquidationFinal{}, err
		}
		lf.HasRemainder, lf.RemainderMsat = true, rm[0]
	}
	return lf, nil
}

// triggers reads every page of a trader's live triggers in state.
func (r *run) triggers(ctx context.Context, node, apiKey, state string, minIndex uint64) ([]checker.TriggerFinal, error) {
	var out []checker.TriggerFinal
	before := ""
	for page := 0; page < maxTradePages; page++ {
		res, p := r.cl.Triggers(ctx, node, apiKey, state, before, tradePageSize, minIndex)
		if res.Type != history.OK {
			return nil, fmt.Errorf("triggers (%s) on %s: %d %s %s", state, node, res.Status, res.Code, res.Error)
		}
		for _, t := range p.Triggers {
			n, err1 := strconv.ParseInt(t.Contracts, 10, 64)
			lv, err2 := strconv.ParseInt(t.TriggerPriceQ8, 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("trigger %s: %w", t.OrderID, err)
			}
			out = append(out, checker.TriggerFinal{OrderID: t.OrderID, MarketID: t.MarketID, Kind: t.Kind, Buy: t.Side == "buy",
				Contracts: n, LevelQ8: lv, ReduceOnly: t.ReduceOnly, Status: t.Status, Reason: deref(t.Reason), OCOGroup: deref(t.OCOGroup)})
		}
		if p.NextBeforeSeq == nil || len(p.Triggers) == 0 {
			return out, nil
		}
		before = *p.NextBeforeSeq
	}
	return nil, errors.New("triggers: too many pages")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func fillFinal(f client.Fill) (checker.FillFinal, error) {
	what := "fill " + f.Seq + " of order " + f.OrderID
	settled := f.FundingSettledMsat
	if settled == "" {
		settled = "0"
	}
	v, err := ints(what, f.ClosedContracts, f.OpenedContracts, f.FeeMsat, f.RealizedPnlMsat, f.DeficitMsat, settled)
	if err != nil {
		return checker.FillFinal{}, err
	}
	ff := checker.FillFinal{OrderID: f.OrderID, MarketID: f.MarketID, Buy: f.Side == "buy", Seq: f.Seq,
		Closed: v[0], Opened: v[1], FeeMsat: v[2], RealizedPnlMsat: v[3], DeficitMsat: v[4], FundingSettledMsat: v[5], TsMs: int64Of(f.TsMs)}
	if a := f.PositionAfter; a != nil {
		after, err := ints(what+" positionAfter", a.Contracts, a.MarginMsat)
		if err != nil {
			return checker.FillFinal{}, err
		}
		ff.AfterContracts, ff.AfterMarginMsat = after[0], after[1]
		if a.Side == "short" {
			ff.AfterContracts = -ff.AfterContracts
		}
	}
	return ff, nil
}

// int64Of parses a record's timestamp or rate; 0 (not checked) when the build under
// test does not list it.
func int64Of(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// readMarketFunding reads every market's funding history on every node,
// not before the final reads' index (the log-time checker compares them
// with the funding flows). A node that does not answer is left out.
func (r *run) readMarketFunding(ctx context.Context) map[string]map[string][]checker.FundingEntry {
	out := map[string]map[string][]checker.FundingEntry{}
	for _, node := range r.env.Nodes {
		got := map[string][]checker.FundingEntry{}
		for _, m := range r.env.Markets {
			for try := 0; try < finalReadAttempts; try++ {
				res, bs := r.cl.MarketFunding(ctx, node, m.ID, r.env.MinIndex)
				if bs == nil {
					if res.Status == 404 && try == 0 && len(got) == 0 {
						break // a build without the route
					}
					time.Sleep(300 * time.Millisecond)
					continue
				}
				h := make([]checker.FundingEntry, 0, len(bs))
				for _, b := range bs {
					h = append(h, checker.FundingEntry{TsMs: int64Of(b.TsMs), RateQ9: int64Of(b.RateQ9)})
				}
				got[m.ID] = h
				break
			}
		}
		if len(got) > 0 {
			out[node] = got
		}
	}
	return out
}
