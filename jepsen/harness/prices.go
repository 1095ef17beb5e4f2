package harness

import (
	"context"
	"fmt"
	"maps"
	mrand "math/rand"
	"sort"
	"strconv"
	"time"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/db"
	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/jepsen/workload"
)

// The simulated oracle moves about 0.1% a minute, so trigger levels 1-3%
// away would never be reached in a run. Before the faults start the
// harness therefore gives each feed a scripted path (POST
// /admin/oracle/script, replicated: every leader plays it from the same
// log time): straight lines between points a few seconds apart, each
// 1-4% from the last, kept within priceBandBp of the starting mid so the
// far limit orders (half and one and a half times the starting mid) keep
// resting. After the last point the feed holds still.

const (
	priceStepMinMs = 3_000
	priceStepMaxMs = 6_000
	priceMoveMinBp = 100
	priceMoveMaxBp = 400
	priceBandBp    = 1_200
	// scriptSlack covers the setup after the script starts and the final
	// heal's wait, so the price still moves when the run's last ops go.
	scriptSlack = 2 * time.Minute
	// scriptPointsMax stays under the engine's bound on a script (1000).
	scriptPointsMax = 900
	scriptTries     = 10
)

// pricePath is a feed's script from startQ8 for total: points at offsets
// a few seconds apart (further apart for very long runs, to stay under
// scriptPointsMax), each a random move from the last, bounced back into
// the band around startQ8.
func (r *run) pricePath(startQ8 int64, total time.Duration) []client.ScriptPoint {
	stepScale := max(1, float64(total.Milliseconds())/float64(scriptPointsMax*priceStepMinMs))
	pts := []client.ScriptPoint{{OffsetMs: 0, MidQ8: startQ8}}
	lo, hi := startQ8-startQ8/10_000*priceBandBp, startQ8+startQ8/10_000*priceBandBp
	at, px := int64(0), startQ8
	for at < total.Milliseconds() && len(pts) < scriptPointsMax {
		at += int64(float64(priceStepMinMs+r.rng.Int63n(priceStepMaxMs-priceStepMinMs+1)) * stepScale)
		move := px / 10_000 * (priceMoveMinBp + r.rng.Int63n(priceMoveMaxBp-priceMoveMinBp+1))
		if r.rng.Intn(2) == 0 {
			move = -move
		}
		if px+move < lo || px+move > hi {
			move = -move
		}
		px = max(px+move, 1)
		pts = append(pts, client.ScriptPoint{OffsetMs: at, MidQ8: px})
	}
	return pts
}

// movePrices scripts every traded feed. A feed that cannot be scripted
// keeps its simulated path, and the report says triggers will rarely fire.
func (r *run) movePrices(ctx context.Context, markets []workload.MarketInfo) {
	done := map[string]bool{}
	for _, m := range markets {
		if m.FeedID == "" || done[m.FeedID] {
			continue
		}
		done[m.FeedID] = true
		pts := r.pricePath(m.MidQ8, r.opts.Duration+scriptSlack)
		var err error
		for try := 0; try < scriptTries; try++ {
			if err = r.cluster.OracleScript(ctx, r.cluster.Nodes[try%len(r.cluster.Nodes)], m.FeedID, pts); err == nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			r.degraded(fmt.Sprintf("feed %s keeps its simulated price (%v): trigger levels 1-3%% away will rarely be reached", m.FeedID, err))
			continue
		}
		if r.paths == nil {
			r.paths = map[string]*pricePlan{}
		}
		r.paths[m.FeedID] = &pricePlan{start: time.Now(), points: pts, market: m}
		r.logf("feed %s plays a %d-point price path within %d bp of %d", m.FeedID, len(pts), priceBandBp, m.MidQ8)
	}
}

// Price crashes. While the faults run, every crashQuietMin-crashQuietMax
// the harness pins one scripted feed 5-15% away from its mid (down two
// times in three, a crash; else up, a spike) through the admin surface
// (POST /admin/oracle/pin, a command through the log like the script), holds
// it crashHoldMin-crashHoldMax, then scripts it back: a straight line
// from the pinned price to the next point of its planned path, then the
// rest of that path. Positions at high leverage are liquidated (with a
// deficit when the jump passes their bankruptcy price, and ADL when the
// insurance fund cannot cover it); those at 2x-5x ride it out. Each pin
// and restore is tried on the running nodes in turn until one takes it,
// and recorded in the history (PriceProcess) with its outcome.

const (
	crashQuietMin = 6 * time.Second
	crashQuietMax = 12 * time.Second
	crashHoldMin  = 2 * time.Second
	crashHoldMax  = 5 * time.Second
	crashMinBp    = 500
	crashMaxBp    = 1_500
	// adminPriceTimeout bounds one pin or script, across retries.
	adminPriceTimeout = 20 * time.Second
	// restoreLeadMs skips path points this close to now: the line back
	// to the path starts at the pinned price and heads for a point ahead.
	restoreLeadMs = 1_000
)

