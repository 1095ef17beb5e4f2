package checker

import (
	"fmt"
	"sort"
)

// The nodes against each other. A fill, a liquidation or a funding flow
// is made by one log entry and gets its seq there, so a seq listed on two
// nodes is the same record on both; and an order that has ended (filled,
// canceled, rejected) stays as it ended. Any difference there is a
// violation, whenever the views were read.
//
// Whole views are compared only for a settled trader: the harness saw it
// with no live order or trigger at some index I, every view was read at
// or past I, and no placement of the trader has an unknown outcome (one
// could still be applied later). From I on nothing of the trader can
// change: no order to fill, cancel or fire; no grant; no liquidation or
// auto-deleveraging, because the harness pinned every feed and waited for
// a print at the pinned price (which liquidates whatever it makes due)
// before I; and no funding, because the harness does not call a trader
// settled when an hourly boundary may fall between I and its last read.
// So every node must list the same fills, liquidations, funding flows,
// orders, triggers, positions and balances. A trader that is not settled
// and whose views differ is reported as unknown.

// maxReplicaDiffs bounds the differences reported per pair of nodes.
const maxReplicaDiffs = 5

// checkReplicas compares the nodes' views of trader a.
func checkReplicas(res *Result, a string, tf *TraderFinal, settled bool) {
	nodes := sortedMapKeys(tf.Nodes)
	fills, fillAt := map[string]FillFinal{}, map[string]string{}
	ended, endedAt := map[string]OrderFinal{}, map[string]string{}
	liqs, liqAt := map[string]LiquidationFinal{}, map[string]string{}
	flows, flowAt := map[string]FundingFinal{}, map[string]string{}
	for _, node := range nodes {
		for _, l := range tf.Nodes[node].Liquidations {
			if m, ok := liqs[l.Seq]; !ok {
				liqs[l.Seq], liqAt[l.Seq] = l, node
			} else if m != l {
				res.Verdict = Violation
				res.addf("%s: liquidation seq %s is %+v on %s but %+v on %s", a, l.Seq, m, liqAt[l.Seq], l, node)
			}
		}
		for _, g := range tf.Nodes[node].Funding {
			if m, ok := flows[g.Seq]; !ok {
				flows[g.Seq], flowAt[g.Seq] = g, node
			} else if m != g {
				res.Verdict = Violation
				res.addf("%s: funding flow seq %s is %+v on %s but %+v on %s", a, g.Seq, m, flowAt[g.Seq], g, node)
			}
		}
		for _, f := range tf.Nodes[node].Fills {
			g, ok := fills[f.Seq]
			if !ok {
				fills[f.Seq], fillAt[f.Seq] = f, node
				continue
			}
			if g != f {
				res.Verdict = Violation
				res.addf("%s: fill seq %s is %+v on %s but %+v on %s", a, f.Seq, g, fillAt[f.Seq], f, node)
			}
		}
		for _, o := range tf.Nodes[node].Orders {
			if o.Status == "accepted" {
				continue
			}
			p, ok := ended[o.OrderID]
			if !ok {
				ended[o.OrderID], endedAt[o.OrderID] = o, node
				continue
			}
			if p != o {
				res.Verdict = Violation
				res.addf("%s: order %s ended as %+v on %s but %+v on %s", a, o.OrderID, p, endedAt[o.OrderID], o, node)
			}
		}
	}
	if len(nodes) < 2 {
		return
	}
	ref := tf.Nodes[nodes[0]]
	for _, node := range nodes[1:] {
		diffs := diffViews(ref, tf.Nodes[node])
		if len(diffs) == 0 {
			continue
		}
		if !settled {
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: %s and %s differ (%s), but the trader was not settled: not judged", a, nodes[0], node, diffs[0])
			continue
		}
		res.Verdict = Violation
		for _, d := range diffs {
			res.addf("%s: settled, yet %s and %s differ: %s", a, nodes[0], node, d)
		}
	}
}

// diffViews describes up to maxReplicaDiffs differences between x and y.
func diffViews(x, y *TraderView) []string {
	var out []string
	add := func(format string, args ...any) {
		if len(out) < maxReplicaDiffs {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	if x.FreeMsat != y.FreeMsat || x.ReservedMsat != y.ReservedMsat {
		add("free/reserved %d/%d vs %d/%d msat", x.FreeMsat, x.ReservedMsat, y.FreeMsat, y.ReservedMsat)
	}
	diffSets(add, "position", keyed(x.Positions, func(p PositionFinal) string { return p.MarketID }),
		keyed(y.Positions, func(p PositionFinal) string { return p.MarketID }))
	diffSets(add, "fill seq", keyed(x.Fills, func(f FillFinal) string { return f.Seq }),
		keyed(y.Fills, func(f FillFinal) string { return f.Seq }))
	diffSets(add, "liquidation seq", keyed(x.Liquidations, func(l LiquidationFinal) string { return l.Seq }),
		keyed(y.Liquidations, func(l LiquidationFinal) string { return l.Seq }))
	diffSets(add, "funding flow seq", keyed(x.Funding, func(g FundingFinal) string { return g.Seq }),
		keyed(y.Funding, func(g FundingFinal) string { return g.Seq }))
	diffSets(add, "order", keyed(x.Orders, func(o OrderFinal) string { return o.OrderID }),
		keyed(y.Orders, func(o OrderFinal) string { return o.OrderID }))
	diffSets(add, "trigger", keyed(x.Triggers, func(t TriggerFinal) string { return t.OrderID }),
		keyed(y.Triggers, func(t TriggerFinal) string { return t.OrderID }))
	return out
}

func keyed[T any](xs []T, key func(T) string) map[string]T {
	m := make(map[string]T, len(xs))
	for _, x := range xs {
		m[key(x)] = x
	}
	return m
}

// diffSets reports records present on one side only or different.
func diffSets[T comparable](add func(string, ...any), what string, x, y map[string]T) {
	keys := sortedMapKeys(x)
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, inX := x[k]
		b, inY := y[k]
		switch {
		case !inX:
			add("%s %s only on the second: %+v", what, k, b)
		case !inY:
			add("%s %s only on the first: %+v", what, k, a)
		case a != b:
			add("%s %s is %+v vs %+v", what, k, a, b)
		}
	}
}
