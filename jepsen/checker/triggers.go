package checker

import (
	"strconv"

	"github.com/perpd/perpd/jepsen/history"
)

// Triggers and brackets (fsm/trade/triggers.go, docs/decisions.md
// "Triggers and brackets"). A trigger's fills are ordinary fills under its
// order id, and a bracket's legs are orders with ids of their own
// (<bracket>.stop, <bracket>.tp), placed by the bracket's write: the
// checks of trading.go (no lost, doubled or phantom fill, canceled never
// fills, status agrees with fills) cover them through placements. What
// the history proves besides, and is checked here:
//
//   - every fill is on the market and side the order asked for (a leg on
//     the entry's other side); a reduce-only order (every leg) only
//     closes, at most its contracts, since the engine trims it to the
//     position; any other order fills exactly its contracts (markets stay
//     live during a run, so nothing else trims them);
//   - one-cancels-other: at most one leg of a bracket has a fill, unless
//     the first leg to fill closed only part of the bracket's contracts
//     (feature level 8, trade.LevelPartialLegsKeepSibling): then the other
//     stays armed for the rest, trimmed to at most what was left (the
//     entry's contracts less the first leg's, and no more than the
//     position the first leg's fill left), and fills at most that; from
//     feature level 9 (trade.LevelLegsSizedToEntry) an entry that first
//     closed an opposite position arms its legs trimmed to what it
//     opened, which then stands for its contracts;
//   - a leg executes only after its entry: the bracket's own id has a
//     fill with a smaller seq (seqs come from one increasing space);
//   - an acknowledged trigger (or trigger-entry bracket) answered
//     working, a market-entry bracket filled;
//   - each listed order and each record of the triggers page is what was
//     placed (type, side, contracts, level, reduce-only, OCO group), the
//     page holds only live triggers (armed; resting only for a leg), and,
//     once the trader is settled (see replicas.go), it holds exactly the
//     orders listed as accepted that are not limit orders.

// ReasonOCO is the reason of a leg the engine canceled because the other
// leg of its bracket executed (fsm/trade.ReasonOCO).
const ReasonOCO = "oco"

// placement is how an order id came to be: the write that placed it and,
// for a bracket leg, which leg.
type placement struct {
	w   Write
	leg *history.LegSpec
}

func (p placement) spec() *history.OrderSpec { return p.w.Invoke.Spec }

// placements maps every order id the writes may have made (legs
// included) to its placement.
func placements(ws []Write) map[string]placement {
	out := map[string]placement{}
	for _, w := range ws {
		out[w.Invoke.IdemKey] = placement{w: w}
		if s := w.Invoke.Spec; s != nil {
			for i := range s.Legs {
				out[s.Legs[i].ID] = placement{w: w, leg: &s.Legs[i]}
			}
		}
	}
	return out
}

// placedWrites maps every order id to the write that placed it.
func placedWrites(placed map[string]placement) map[string]Write {
	out := make(map[string]Write, len(placed))
	for id, p := range placed {
		out[id] = p.w
	}
	return out
}

// orderWant is what an order id must look like, from its placement.
type orderWant struct {
	market     string
	buy        bool
	contracts  int64
	reduceOnly bool
	trigger    bool   // listed on the triggers page while live
	kind       string // its trigger kind (entry for a bracket's entry)
	levelQ8    int64
	ocoGroup   string
	orderType  string // its type in the order view
	leg        bool
}

// want is nil when the history does not describe the placement.
func (p placement) want() *orderWant {
	s := p.spec()
	if s == nil {
		return nil
	}
	w := &orderWant{market: s.Market, buy: s.Buy, contracts: s.Contracts, reduceOnly: s.ReduceOnly,
		trigger: s.IsTrigger(), kind: s.Kind, levelQ8: s.LevelQ8}
	if p.leg != nil {
		w.buy, w.contracts, w.reduceOnly, w.trigger = !s.Buy, p.leg.Contracts, true, true
		w.kind, w.levelQ8, w.ocoGroup, w.leg = p.leg.Kind, p.leg.LevelQ8, p.w.Invoke.IdemKey, true
	} else if s.Kind == history.KindBracket {
		w.kind, w.ocoGroup = history.KindEntry, p.w.Invoke.IdemKey
	}
	switch w.kind {
	case history.KindLimit:
		w.orderType = "limit"
	case history.KindStop:
		w.orderType = "stop_market"
	case history.KindTakeProfit:
		w.orderType = "take_profit_market"
	default:
		w.orderType = "market"
	}
	return w
}

func sideName(buy bool) string {
	if buy {
		return "buy"
	}
	return "sell"
}

// checkTriggerAnswers checks what acknowledged trigger and bracket
// placements answered.
func checkTriggerAnswers(res *Result, a string, orders []Write) {
	for _, w := range orders {
		s := w.Invoke.Spec
		if w.Outcome != Applied || s == nil {
			continue
		}
		want := ""
		switch {
		case s.IsTrigger():
			want = "working"
		case s.Kind == history.KindBracket:
			want = "filled"
		}
		if want != "" && w.OrderStatus != want {
			res.Verdict = Violation
			res.addf("%s: %s %s (op #%d) answered %q, want %q", a, s.Kind, w.Invoke.IdemKey, w.Invoke.ID, w.OrderStatus, want)
		}
	}
}