// pricePlan is a feed's scripted path and when it was installed.
type pricePlan struct {
	start  time.Time
	points []client.ScriptPoint
	market workload.MarketInfo // a market it prices (tick, starting mid)
}

// feedMid is the feed's newest mid as a node serves it (through a market
// it prices), or the planned path's price now when no node answers.
func (r *run) feedMid(ctx context.Context, plan *pricePlan) int64 {
	for _, node := range r.env.Nodes {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, ms := r.cl.Markets(rctx, node)
		cancel()
		for _, m := range ms {
			if m.MarketID == plan.market.ID && m.LastPrice != nil {
				if v, err := strconv.ParseInt(m.LastPrice.MidQ8, 10, 64); err == nil && v > 0 {
					return v
				}
			}
		}
	}
	at := time.Since(plan.start).Milliseconds()
	px := plan.points[0].MidQ8
	for _, p := range plan.points {
		if p.OffsetMs <= at {
			px = p.MidQ8
		}
	}
	return px
}

// adminPrice runs one price change through the admin surface, trying the
// running nodes in turn until one takes it or adminPriceTimeout passes,
// and records it (f, detail) in the history.
func (r *run) adminPrice(ctx context.Context, f, detail string, do func(context.Context, *db.Node) error) bool {
	inv := r.rec.Invoke(history.Op{Process: history.PriceProcess, F: f, Detail: detail})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminPriceTimeout)
	defer cancel()
	var err error
	for try := 0; ctx.Err() == nil; try++ {
		n := r.cluster.Nodes[try%len(r.cluster.Nodes)]
		if !n.Running() || n.Paused() {
			if try%len(r.cluster.Nodes) == len(r.cluster.Nodes)-1 {
				time.Sleep(300 * time.Millisecond) // none may be up
			}
			continue
		}
		if err = do(ctx, n); err == nil {
			r.rec.Complete(inv, history.Op{Type: history.OK, Node: n.Admin, Detail: fmt.Sprintf("%s (try %d)", detail, try+1)})
			return true
		}
		time.Sleep(300 * time.Millisecond)
	}
	r.rec.Complete(inv, history.Op{Type: history.Info, Detail: fmt.Sprintf("%s: %v", detail, err)})
	r.logf("%s %s gave up: %v", f, detail, err)
	return false
}

// crashPrices pins crashes and spikes until ctx ends (the run phase), and
// returns how many pins were acknowledged.
func (r *run) crashPrices(ctx context.Context) int {
	feeds := sortedFeeds(r.paths)
	if len(feeds) == 0 {
		return 0
	}
	rng := mrand.New(mrand.NewSource(r.opts.Seed + 4))
	crashes := 0
	for {
		select {
		case <-ctx.Done():
			return crashes
		case <-time.After(crashQuietMin + time.Duration(rng.Int63n(int64(crashQuietMax-crashQuietMin)))):
		}
		feed := feeds[rng.Intn(len(feeds))]
		plan := r.paths[feed]
		mid := r.feedMid(ctx, plan)
		bp := crashMinBp + rng.Int63n(crashMaxBp-crashMinBp+1)
		f, px := history.FPriceCrash, mid-mid/10_000*bp
		if rng.Intn(3) == 0 {
			f, px = history.FPriceSpike, mid+mid/10_000*bp
		}
		px = max(px, 1)
		detail := fmt.Sprintf("%s pin %d (%+.1f%% from %d)", feed, px, float64(px-mid)*100/float64(mid), mid)
		if r.adminPrice(ctx, f, detail, func(c context.Context, n *db.Node) error { return r.cluster.OraclePin(c, n, feed, px) }) {
			crashes++
		}
		// The hold ends early with the run, but the restore always runs.
		select {
		case <-ctx.Done():
		case <-time.After(crashHoldMin + time.Duration(rng.Int63n(int64(crashHoldMax-crashHoldMin)))):
		}
		pts := restorePath(plan, px, time.Since(plan.start).Milliseconds())
		r.adminPrice(ctx, history.FPriceRestore, fmt.Sprintf("%s from %d back to its path (%d points)", feed, px, len(pts)),
			func(c context.Context, n *db.Node) error { return r.cluster.OracleScript(c, n, feed, pts) })
	}
}

// restorePath is a script from px now (elapsedMs into plan) back onto the
// plan: the plan's points more than restoreLeadMs ahead, re-based on now,
// or the plan's last price 3 s on when none is left.
func restorePath(plan *pricePlan, px, elapsedMs int64) []client.ScriptPoint {
	pts := []client.ScriptPoint{{OffsetMs: 0, MidQ8: px}}
	for _, p := range plan.points {
		if p.OffsetMs > elapsedMs+restoreLeadMs && len(pts) < scriptPointsMax {
			pts = append(pts, client.ScriptPoint{OffsetMs: p.OffsetMs - elapsedMs, MidQ8: p.MidQ8})
		}
	}
	if len(pts) == 1 {
		pts = append(pts, client.ScriptPoint{OffsetMs: priceStepMinMs, MidQ8: plan.points[len(plan.points)-1].MidQ8})
	}
	return pts
}

