package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/perpd/perpd/jepsen/history"
)

// Log time under clock faults (node/clock.go, fsm.MaxClockStepMs): every
// entry carries the leader's stamp, log time is the largest stamp so far,
// and leaders build stamps from their monotonic clocks, converging on
// their calendar clock at most 1/CatchUpDiv faster than real time. So
// whatever any node's calendar clock reads (the clock nemesis steps them
// hours ahead and behind), seen from outside:
//
//   - along the log (records in seq order: one seq space for fills,
//     liquidations, deposits and funding flows) timestamps never go down,
//     and a seq shows the same timestamp on every node;
//   - a funding flow of boundary B is settled by the first entry whose time
//     reaches B, before that entry's command: every record before it on the
//     log is stamped before B, every record after it at or past B; B is a
//     whole hour; a trader's flows in one market settle strictly later
//     boundaries along the log (so at most one per boundary and position);
//     each is in the market's funding history (GET /v1/markets/{id}/funding)
//     with the same rate, and those histories hold whole hours, strictly
//     increasing, the same rate at a boundary on every node;
//   - against the harness's clock: an acknowledged write whose log time is
//     known (a fill of an order answered filled, a withdrawal's
//     requestedTsMs, a minted key's createdTsMs, a cancel-all-after arm's
//     deadline less its timeout) committed between its invocation and its
//     acknowledgement. For x returned before y was invoked, log time went
//     neither back (ts(y) >= ts(x)) nor forward faster than the catch-up
//     allows: ts(y) - ts(x) <= (1 + 1/CatchUpDiv) (ret(y) - call(x)) +
//     LogTimeSlackMs. A leader that stamped from a calendar clock stepped an
//     hour ahead moves log time by up to fsm.MaxClockStepMs a entry: a
//     minute a second, far past that bound;
//   - log time keeps up: a leader stamps from its monotonic clock, so
//     while it leads log time moves at least as fast as real time; a new
//     leader continues from the log time it saw plus the real time since
//     it saw it, and loses at most the stretch in which no leader stamped
//     (the election), when it applies the old leader's last entries before
//     it stamps. Such a stretch shows as a gap between acknowledged
//     writes. So log time trails the base calendar (Final.LogTimeOriginMs
//     plus the history's real time; log time starts on it with the
//     cluster) by at most the gaps longer than LogTimeGapMs before a write,
//     plus LogTimeTrailMs for the small losses of leadership transfers;
//     the catch-up only ever wins time back. A leader whose clock stalls,
//     or that stamps from a calendar stepped behind (the FSM keeps log
//     time from going back, so it stands still), falls behind while the
//     writes it stamps flow without a gap.
//
// An idempotency record, invoice or confirm token expires by log time, so
// log time that neither jumps nor goes back expires none of them early;
// the lost-writes and duplicate checks then hold retries to one apply.

// Log time bounds (node.CatchUpDiv, fsm/market FundingIntervalMs).
const (
	CatchUpDiv     = 10
	LogTimeSlackMs = 2000
	FundingHourMs  = 3_600_000
	// LogTimeTrailMs is how far log time may trail the base calendar
	// beyond the gaps between writes; LogTimeGapMs the shortest gap
	// counted (at 40 writes a second, twenty missed in a row).
	LogTimeTrailMs = 5000
	LogTimeGapMs   = 500
)

// FundingEntry is one boundary of a market's funding history.
type FundingEntry struct {
	TsMs   int64 `json:"tsMs"`
	RateQ9 int64 `json:"rateQ9"`
}

// LogTimeReport is what the log-time checker saw.
type LogTimeReport struct {
	// Records are the timestamped records placed on the log by seq,
	// Flows the funding flows, Boundaries the boundaries in the markets'
	// histories (all nodes), Observations the acknowledged writes whose log
	// time is known.
	Records      int `json:"records"`
	Flows        int `json:"flows"`
	Boundaries   int `json:"boundaries"`
	Observations int `json:"observations"`
	// LogSpanMs and RealSpanMs are how much log time and real time the
	// observations span (first to last).
	LogSpanMs  int64 `json:"logSpanMs"`
	RealSpanMs int64 `json:"realSpanMs"`
	// MaxTrailMs is how far, at most, an observed write's log time
	// trailed the base calendar when it was invoked (negative: log time
	// ran ahead of it all along); 0 without Final.LogTimeOriginMs.
	MaxTrailMs int64 `json:"maxTrailMs"`
}