// fillsByOrder groups a view's fills by order id.
func fillsByOrder(v *TraderView) map[string][]FillFinal {
	fillsOf := map[string][]FillFinal{}
	for _, f := range v.Fills {
		fillsOf[f.OrderID] = append(fillsOf[f.OrderID], f)
	}
	return fillsOf
}

// legsLeft finds, for each bracket whose first leg to fill closed only
// part of its entry's contracts, what the other leg may still cover: the
// entry's contracts less the first leg's, at most the position the first
// leg's fill left, at most the leg's own contracts. Such a leg may be
// listed trimmed to it and fill at most it; a leg missing from the map
// must not fill once its sibling did.
func legsLeft(fillsOf map[string][]FillFinal, placed map[string]placement) map[string]int64 {
	out := map[string]int64{}
	for _, id := range sortedMapKeys(placed) {
		p := placed[id]
		if p.leg != nil || p.spec() == nil || p.spec().Kind != history.KindBracket || len(p.spec().Legs) != 2 {
			continue
		}
		legs := p.spec().Legs
		first, other := -1, -1
		var firstSeq uint64
		for i, l := range legs {
			if lf := fillsOf[l.ID]; len(lf) > 0 {
				if seq, err := strconv.ParseUint(lf[0].Seq, 10, 64); err == nil && (first < 0 || seq < firstSeq) {
					first, firstSeq = i, seq
				}
			}
		}
		if first < 0 {
			continue
		}
		other = 1 - first
		f := fillsOf[legs[first].ID][0]
		after := f.AfterContracts
		if after < 0 {
			after = -after
		}
		opened := entryOpened(fillsOf, id, p.spec().Contracts)
		if left := min(opened-f.Closed, after, legs[other].Contracts, opened); left > 0 {
			out[legs[other].ID] = left
		}
	}
	return out
}

// entryOpened is what bracket id's entry opened on its side: its
// contracts, or fewer when its fill first closed an opposite position
// (feature level 9, trade.LevelLegsSizedToEntry: the legs then arm
// trimmed to it).
func entryOpened(fillsOf map[string][]FillFinal, id string, contracts int64) int64 {
	if ef := fillsOf[id]; len(ef) > 0 && ef[0].Opened > 0 && ef[0].Opened < contracts {
		return ef[0].Opened
	}
	return contracts
}

// legsArmed finds the legs whose bracket's entry opened fewer contracts
// than it has (entryOpened): they arm trimmed to what it opened, and may
// be listed so.
func legsArmed(fillsOf map[string][]FillFinal, placed map[string]placement) map[string]int64 {
	out := map[string]int64{}
	for _, id := range sortedMapKeys(placed) {
		p := placed[id]
		if p.leg != nil || p.spec() == nil || p.spec().Kind != history.KindBracket {
			continue
		}
		opened := entryOpened(fillsOf, id, p.spec().Contracts)
		for _, l := range p.spec().Legs {
			if l.Contracts > opened {
				out[l.ID] = opened
			}
		}
	}
	return out
}