func sortedFeeds(paths map[string]*pricePlan) []string {
	var out []string
	for f := range paths {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// Freezing the price for the final reads. Once the clients stop, a price
// that still moves could liquidate a position (or auto-deleverage one)
// with no order of the trader live, between two nodes' reads: the views
// would differ though nothing went wrong. So the harness pins every
// scripted feed one tick off its mid (so that a print at the pinned price
// is told apart from the last one before it), waits until a node serves
// that price for every market, and takes an index read linearizably on
// that node after it as the earliest index the final views are read at.
// The first print at the pinned price liquidates whatever it makes due;
// prints after it at the same price liquidate nothing more. After the
// reads every node must still serve the pinned prices (else a late price
// command moved them, and no trader counts as settled). Funding could
// still move margins at an hourly boundary: every node's next funding
// boundary is read before and after the final reads, and when any node
// applied one in between (or the nodes disagree), no trader counts as
// settled either. A clock check would be coarser: log time trails the
// clocks, so a window around every hour would be lost to it.

const (
	freezeWait = 30 * time.Second
)

// freezePrices pins every scripted feed; it reports whether all were
// pinned (r.frozen then maps each market to its pinned mid).
func (r *run) freezePrices(ctx context.Context) bool {
	r.frozen = map[string]int64{}
	ok := len(r.paths) > 0
	for _, feed := range sortedFeeds(r.paths) {
		plan := r.paths[feed]
		mid := r.feedMid(ctx, plan)
		tick := plan.market.TickQ8
		px := max((mid+tick/2)/tick*tick, tick)
		if px == mid {
			px += tick
		}
		if !r.adminPrice(ctx, history.FPriceFreeze, fmt.Sprintf("%s pin %d (mid %d)", feed, px, mid),
			func(c context.Context, n *db.Node) error { return r.cluster.OraclePin(c, n, feed, px) }) {
			ok = false
			continue
		}
		for _, m := range r.env.Markets {
			if m.FeedID == feed {
				r.frozen[m.ID] = px
			}
		}
	}
	return ok
}

// servesFrozen reports whether node serves every frozen market at its
// pinned price.
func (r *run) servesFrozen(ctx context.Context, node string) (bool, string) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, ms := r.cl.Markets(rctx, node)
	if ms == nil {
		return false, fmt.Sprintf("markets on %s: %d %s", node, res.Status, res.Error)
	}
	got := map[string]string{}
	for _, m := range ms {
		if m.LastPrice != nil {
			got[m.MarketID] = m.LastPrice.MidQ8
		}
	}
	for id, px := range r.frozen {
		if got[id] != strconv.FormatInt(px, 10) {
			return false, fmt.Sprintf("%s serves %s at %q, pinned at %d", node, id, got[id], px)
		}
	}
	return true, ""
}

// awaitFrozen waits until a node serves every pinned price and returns an
// index read linearizably on that node afterwards (0 when it never did).
func (r *run) awaitFrozen(ctx context.Context) uint64 {
	deadline := time.Now().Add(freezeWait)
	why := ""
	for try := 0; time.Now().Before(deadline) && ctx.Err() == nil; try++ {
		node := r.env.Nodes[try%len(r.env.Nodes)]
		var ok bool
		if ok, why = r.servesFrozen(ctx, node); ok {
			rctx, cancel := context.WithTimeout(ctx, client.DefaultTimeout)
			res, _ := r.cl.Account(rctx, node, r.env.Accounts[0].APIKey, true, 0)
			cancel()
			if res.Type == history.OK && res.RaftIndex > 0 {
				return res.RaftIndex
			}
			why = fmt.Sprintf("linearizable read on %s: %d %s", node, res.Status, res.Error)
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.logf("no node served the pinned prices within %v: %s", freezeWait, why)
	return 0
}

// fundingClocks reads every node's next funding boundary per market. The
// nodes must agree: a node that already applied a boundary another has
// not would see margins moved by funding. It reports why not when a node
// cannot be read or the nodes disagree.
func (r *run) fundingClocks(ctx context.Context) (map[string]string, string) {
	var first map[string]string
	for _, node := range r.env.Nodes {
		var got map[string]string
		why := ""
		for try := 0; try < finalReadAttempts && got == nil; try++ {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			res, ms := r.cl.Markets(rctx, node)
			cancel()
			if ms == nil {
				why = fmt.Sprintf("markets on %s: %d %s", node, res.Status, res.Error)
				time.Sleep(300 * time.Millisecond)
				continue
			}
			got = map[string]string{}
			for _, m := range ms {
				got[m.MarketID] = m.NextFundingTsMs
			}
		}
		if got == nil {
			return nil, why
		}
		if first == nil {
			first = got
		} else if !maps.Equal(first, got) {
			return nil, fmt.Sprintf("the nodes disagree on the next funding boundary (%v on %s, %v on %s)", first, r.env.Nodes[0], got, node)
		}
	}
	return first, ""
}
