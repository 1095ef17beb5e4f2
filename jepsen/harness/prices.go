package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/perpd/perpd/jepsen/client"
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
		r.logf("feed %s plays a %d-point price path within %d bp of %d", m.FeedID, len(pts), priceBandBp, m.MidQ8)
	}
}