// checkSpecs holds one node's fills and listed orders to what the run
// asked for, and checks each bracket's legs against each other and their
// entry.
func checkSpecs(bad func(*int, string, ...any), v *TraderView, placed map[string]placement) {
	fillsOf := fillsByOrder(v)
	left, armed := legsLeft(fillsOf, placed), legsArmed(fillsOf, placed)
	for _, id := range sortedMapKeys(fillsOf) {
		want := placed[id].want()
		if want == nil {
			continue
		}
		for _, f := range fillsOf[id] {
			switch {
			case f.MarketID != want.market || f.Buy != want.buy:
				bad(nil, "fill seq %s of order %s is a %s in %s, the order was a %s in %s",
					f.Seq, id, sideName(f.Buy), f.MarketID, sideName(want.buy), want.market)
			case want.reduceOnly && (f.Opened != 0 || f.Closed < 1 || f.Closed > want.contracts):
				bad(nil, "fill seq %s of reduce-only order %s of %d contracts closed %d and opened %d",
					f.Seq, id, want.contracts, f.Closed, f.Opened)
			case !want.reduceOnly && f.Closed+f.Opened != want.contracts:
				bad(nil, "fill seq %s of order %s of %d contracts is for %d", f.Seq, id, want.contracts, f.Closed+f.Opened)
			}
		}
	}
	for _, id := range sortedMapKeys(placed) {
		p := placed[id]
		if p.leg != nil || p.spec() == nil || p.spec().Kind != history.KindBracket {
			continue
		}
		var filled []string
		for _, l := range p.spec().Legs {
			lf := fillsOf[l.ID]
			if len(lf) == 0 {
				continue
			}
			filled = append(filled, l.ID)
			entry := fillsOf[id]
			if len(entry) == 0 {
				bad(nil, "leg %s filled but its entry %s never did", l.ID, id)
				continue
			}
			ls, err1 := strconv.ParseUint(lf[0].Seq, 10, 64)
			es, err2 := strconv.ParseUint(entry[0].Seq, 10, 64)
			if err1 == nil && err2 == nil && ls <= es {
				bad(nil, "leg %s filled at seq %d, not after its entry's fill at seq %d", l.ID, ls, es)
			}
		}
		if len(filled) > 1 {
			// Each leg's first fill is what legsLeft ordered by seq; the
			// later one is allowed only for what the earlier one left.
			for _, l := range filled {
				if n, ok := left[l]; ok {
					if c := fillsOf[l][0].Closed; c > n {
						bad(nil, "leg %s of bracket %s closed %d contracts after its sibling left %d", l, id, c, n)
					}
					continue
				}
				if !legFilledFirst(fillsOf, filled, l) {
					bad(nil, "both legs of bracket %s filled (%s and %s): one-cancels-other broken", id, filled[0], filled[1])
				}
			}
		}
	}
	for _, o := range v.Orders {
		want := placed[o.OrderID].want()
		if want == nil || o.Type == "" {
			continue
		}
		if o.Type != want.orderType || o.Buy != want.buy || !listedContracts(o.Contracts, want.contracts, left, armed, o.OrderID) || o.MarketID != want.market {
			bad(nil, "order %s is listed as %s %s %d in %s, it was placed as %s %s %d in %s", o.OrderID,
				o.Type, sideName(o.Buy), o.Contracts, o.MarketID, want.orderType, sideName(want.buy), want.contracts, want.market)
		}
	}
}

// legFilledFirst reports whether leg l's first fill comes before every
// other leg's in filled.
func legFilledFirst(fillsOf map[string][]FillFinal, filled []string, l string) bool {
	mine, err := strconv.ParseUint(fillsOf[l][0].Seq, 10, 64)
	if err != nil {
		return false
	}
	for _, o := range filled {
		if seq, err := strconv.ParseUint(fillsOf[o][0].Seq, 10, 64); o != l && (err != nil || seq < mine) {
			return false
		}
	}
	return true
}

// listedContracts: an order is listed with the contracts it was placed
// with, or a leg with what its partially filled sibling left it, or
// with what its entry opened (legsArmed).
func listedContracts(got, placed int64, left, armed map[string]int64, id string) bool {
	if n, ok := left[id]; ok && got == n {
		return true
	}
	if n, ok := armed[id]; ok && got == n {
		return true
	}
	return got == placed
}

// checkTriggers checks one node's triggers page: each record was placed
// as listed and is live; once settled, the page holds exactly the live
// orders that are triggers.
func checkTriggers(res *Result, a, node string, v *TraderView, placed map[string]placement, settled bool) {
	bad := func(format string, args ...any) {
		res.Verdict = Violation
		res.addf("%s on %s: "+format, append([]any{a, node}, args...)...)
	}
	onPage := map[string]bool{}
	fillsOf := fillsByOrder(v)
	left, armed := legsLeft(fillsOf, placed), legsArmed(fillsOf, placed)
	for _, t := range v.Triggers {
		if onPage[t.OrderID] {
			bad("trigger %s is on the triggers page twice", t.OrderID)
		}
		onPage[t.OrderID] = true
		p, ok := placed[t.OrderID]
		if !ok || p.w.Outcome == NotApplied {
			bad("trigger %s is on the triggers page but was never placed or certainly failed", t.OrderID)
			continue
		}
		want := p.want()
		switch {
		case want == nil:
		case !want.trigger:
			bad("order %s (%s) is on the triggers page", t.OrderID, want.kind)
		case t.Kind != want.kind || t.Buy != want.buy || !listedContracts(t.Contracts, want.contracts, left, armed, t.OrderID) || t.LevelQ8 != want.levelQ8 ||
			t.ReduceOnly != want.reduceOnly || t.OCOGroup != want.ocoGroup || t.MarketID != want.market:
			bad("trigger %s is listed as %+v, it was placed as %s %s %d at %d reduceOnly=%t oco=%q in %s", t.OrderID, t,
				want.kind, sideName(want.buy), want.contracts, want.levelQ8, want.reduceOnly, want.ocoGroup, want.market)
		case t.Status != "armed" && (t.Status != "resting" || !want.leg):
			bad("trigger %s is %s on the triggers page", t.OrderID, t.Status)
		}
	}
	if !settled {
		return
	}
	for _, o := range v.Orders {
		if o.Type == "" {
			continue // a listing that did not say
		}
		live := o.Status == "accepted" && o.Type != "limit"
		switch {
		case live && !onPage[o.OrderID]:
			bad("trigger %s is live (accepted) but not on the triggers page", o.OrderID)
		case !live && onPage[o.OrderID]:
			bad("trigger %s is on the triggers page but its order is %s", o.OrderID, o.Status)
		}
	}
}
