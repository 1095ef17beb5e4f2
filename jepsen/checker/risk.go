package checker

import (
	"sort"
	"strconv"
	"strings"
)

// Risk: liquidations, auto-deleveraging and funding (fsm/trade
// liquidate.go, funding.go; docs/decisions.md "Risk (issue 11)").
//
// A liquidation closes a position without a fill for the liquidated
// account: the record says what happened. Its ledger moves, all against
// the position's margin:
//
//	partial: margin += pnl (house <-> margin), margin -= penalty (to the
//	         insurance fund); the rest stays with the position, so
//	         remainingMarginMsat = margin before + pnl - penalty, and
//	         there is no deficit.
//	full:    margin += pnl, but a loss beyond the margin takes only the
//	         margin (the rest is the deficit, the house's), margin -=
//	         penalty (never more than what is left), and what remains
//	         goes to free: remainderMsat = margin before + pnl + deficit
//	         - penalty, the position is gone.
//
// So the trader's equity (free + reserved + margin) moves by pnl + deficit
// - penalty, whichever it was; the insurance fund's cover of a deficit
// moves money between venue books only. Auto-deleveraging closes opposite
// profitable positions with ordinary fills whose order id is
// "adl-<seq of the liquidation>": no fee, the PnL already cut, so NetMsat
// covers them like any fill. A funding flow moves paidMsat (signed from
// the trader's side) between the house and the margin. Hence, per trader
// and on every node:
//
//	equity = deposits + sum(fills: pnl + deficit - fee)
//	       + sum(liquidations: pnl + deficit - penalty) + sum(funding: paid)
//
// And per market, walking the trader's fills, liquidations and funding
// flows in seq order (one seq space, so that is the order they happened
// in) from a flat position:
//
//   - a fill closes what was open: min(its contracts, the position) when
//     it is on the other side, nothing otherwise; and its positionAfter is
//     the position the walk reached;
//   - a liquidation closes at most the position, on its side; a partial
//     one leaves remainingContracts open with remainingMarginMsat as
//     above, a full one leaves nothing and returns remainderMsat as above;
//     a deficit leaves no remainder and no penalty, the fund covers at
//     most the deficit, and ADL runs exactly when it could not cover all;
//   - a funding flow belongs to an open position, is paid by the side the
//     rate's sign says (a long pays a positive rate), in full unless the
//     margin ran out, and moves the margin by paidMsat; a position pays
//     once per boundary;
//   - what the walk ends with is the listed position, contracts and
//     margin.
//
// Across traders, on one node: an ADL fill names a liquidation some other
// trader lists with adlTriggered, in the same market, on the liquidated
// side's opposite position (the fill buys back a short when a long was
// liquidated), after it (larger seq), and the ADL fills of one
// liquidation close at most what it closed. Every seq (fills,
// liquidations, funding flows, of every trader) is listed once.

// Risk record bounds and names (fsm/trade).
const (
	// LiquidationsKept and FundingFlowsKept are how many records a node
	// keeps per account; with that many, older ones may be gone.
	LiquidationsKept = 1000
	FundingFlowsKept = 1000
	// ADLOrderPrefix starts the order id of an auto-deleveraging fill.
	ADLOrderPrefix = "adl-"
	// ReasonLiquidation is the reason of the orders and triggers the
	// engine cancels before liquidating a position.
	ReasonLiquidation = "liquidation"
)

// LiquidationFinal is one listed liquidation. Long is the liquidated
// position's side; HasRemainder is set when the record carried
// remainderMsat (full liquidations only).
type LiquidationFinal struct {
	PositionID           string `json:"positionId"`
	MarketID             string `json:"marketId"`
	Long                 bool   `json:"long"`
	Closed               int64  `json:"closed"`
	Partial              bool   `json:"partial"`
	ExecQ8               int64  `json:"execQ8"`
	RealizedPnlMsat      int64  `json:"realizedPnlMsat"`
	FundingSettledMsat   int64  `json:"fundingSettledMsat,omitempty"`
	PenaltyMsat          int64  `json:"penaltyMsat"`
	HasRemainder         bool   `json:"hasRemainder"`
	RemainderMsat        int64  `json:"remainderMsat"`
	DeficitMsat          int64  `json:"deficitMsat"`
	InsuranceCoveredMsat int64  `json:"insuranceCoveredMsat"`
	ADLTriggered         bool   `json:"adlTriggered"`
	RemainingContracts   int64  `json:"remainingContracts"`
	RemainingMarginMsat  int64  `json:"remainingMarginMsat"`
	Seq                  string `json:"seq"`
	// TsMs is the liquidation's log time (0: not read).
	TsMs int64 `json:"tsMs,omitempty"`
}