type stamped struct {
	ts    int64
	where string
}

type flowAt struct {
	FundingFinal
	where string
}

// observation is an acknowledged write whose entry's log time is known.
type observation struct {
	call, ret, ts int64
	what          string
}

// LogTime checks log time as explained above.
func LogTime(ops []history.Op, final *Final) (Result, LogTimeReport) {
	res := Result{Name: "log-time", Verdict: Valid}
	var rep LogTimeReport
	bad := func(format string, args ...any) {
		res.Verdict = Violation
		res.addf(format, args...)
	}
	recs, flows := logRecords(bad, final)
	rep.Records, rep.Flows = len(recs), len(flows)
	checkLogOrder(bad, recs, flows)
	rep.Boundaries = checkFundingHistories(bad, final, flows)
	obs := logObservations(ops, final)
	rep.Observations = len(obs)
	if len(obs) > 0 {
		lo, hi := obs[0], obs[0]
		for _, o := range obs {
			if o.ts < lo.ts {
				lo = o
			}
			if o.ts > hi.ts {
				hi = o
			}
		}
		rep.LogSpanMs = hi.ts - lo.ts
		first, last := obs[0].call, obs[0].ret
		for _, o := range obs {
			first, last = min(first, o.call), max(last, o.ret)
		}
		rep.RealSpanMs = (last - first) / 1e6
	}
	checkAgainstRealTime(bad, obs)
	trail := ""
	if final.LogTimeOriginMs > 0 && len(obs) > 0 {
		rep.MaxTrailMs = checkKeepsUp(bad, obs, writeGaps(ops), final.LogTimeOriginMs)
		trail = fmt.Sprintf(", trailing the base calendar by at most %d ms", rep.MaxTrailMs)
	}
	res.Details = append([]string{fmt.Sprintf("%d records and %d funding flows on the log, %d boundaries in the markets' histories, %d writes with a known log time spanning %d ms of log time in %d ms%s",
		rep.Records, rep.Flows, rep.Boundaries, rep.Observations, rep.LogSpanMs, rep.RealSpanMs, trail)}, res.Details...)
	return res, rep
}

// logRecords gathers every listed record's seq and timestamp (fills and
// liquidations of every trader on every node, every account's deposits)
// and every funding flow, reporting a seq shown with two timestamps.
func logRecords(bad func(string, ...any), final *Final) (map[uint64]stamped, map[uint64]flowAt) {
	recs := map[uint64]stamped{}
	flows := map[uint64]flowAt{}
	add := func(seqS string, ts int64, where string) {
		seq, err := strconv.ParseUint(seqS, 10, 64)
		if err != nil || ts <= 0 {
			return // unparsable seqs are the other checkers'; no timestamp: an older build
		}
		if prev, ok := recs[seq]; ok {
			if prev.ts != ts {
				bad("seq %d is stamped %d as %s and %d as %s", seq, prev.ts, prev.where, ts, where)
			}
			return
		}
		recs[seq] = stamped{ts, where}
	}
	for _, a := range sortedMapKeys(final.Traders) {
		tf := final.Traders[a]
		for _, node := range sortedMapKeys(tf.Nodes) {
			v := tf.Nodes[node]
			for _, f := range v.Fills {
				add(f.Seq, f.TsMs, fmt.Sprintf("%s's fill of %s on %s", a, f.OrderID, node))
			}
			for _, l := range v.Liquidations {
				add(l.Seq, l.TsMs, fmt.Sprintf("%s's liquidation in %s on %s", a, l.MarketID, node))
			}
			for _, g := range v.Funding {
				seq, err := strconv.ParseUint(g.Seq, 10, 64)
				if err != nil {
					continue
				}
				where := fmt.Sprintf("%s's funding flow in %s on %s", a, g.MarketID, node)
				if prev, ok := flows[seq]; ok {
					if prev.BoundaryTsMs != g.BoundaryTsMs {
						bad("funding flow seq %d settles boundary %d as %s and %d as %s", seq, prev.BoundaryTsMs, prev.where, g.BoundaryTsMs, where)
					}
					continue
				}
				flows[seq] = flowAt{g, where}
			}
		}
	}
	for _, a := range sortedMapKeys(final.Accounts) {
		for _, d := range final.Accounts[a].Deposits {
			add(d.Seq, d.TsMs, fmt.Sprintf("%s's deposit %s", a, d.RailRef))
		}
	}
	return recs, flows
}

// checkLogOrder walks the records in seq order (timestamps never go
// down) and places each funding flow among them.
func checkLogOrder(bad func(string, ...any), recs map[uint64]stamped, flows map[uint64]flowAt) {
	seqs := make([]uint64, 0, len(recs))
	for s := range recs {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	// upTo[i] is the largest timestamp among seqs[:i+1], from[i] the
	// smallest among seqs[i:].
	upTo, from := make([]int64, len(seqs)), make([]int64, len(seqs))
	for i, s := range seqs {
		upTo[i] = recs[s].ts
		if i > 0 {
			if r, p := recs[s], recs[seqs[i-1]]; r.ts < p.ts {
				bad("log time went back along the log: seq %d (%s) is stamped %d, after seq %d (%s) at %d",
					s, r.where, r.ts, seqs[i-1], p.where, p.ts)
			}
			upTo[i] = max(upTo[i], upTo[i-1])
		}
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		from[i] = recs[seqs[i]].ts
		if i+1 < len(seqs) {
			from[i] = min(from[i], from[i+1])
		}
	}
	for _, s := range slices.Sorted(maps.Keys(flows)) {
		g := flows[s]
		b := g.BoundaryTsMs
		if b%FundingHourMs != 0 {
			bad("funding flow seq %d (%s) settles boundary %d, not a whole hour", s, g.where, b)
		}
		i := sort.Search(len(seqs), func(i int) bool { return seqs[i] > s })
		if i > 0 && upTo[i-1] >= b {
			bad("funding flow seq %d (%s) settles boundary %d after a record stamped %d: the boundary was settled late, or twice",
				s, g.where, b, upTo[i-1])
		}
		if i < len(seqs) && from[i] < b {
			bad("funding flow seq %d (%s) settles boundary %d before log time reached it: a record after it is stamped %d",
				s, g.where, b, from[i])
		}
	}
}

// checkFundingHistories checks each trader's flows per market, and the
// markets' histories against each other and against the flows; it
// returns how many boundaries the histories hold.
func checkFundingHistories(bad func(string, ...any), final *Final, flows map[uint64]flowAt) int {
	for _, a := range sortedMapKeys(final.Traders) {
		tf := final.Traders[a]
		for _, node := range sortedMapKeys(tf.Nodes) {
			last := map[string]FundingFinal{}
			fs := append([]FundingFinal(nil), tf.Nodes[node].Funding...)
			sort.Slice(fs, func(i, j int) bool { return seqNum(fs[i].Seq) < seqNum(fs[j].Seq) })
			for _, g := range fs {
				if p, ok := last[g.MarketID]; ok && g.BoundaryTsMs <= p.BoundaryTsMs {
					bad("%s on %s: funding flow seq %s settles %s at boundary %d after seq %s settled boundary %d: a position pays once per boundary, in order",
						a, node, g.Seq, g.MarketID, g.BoundaryTsMs, p.Seq, p.BoundaryTsMs)
				}
				last[g.MarketID] = g
			}
		}
	}
	n := 0
	type seen struct {
		rate int64
		node string
	}
	rate := map[string]map[int64]seen{} // market -> boundary -> first rate read
	for _, node := range sortedMapKeys(final.MarketFunding) {
		for _, m := range sortedMapKeys(final.MarketFunding[node]) {
			h := final.MarketFunding[node][m]
			n += len(h)
			if rate[m] == nil {
				rate[m] = map[int64]seen{}
			}
			for i, e := range h {
				if e.TsMs%FundingHourMs != 0 {
					bad("%s's funding history on %s holds boundary %d, not a whole hour", m, node, e.TsMs)
				}
				if i > 0 && e.TsMs <= h[i-1].TsMs {
					bad("%s's funding history on %s records boundary %d after %d: each boundary once, in order", m, node, e.TsMs, h[i-1].TsMs)
				}
				if prev, ok := rate[m][e.TsMs]; !ok {
					rate[m][e.TsMs] = seen{e.RateQ9, node}
				} else if prev.rate != e.RateQ9 {
					bad("%s's boundary %d has rate %d on %s but %d on %s", m, e.TsMs, prev.rate, prev.node, e.RateQ9, node)
				}
			}
		}
	}
	for _, s := range slices.Sorted(maps.Keys(flows)) {
		g := flows[s]
		for _, node := range sortedMapKeys(final.MarketFunding) {
			h, ok := final.MarketFunding[node][g.MarketID]
			if !ok || len(h) == 0 || h[0].TsMs > g.BoundaryTsMs {
				continue // not read, or the history no longer reaches back to it
			}
			found := false
			for _, e := range h {
				if e.TsMs == g.BoundaryTsMs {
					found = true
					if e.RateQ9 != g.RateQ9 {
						bad("funding flow seq %d (%s) settles %s's boundary %d at rate %d, but %s's history says %d",
							s, g.where, g.MarketID, g.BoundaryTsMs, g.RateQ9, node, e.RateQ9)
					}
				}
			}
			if !found {
				bad("funding flow seq %d (%s) settles %s's boundary %d, which %s's funding history does not hold",
					s, g.where, g.MarketID, g.BoundaryTsMs, node)
			}
		}
	}
	return n
}

func seqNum(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// logObservations are the acknowledged writes whose log time the final
// listings show, sorted by invocation.
func logObservations(ops []history.Op, final *Final) []observation {
	var out []observation
	fillTs := map[string]map[string]int64{} // account -> order id -> ts of its first fill
	for a, tf := range final.Traders {
		m := map[string]int64{}
		firstSeq := map[string]uint64{}
		for _, v := range tf.Nodes {
			for _, f := range v.Fills {
				s := seqNum(f.Seq)
				if p, ok := firstSeq[f.OrderID]; f.TsMs > 0 && (!ok || s < p) {
					firstSeq[f.OrderID], m[f.OrderID] = s, f.TsMs
				}
			}
		}
		fillTs[a] = m
	}
	for _, w := range Writes(ops, history.FOrder, history.FWithdraw, history.FMint, history.FCancelAfter) {
		if w.Outcome != Applied {
			continue
		}
		a, key := w.Invoke.Account, w.Invoke.IdemKey
		o := observation{call: w.CallNs, ret: w.ReturnNs}
		switch w.Invoke.F {
		case history.FOrder:
			if w.OrderStatus != "filled" {
				continue
			}
			ts, ok := fillTs[a][key]
			if !ok {
				continue // a lost fill: the trading checker's
			}
			o.ts, o.what = ts, fmt.Sprintf("%s's order %s (op #%d, its fill)", a, key, w.Invoke.ID)
		case history.FWithdraw:
			wf := final.Withdrawers[a]
			if wf == nil {
				continue
			}
			for _, v := range wf.Nodes {
				for _, x := range v.Withdrawals {
					if x.IdemKey == key && x.RequestedTsMs > 0 {
						o.ts = x.RequestedTsMs
					}
				}
			}
			o.what = fmt.Sprintf("%s's withdrawal %s (op #%d, requestedTsMs)", a, key, w.Invoke.ID)
		case history.FMint:
			if af := final.Accounts[a]; af != nil {
				for _, s := range af.Sessions {
					if s.Label == key && s.CreatedTsMs > 0 {
						o.ts = s.CreatedTsMs
					}
				}
			}
			o.what = fmt.Sprintf("%s's key %s (op #%d, createdTsMs)", a, key, w.Invoke.ID)
		case history.FCancelAfter:
			t := caaTimeout(w)
			if t <= 0 || w.DeadlineTsMs == nil {
				continue
			}
			o.ts, o.what = *w.DeadlineTsMs-t, fmt.Sprintf("%s's cancel-all-after arm (op #%d, deadline less timeout)", a, w.Invoke.ID)
		}
		if o.ts > 0 {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].call < out[j].call })
	return out
}

// checkAgainstRealTime holds every pair of observations ordered in real
// time to the bounds above; it reports, for each later write, the
// earlier one that breaks a bound the most.
func checkAgainstRealTime(bad func(string, ...any), obs []observation) {
	for _, y := range obs {
		var back, jump *observation
		var backBy, jumpBy int64
		for i := range obs {
			x := &obs[i]
			if x.ret >= y.call {
				continue
			}
			if d := x.ts - y.ts; d > backBy {
				back, backBy = x, d
			}
			realMs := (y.ret - x.call) / 1e6
			if d := y.ts - x.ts - (realMs + realMs/CatchUpDiv + LogTimeSlackMs); d > jumpBy {
				jump, jumpBy = x, d
			}
		}
		if back != nil {
			bad("log time went back: %s was applied at log time %d, %s invoked after it returned at %d (%d ms earlier)",
				back.what, back.ts, y.what, y.ts, backBy)
		}
		if jump != nil {
			realMs := (y.ret - jump.call) / 1e6
			bad("log time jumped: %s was applied at log time %d and %s at %d, %d ms later, within %d ms of real time (at most %d ms allowed)",
				jump.what, jump.ts, y.what, y.ts, y.ts-jump.ts, realMs, realMs+realMs/CatchUpDiv+LogTimeSlackMs)
		}
	}
}

// gap is a stretch of real time without an acknowledged write.
type gap struct{ from, to int64 }

// writeGaps are the stretches longer than LogTimeGapMs between
// acknowledged writes, in order.
func writeGaps(ops []history.Op) []gap {
	var acks []int64
	for _, op := range ops {
		if op.Type != history.OK || op.Process == history.NemesisProcess || op.Process == history.PriceProcess {
			continue
		}
		switch op.F {
		case history.FFaucet, history.FMint, history.FOrder, history.FCancel, history.FCancelAfter, history.FWithdraw:
			acks = append(acks, op.TimeNs)
		}
	}
	slices.Sort(acks)
	var out []gap
	for i := 1; i < len(acks); i++ {
		if acks[i]-acks[i-1] > LogTimeGapMs*1e6 {
			out = append(out, gap{acks[i-1], acks[i]})
		}
	}
	return out
}

// checkKeepsUp holds every observation's log time to within its
// allowance of the base calendar at its invocation (originMs is the base
// calendar at the history's time 0): LogTimeTrailMs plus every gap that
// began before it was invoked. The entry was stamped after the
// invocation, so a write that trails by more proves log time fell
// behind. It reports the write that trails the most past its allowance
// and returns how far, at most, any trailed.
func checkKeepsUp(bad func(string, ...any), obs []observation, gaps []gap, originMs int64) int64 {
	var trail, over int64
	worst, worstAllowed := -1, int64(0)
	for i, o := range obs {
		d := originMs + o.call/1e6 - o.ts
		allowed := int64(LogTimeTrailMs)
		for _, g := range gaps {
			if g.from < o.call {
				allowed += (g.to - g.from) / 1e6
			}
		}
		if i == 0 || d > trail {
			trail = d
		}
		if d-allowed > over {
			worst, worstAllowed, over = i, allowed, d-allowed
		}
	}
	if worst >= 0 {
		o := obs[worst]
		bad("log time fell behind: %s was applied at log time %d, %d ms behind the base calendar when it was invoked %d ms into the run (at most %d ms allowed: %d, and the gaps between writes before it): a leader stamped from a stalled or stepped-back clock",
			o.what, o.ts, originMs+o.call/1e6-o.ts, o.call/1e6, worstAllowed, LogTimeTrailMs)
	}
	return trail
}