// NetMsat is what the liquidation moved into the trader's equity.
func (l LiquidationFinal) NetMsat() int64 { return l.RealizedPnlMsat + l.DeficitMsat - l.PenaltyMsat }

// FundingFinal is one listed funding flow; FlowMsat and PaidMsat are
// signed from the trader's side (negative: it paid).
type FundingFinal struct {
	MarketID     string `json:"marketId"`
	BoundaryTsMs int64  `json:"boundaryTsMs"`
	RateQ9       int64  `json:"rateQ9"`
	FlowMsat     int64  `json:"flowMsat"`
	PaidMsat     int64  `json:"paidMsat"`
	PositionID   string `json:"positionId"`
	Seq          string `json:"seq"`
}

// isADL reports whether a fill was made by auto-deleveraging, and the seq
// of the liquidation it names.
func isADL(orderID string) (string, bool) {
	rest, ok := strings.CutPrefix(orderID, ADLOrderPrefix)
	return rest, ok
}

// walkPos is the position the walk reached in one market: signed
// contracts and margin.
type walkPos struct{ n, margin int64 }

// riskEvent is one record of a trader's walk.
type riskEvent struct {
	seq  uint64
	fill *FillFinal
	liq  *LiquidationFinal
	fund *FundingFinal
}

func sign(n int64) int64 {
	switch {
	case n > 0:
		return 1
	case n < 0:
		return -1
	}
	return 0
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func positionSide(long bool) string {
	if long {
		return "long"
	}
	return "short"
}

func sideSign(buyOrLong bool) int64 {
	if buyOrLong {
		return 1
	}
	return -1
}

// checkRisk walks one node's view of a trader as explained above, checks
// every ADL fill's own shape, and returns what liquidations and funding
// moved into the trader's equity.
func checkRisk(bad func(*int, string, ...any), rep *TradingReport, v *TraderView) int64 {
	var net int64
	kindOf := map[uint64]string{}
	var events []riskEvent
	add := func(kind, seq string, e riskEvent) {
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil {
			bad(nil, "%s seq %q is not a number", kind, seq)
			return
		}
		if prev, ok := kindOf[n]; ok {
			bad(nil, "seq %d is listed twice (as a %s and as a %s)", n, prev, kind)
			return
		}
		kindOf[n] = kind
		e.seq = n
		events = append(events, e)
	}
	for i := range v.Fills {
		f := &v.Fills[i]
		add("fill", f.Seq, riskEvent{fill: f})
		if f.FundingSettledMsat != 0 {
			bad(nil, "fill seq %s settled %d msat of funding: funding settles at boundaries, never in a fill", f.Seq, f.FundingSettledMsat)
		}
		if _, ok := isADL(f.OrderID); ok && (f.Opened != 0 || f.Closed < 1 || f.FeeMsat != 0 || f.DeficitMsat != 0 || f.RealizedPnlMsat < 0) {
			bad(nil, "ADL fill seq %s (%s) closed %d, opened %d, fee %d, deficit %d, PnL %d: an ADL close only closes, without fee or deficit, at a profit cut at most to zero",
				f.Seq, f.OrderID, f.Closed, f.Opened, f.FeeMsat, f.DeficitMsat, f.RealizedPnlMsat)
		}
	}
	for i := range v.Liquidations {
		l := &v.Liquidations[i]
		add("liquidation", l.Seq, riskEvent{liq: l})
		net += l.NetMsat()
	}
	boundary := map[string]string{}
	for i := range v.Funding {
		g := &v.Funding[i]
		add("funding flow", g.Seq, riskEvent{fund: g})
		net += g.PaidMsat
		k := g.MarketID + "@" + strconv.FormatInt(g.BoundaryTsMs, 10)
		if prev, ok := boundary[k]; ok {
			bad(nil, "funding flows seq %s and %s both settle %s at boundary %d", prev, g.Seq, g.MarketID, g.BoundaryTsMs)
		}
		boundary[k] = g.Seq
	}
	sort.Slice(events, func(i, j int) bool { return events[i].seq < events[j].seq })
	walk := map[string]*walkPos{}
	at := func(m string) *walkPos {
		if walk[m] == nil {
			walk[m] = &walkPos{}
		}
		return walk[m]
	}
	for _, e := range events {
		switch {
		case e.fill != nil:
			f := e.fill
			p := at(f.MarketID)
			q, s := f.Closed+f.Opened, sideSign(f.Buy)
			closes := int64(0)
			if p.n != 0 && sign(p.n) != s {
				closes = min(q, abs(p.n))
			}
			if f.Closed != closes {
				bad(nil, "fill seq %s of order %s (%s %d in %s) closed %d contracts of a position of %d: it closes %d",
					f.Seq, f.OrderID, sideName(f.Buy), q, f.MarketID, f.Closed, p.n, closes)
			}
			p.n += s * q
			if f.AfterContracts != p.n {
				bad(nil, "fill seq %s of order %s left a position of %d by its positionAfter, but the records before it make %d",
					f.Seq, f.OrderID, f.AfterContracts, p.n)
				p.n = f.AfterContracts
			}
			p.margin = f.AfterMarginMsat
		case e.liq != nil:
			checkLiquidation(bad, rep, e.liq, at(e.liq.MarketID))
		case e.fund != nil:
			g, p := e.fund, at(e.fund.MarketID)
			checkFunding(bad, g, p.n, p.margin)
			p.margin += g.PaidMsat
		}
	}
	held := map[string]PositionFinal{}
	for _, p := range v.Positions {
		if _, ok := held[p.MarketID]; ok {
			bad(nil, "two positions listed in %s", p.MarketID)
		}
		held[p.MarketID] = p
	}
	for m := range walk {
		if _, ok := held[m]; !ok {
			held[m] = PositionFinal{MarketID: m}
		}
	}
	for _, m := range sortedMapKeys(held) {
		h, w := held[m], at(m)
		if h.Contracts != w.n {
			bad(nil, "position in %s is %d contracts but its fills and liquidations sum to %d", m, h.Contracts, w.n)
		} else if h.MarginMsat != w.margin {
			bad(nil, "position in %s holds %d msat of margin but its last fill, liquidation and funding flows leave %d", m, h.MarginMsat, w.margin)
		}
	}
	return net
}

// checkLiquidation checks one liquidation against the position p the walk
// reached before it, and moves p past it.
func checkLiquidation(bad func(*int, string, ...any), rep *TradingReport, l *LiquidationFinal, p *walkPos) {
	side := positionSide(l.Long)
	if l.FundingSettledMsat != 0 {
		bad(nil, "liquidation seq %s settled %d msat of funding: funding settles at boundaries, never in a liquidation", l.Seq, l.FundingSettledMsat)
	}
	if p.n == 0 || sign(p.n) != sideSign(l.Long) {
		bad(nil, "liquidation seq %s closed %d contracts of a %s position in %s, but the position was %d",
			l.Seq, l.Closed, side, l.MarketID, p.n)
		p.margin = 0
		if l.Partial {
			p.n, p.margin = sideSign(l.Long)*l.RemainingContracts, l.RemainingMarginMsat
		} else {
			p.n = 0
		}
		return
	}
	open := abs(p.n)
	if l.Closed < 1 || l.Closed > open {
		bad(&rep.OverLiquidated, "liquidation seq %s closed %d contracts of a %s position of %d in %s", l.Seq, l.Closed, side, open, l.MarketID)
	}
	if l.PenaltyMsat < 0 || l.DeficitMsat < 0 || l.InsuranceCoveredMsat < 0 || l.InsuranceCoveredMsat > l.DeficitMsat {
		bad(nil, "liquidation seq %s: penalty %d, deficit %d, insurance cover %d: none negative, cover at most the deficit",
			l.Seq, l.PenaltyMsat, l.DeficitMsat, l.InsuranceCoveredMsat)
	}
	if l.ADLTriggered != (l.InsuranceCoveredMsat < l.DeficitMsat) {
		bad(nil, "liquidation seq %s: adlTriggered %t with deficit %d and insurance cover %d", l.Seq, l.ADLTriggered, l.DeficitMsat, l.InsuranceCoveredMsat)
	}
	if l.Partial {
		switch {
		case l.HasRemainder || l.DeficitMsat != 0:
			bad(nil, "partial liquidation seq %s has a remainder (%t) or a deficit (%d)", l.Seq, l.HasRemainder, l.DeficitMsat)
		case l.RemainingContracts != open-l.Closed || l.RemainingContracts < 1:
			bad(nil, "partial liquidation seq %s closed %d of %d contracts but leaves %d", l.Seq, l.Closed, open, l.RemainingContracts)
		case l.RemainingMarginMsat != p.margin+l.RealizedPnlMsat-l.PenaltyMsat || l.RemainingMarginMsat <= 0:
			bad(nil, "partial liquidation seq %s leaves %d msat of margin, but margin %d + PnL %d - penalty %d is %d",
				l.Seq, l.RemainingMarginMsat, p.margin, l.RealizedPnlMsat, l.PenaltyMsat, p.margin+l.RealizedPnlMsat-l.PenaltyMsat)
		}
		p.n -= sideSign(l.Long) * l.Closed
		p.margin = l.RemainingMarginMsat
		return
	}
	left := p.margin + l.RealizedPnlMsat + l.DeficitMsat
	switch {
	case l.Closed != open || l.RemainingContracts != 0 || l.RemainingMarginMsat != 0:
		bad(nil, "full liquidation seq %s closed %d of %d contracts and leaves %d with %d msat", l.Seq, l.Closed, open, l.RemainingContracts, l.RemainingMarginMsat)
	case !l.HasRemainder:
		bad(nil, "full liquidation seq %s has no remainderMsat", l.Seq)
	case l.RemainderMsat != left-l.PenaltyMsat || l.RemainderMsat < 0:
		bad(nil, "full liquidation seq %s returned %d msat to free, but margin %d + PnL %d + deficit %d - penalty %d is %d",
			l.Seq, l.RemainderMsat, p.margin, l.RealizedPnlMsat, l.DeficitMsat, l.PenaltyMsat, left-l.PenaltyMsat)
	case l.DeficitMsat > 0 && (l.PenaltyMsat != 0 || left != 0):
		bad(nil, "full liquidation seq %s has a deficit of %d msat yet a penalty of %d and %d msat of margin left", l.Seq, l.DeficitMsat, l.PenaltyMsat, left)
	}
	p.n -= sideSign(l.Long) * min(l.Closed, open)
	p.margin = 0
}

// checkFunding checks one funding flow against the position (n
// contracts, margin msat) it settled.
func checkFunding(bad func(*int, string, ...any), g *FundingFinal, n, margin int64) {
	switch {
	case n == 0:
		bad(nil, "funding flow seq %s in %s, but no position was open there", g.Seq, g.MarketID)
	case g.FlowMsat == 0 || g.RateQ9 == 0:
		bad(nil, "funding flow seq %s of %d msat at rate %d: a zero flow is not recorded", g.Seq, g.FlowMsat, g.RateQ9)
	case sign(g.FlowMsat) != -sign(g.RateQ9)*sign(n):
		bad(nil, "funding flow seq %s: a position of %d at rate %d got %d msat (a long pays a positive rate)", g.Seq, n, g.RateQ9, g.FlowMsat)
	case g.FlowMsat > 0 && g.PaidMsat != g.FlowMsat:
		bad(nil, "funding flow seq %s was owed %d msat but %d moved", g.Seq, g.FlowMsat, g.PaidMsat)
	case g.FlowMsat < 0 && (g.PaidMsat < g.FlowMsat || g.PaidMsat > 0 || (g.PaidMsat != g.FlowMsat && -g.PaidMsat != margin)):
		bad(nil, "funding flow seq %s owed %d msat and paid %d from a margin of %d: all of it, or all the margin", g.Seq, g.FlowMsat, g.PaidMsat, margin)
	}
}

// adlRef is an ADL fill found on one node: whose, and the fill.
type adlRef struct {
	trader string
	fill   FillFinal
}

// checkADL checks, on each node, every trader's ADL fills against the
// liquidations all traders list there. A liquidation that cannot be found
// is a violation only when every trader's view was read on that node with
// all its records (under the kept bounds); otherwise it is unknown.
func checkADL(res *Result, final *Final, traders []string) {
	nodes := map[string]bool{}
	for _, a := range traders {
		if tf := final.Traders[a]; tf != nil {
			for n := range tf.Nodes {
				nodes[n] = true
			}
		}
	}
	for _, node := range sortedMapKeys(nodes) {
		liqs := map[string]LiquidationFinal{}
		liqOf := map[string]string{}
		seqOwner := map[string]string{}
		complete := true
		var adls []adlRef
		for _, a := range traders {
			tf := final.Traders[a]
			var v *TraderView
			if tf != nil {
				v = tf.Nodes[node]
			}
			if v == nil || len(v.Liquidations) >= LiquidationsKept || len(v.Fills) >= FillsKept {
				complete = false
				continue
			}
			own := func(seq, what string) {
				if prev, ok := seqOwner[seq]; ok && prev != a {
					res.Verdict = Violation
					res.addf("on %s: seq %s is listed by %s and by %s (%s): one seq, one record", node, seq, prev, a, what)
				}
				seqOwner[seq] = a
			}
			for _, l := range v.Liquidations {
				liqs[l.Seq], liqOf[l.Seq] = l, a
				own(l.Seq, "a liquidation")
			}
			for _, f := range v.Fills {
				own(f.Seq, "a fill")
				if _, ok := isADL(f.OrderID); ok {
					adls = append(adls, adlRef{a, f})
				}
			}
			for _, g := range v.Funding {
				own(g.Seq, "a funding flow")
			}
		}
		closedBy := map[string]int64{}
		for _, r := range adls {
			seq, _ := isADL(r.fill.OrderID)
			l, ok := liqs[seq]
			if !ok {
				if complete {
					res.Verdict = Violation
					res.addf("%s on %s: ADL fill seq %s names liquidation %s, which no trader lists", r.trader, node, r.fill.Seq, seq)
				} else {
					res.Verdict = worse(res.Verdict, Unknown)
					res.addf("%s on %s: ADL fill seq %s names liquidation %s, not among the liquidations read", r.trader, node, r.fill.Seq, seq)
				}
				continue
			}
			fs, err1 := strconv.ParseUint(r.fill.Seq, 10, 64)
			ls, err2 := strconv.ParseUint(seq, 10, 64)
			switch {
			case liqOf[seq] == r.trader:
				res.Verdict = Violation
				res.addf("%s on %s: ADL fill seq %s deleverages the trader's own liquidation %s", r.trader, node, r.fill.Seq, seq)
			case !l.ADLTriggered:
				res.Verdict = Violation
				res.addf("%s on %s: ADL fill seq %s for liquidation %s of %s, which did not trigger ADL", r.trader, node, r.fill.Seq, seq, liqOf[seq])
			case r.fill.MarketID != l.MarketID || r.fill.Buy != l.Long:
				res.Verdict = Violation
				res.addf("%s on %s: ADL fill seq %s is a %s in %s, but liquidation %s closed a %s position in %s",
					r.trader, node, r.fill.Seq, sideName(r.fill.Buy), r.fill.MarketID, seq, positionSide(l.Long), l.MarketID)
			case err1 != nil || err2 != nil || fs <= ls:
				res.Verdict = Violation
				res.addf("%s on %s: ADL fill seq %s is not after its liquidation %s", r.trader, node, r.fill.Seq, seq)
			}
			closedBy[seq] += r.fill.Closed
		}
		for _, seq := range sortedMapKeys(closedBy) {
			if l, ok := liqs[seq]; ok && closedBy[seq] > l.Closed {
				res.Verdict = Violation
				res.addf("on %s: ADL fills of liquidation %s closed %d contracts, the liquidation only %d", node, seq, closedBy[seq], l.Closed)
			}
		}
	}
}

// checkLiquidationCancels holds every order a node lists as canceled by a
// liquidation to a liquidation of the trader in that market on that node.
func checkLiquidationCancels(bad func(*int, string, ...any), v *TraderView) {
	if len(v.Liquidations) >= LiquidationsKept {
		return
	}
	liquidated := map[string]bool{}
	for _, l := range v.Liquidations {
		liquidated[l.MarketID] = true
	}
	for _, o := range v.Orders {
		if o.Status == "canceled" && o.Reason == ReasonLiquidation && o.MarketID != "" && !liquidated[o.MarketID] {
			bad(nil, "order %s was canceled by a liquidation, but no position in %s was liquidated", o.OrderID, o.MarketID)
		}
	}
}
