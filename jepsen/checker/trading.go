package checker

import (
	"sort"

	"github.com/perpd/perpd/jepsen/history"
)

// FillsKept is how many fills a node keeps per account (fsm/trade): with
// more, older fills are gone and sums over fills prove nothing.
const FillsKept = 1000

// ClosedOrdersKept is how many filled, canceled or rejected orders a node
// keeps per account (fsm/trade): with that many listed, older ones may be
// gone, so an acknowledged order missing from the listing proves nothing.
const ClosedOrdersKept = 1000

// TraderFinal is a trading account's end state as each node listed it.
type TraderFinal struct {
	// Nodes maps a node's address to its complete view; a node whose
	// listings could not all be read is missing (and Errors says why).
	Nodes  map[string]*TraderView `json:"nodes"`
	Errors []string               `json:"errors,omitempty"`
	// Settled is set when the harness saw the trader with no live order
	// or trigger at an index every view was read at or past: from there
	// on nothing can fill, so every node's view must be the same.
	Settled bool `json:"settled"`
}

// TraderView is one node's complete answer for a trader, read at or past
// the highest acknowledged raft index, after the run's writes ended.
type TraderView struct {
	FreeMsat     int64           `json:"freeMsat"`
	ReservedMsat int64           `json:"reservedMsat"`
	Positions    []PositionFinal `json:"positions"`
	Fills        []FillFinal     `json:"fills"`
	Orders       []OrderFinal    `json:"orders"`
	// Triggers is the triggers page (live triggers, armed and resting).
	Triggers []TriggerFinal `json:"triggers"`
	// Liquidations and Funding are every page of GET /v1/liquidations and
	// GET /v1/funding (risk.go).
	Liquidations []LiquidationFinal `json:"liquidations"`
	Funding      []FundingFinal     `json:"funding"`
}

// PositionFinal is one open position; Contracts is signed (short < 0).
type PositionFinal struct {
	MarketID   string `json:"marketId"`
	Contracts  int64  `json:"contracts"`
	MarginMsat int64  `json:"marginMsat"`
}

// FillFinal is one listed fill. Buy is its side.
type FillFinal struct {
	OrderID         string `json:"orderId"`
	MarketID        string `json:"marketId"`
	Buy             bool   `json:"buy"`
	Closed          int64  `json:"closed"`
	Opened          int64  `json:"opened"`
	FeeMsat         int64  `json:"feeMsat"`
	RealizedPnlMsat int64  `json:"realizedPnlMsat"`
	DeficitMsat     int64  `json:"deficitMsat"`
	// FundingSettledMsat is always 0 (funding settles at each boundary,
	// docs/decisions.md "Risk (issue 11)" 8); risk.go holds it to that.
	FundingSettledMsat int64 `json:"fundingSettledMsat,omitempty"`
	// AfterContracts (signed) and AfterMarginMsat are the position the
	// fill left (its positionAfter; 0 and 0 when flat).
	AfterContracts  int64  `json:"afterContracts"`
	AfterMarginMsat int64  `json:"afterMarginMsat"`
	Seq             string `json:"seq"`
	// TsMs is the fill's log time (0: not read).
	TsMs int64 `json:"tsMs,omitempty"`
}

// NetMsat is what the fill moved into the trader's equity (free +
// reserved + margin): the realized PnL, of which a deficit is the part
// the margin could not pay (the house absorbs it), less the fee. An ADL
// fill has no fee and its PnL is already cut.
func (f FillFinal) NetMsat() int64 { return f.RealizedPnlMsat + f.DeficitMsat - f.FeeMsat }

// OrderFinal is one listed order. Reason is why the engine closed it
// (ReasonCancelAllAfter for the switch; empty for a client's cancel).
type OrderFinal struct {
	OrderID   string `json:"orderId"`
	MarketID  string `json:"marketId,omitempty"`
	Type      string `json:"type,omitempty"`
	Buy       bool   `json:"buy"`
	Contracts int64  `json:"contracts,omitempty"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
}

// TriggerFinal is one record of the triggers page.
type TriggerFinal struct {
	OrderID    string `json:"orderId"`
	MarketID   string `json:"marketId"`
	Kind       string `json:"kind"`
	Buy        bool   `json:"buy"`
	Contracts  int64  `json:"contracts"`
	LevelQ8    int64  `json:"levelQ8"`
	ReduceOnly bool   `json:"reduceOnly"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
	OCOGroup   string `json:"ocoGroup,omitempty"`
}

// TradingReport is what the trading checker counted.
type TradingReport struct {
	Orders         int `json:"orders"` // acknowledged placements
	Fills          int `json:"fills"`  // fills listed (first complete node per trader)
	LostFills      int `json:"lostFills"`
	DoubledFills   int `json:"doubledFills"`
	CanceledFilled int `json:"canceledFilled"`
	// Arms counts acknowledged cancel-all-after arms and refreshes;
	// SwitchCancels the orders the switch canceled (first complete node);
	// CanceledWhileDisarmed those it canceled while provably disarmed.
	Arms                  int `json:"arms"`
	SwitchCancels         int `json:"switchCancels"`
	CanceledWhileDisarmed int `json:"canceledWhileDisarmed"`
	// Triggers counts acknowledged trigger and bracket placements;
	// TriggerFills the fills of triggers and bracket legs (first complete
	// node), LegFills those of legs alone; OCOCancels the legs the engine
	// canceled because the other leg executed; Blocked the triggers that
	// fired and could not execute.
	Triggers     int `json:"triggers"`
	TriggerFills int `json:"triggerFills"`
	LegFills     int `json:"legFills"`
	OCOCancels   int `json:"ocoCancels"`
	Blocked      int `json:"blocked"`
	// Liquidations counts liquidations (first complete node per trader),
	// PartialLiquidations the partial ones, Deficits those with a deficit;
	// ADLFills the fills auto-deleveraging made; FundingFlows the funding
	// flows; OverLiquidated the liquidations that closed more than was
	// open or nothing.
	Liquidations        int `json:"liquidations"`
	PartialLiquidations int `json:"partialLiquidations"`
	Deficits            int `json:"deficits"`
	ADLFills            int `json:"adlFills"`
	FundingFlows        int `json:"fundingFlows"`
	OverLiquidated      int `json:"overLiquidated"`
	// DriftMsat sums, over traders, the applied grants plus what the
	// fills moved, minus the equity observed (first complete node).
	DriftMsat int64 `json:"driftMsat"`
	// VenueNetMsat is what fills, liquidations and funding moved into the
	// venue's books (house, fee revenue, insurance fund): minus the
	// traders' sum, so the two always add up to the deposits, as the
	// ledger's own conservation check requires.
	VenueNetMsat int64 `json:"venueNetMsat"`
}

// Trading checks orders, cancels and fills on every node's final view:
// an acknowledged filled order has exactly one fill; no order has more
// than one (a retried key makes one order, one fill; a trigger executes
// once); an order canceled by an acknowledged cancel never fills; no fill
// or order exists that the run did not place, or whose placement
// certainly failed (auto-deleveraging fills excepted: they answer to the
// liquidation they name); each listed order's status agrees with its
// fills; positions equal the signed sum of their fills less what
// liquidations closed, and margins what the records leave; and each
// trader's equity (free + reserved + margin) equals its listed deposits
// plus what its fills, liquidations and funding flows moved
// (conservation; risk.go derives it). Orders the cancel-all-after switch canceled
// (reason cancel_all_after) are accepted, held to "never fills" on every
// node, and judged against the switch's calls as cancelafter.go explains.
// Triggers and brackets are judged as triggers.go explains, and the nodes
// against each other as replicas.go does.
func Trading(ops []history.Op, final *Final) (Result, TradingReport) {
	res := Result{Name: "trading", Verdict: Valid}
	var rep TradingReport
	_, orders := byAccount(Writes(ops, history.FOrder))
	_, cancels := byAccount(Writes(ops, history.FCancel))
	_, grants := byAccount(Writes(ops, history.FFaucet))
	calls := caaWrites(ops)
	var traders []string
	for a := range final.Traders {
		traders = append(traders, a)
	}
	for a := range orders {
		if final.Traders[a] == nil {
			traders = append(traders, a)
		}
	}
	for a := range calls {
		if final.Traders[a] == nil && orders[a] == nil {
			traders = append(traders, a)
		}
	}
	sort.Strings(traders)
	for _, a := range traders {
		placed := placements(orders[a])
		open := false
		for _, w := range orders[a] {
			if w.Outcome == Applied {
				rep.Orders++
				if s := w.Invoke.Spec; s != nil && (s.IsTrigger() || s.Kind == history.KindBracket) {
					rep.Triggers++
				}
			}
			open = open || w.Outcome == Indeterminate
		}
		checkTriggerAnswers(&res, a, orders[a])
		ackCanceled, canceled := clientCanceled(cancels[a], placed)
		rep.Arms += checkCallAnswers(&res, a, calls[a])
		tf := final.Traders[a]
		if tf == nil || len(tf.Nodes) == 0 {
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: no node's final view could be read; %d orders unchecked", a, len(orders[a]))
			continue
		}
		swc := switchCanceled(tf)
		checkSwitchCancels(&res, &rep, a, swc, calls[a], cancels[a], placedWrites(placed), ackCanceled)
		for id, node := range swc {
			if canceled[id] == "" {
				canceled[id] = "by cancel-all-after on " + node
			}
		}
		checkReplicas(&res, a, tf, tf.Settled && !open)
		first := true
		for _, node := range sortedMapKeys(tf.Nodes) {
			v := tf.Nodes[node]
			if len(v.Fills) >= FillsKept || len(v.Liquidations) >= LiquidationsKept || len(v.Funding) >= FundingFlowsKept {
				res.Verdict = worse(res.Verdict, Unknown)
				res.addf("%s on %s: %d fills, %d liquidations, %d funding flows listed, the node keeps only the newest %d of each: not checked",
					a, node, len(v.Fills), len(v.Liquidations), len(v.Funding), FillsKept)
				continue
			}
			net := checkView(&res, &rep, a, node, v, placed, canceled)
			checkTriggers(&res, a, node, v, placed, tf.Settled && !open)
			if first {
				countView(&rep, v, placed)
				rep.VenueNetMsat -= net
			}
			equity := v.FreeMsat + v.ReservedMsat
			for _, p := range v.Positions {
				equity += p.MarginMsat
			}
			switch credit, known, trimmed := depositCredit(final.Accounts[a], grants[a]); {
			case known && credit+net != equity:
				res.Verdict = Violation
				res.addf("%s on %s: equity %d msat (free+reserved+margin) but deposits %d and fills, liquidations and funding %+d msat make %d",
					a, node, equity, credit, net, credit+net)
			case trimmed && !known:
				res.Verdict = worse(res.Verdict, Unknown)
				res.addf("%s on %s: the deposit history is at its bound and a grant is unsettled: equity not judged", a, node)
			}
			if first {
				var applied int64
				for _, w := range grants[a] {
					if w.Outcome == Applied {
						applied += w.Msat
					}
				}
				rep.DriftMsat += applied + net - equity
			}
			first = false
		}
	}
	checkADL(&res, final, traders)
	return res, rep
}

// partialLegBeforeCancel: from feature level 8 a bracket leg that closed
// only part of the bracket leaves its sibling armed for the rest
// (legsLeft), and a later cancel of the bracket answers canceled for that
// sibling alone. So the leg of an acknowledged bracket cancel that filled
// first and partially filled before the cancel, provided its sibling has
// no fill; had it filled after, the cancel would have ended it.
func partialLegBeforeCancel(id, why string, pl placement, fillsOf map[string][]FillFinal, left map[string]int64) bool {
	if why != "with its bracket, acknowledged" || pl.leg == nil {
		return false
	}
	for _, l := range pl.spec().Legs {
		if l.ID == id {
			continue
		}
		_, sibLeft := left[l.ID]
		return sibLeft && len(fillsOf[l.ID]) == 0
	}
	return false
}

// clientCanceled maps each order an acknowledged client cancel canceled
// to that cancel's op id (ackCanceled) and to why (canceled). A bracket's
// cancel answered canceled ends whatever of it was live: its entry, or its
// legs once the entry executed. Either way neither leg fills afterwards
// (had one executed in full, the other would have gone with it and nothing would
// have been live), so the legs are held to "never fills", except a
// partial leg that filled before it (partialLegBeforeCancel); the entry is
// not, since it may have filled before, and its listed status says which.
func clientCanceled(cancels []Write, placed map[string]placement) (map[string]int, map[string]string) {
	ackCanceled, canceled := map[string]int{}, map[string]string{}
	for _, w := range cancels {
		if w.Outcome != Applied || w.OrderStatus != "canceled" {
			continue
		}
		id := w.Invoke.Order
		if pl, ok := placed[id]; ok && pl.leg == nil && pl.spec() != nil && pl.spec().Kind == history.KindBracket {
			for _, l := range pl.spec().Legs {
				ackCanceled[l.ID] = w.Invoke.ID
				canceled[l.ID] = "with its bracket, acknowledged"
			}
			continue
		}
		ackCanceled[id] = w.Invoke.ID
		canceled[id] = "acknowledged"
	}
	return ackCanceled, canceled
}

// countView adds one node's view to the report's counters.
func countView(rep *TradingReport, v *TraderView, placed map[string]placement) {
	rep.Fills += len(v.Fills)
	rep.Liquidations += len(v.Liquidations)
	rep.FundingFlows += len(v.Funding)
	for _, l := range v.Liquidations {
		if l.Partial {
			rep.PartialLiquidations++
		}
		if l.DeficitMsat > 0 {
			rep.Deficits++
		}
	}
	for _, f := range v.Fills {
		if _, adl := isADL(f.OrderID); adl {
			rep.ADLFills++
		}
		pl, ok := placed[f.OrderID]
		switch {
		case !ok:
		case pl.leg != nil:
			rep.TriggerFills++
			rep.LegFills++
		case pl.spec() != nil && pl.spec().IsTrigger():
			rep.TriggerFills++
		}
	}
	for _, o := range v.Orders {
		switch {
		case o.Status == "canceled" && o.Reason == ReasonCancelAllAfter:
			rep.SwitchCancels++
		case o.Status == "canceled" && o.Reason == ReasonOCO:
			rep.OCOCancels++
		case o.Status == "rejected":
			rep.Blocked++
		}
	}
}

// checkView checks one node's view of trader a and returns the net msat
// its fills, liquidations and funding flows moved into the trader's
// equity.
func checkView(res *Result, rep *TradingReport, a, node string, v *TraderView, placed map[string]placement, canceled map[string]string) int64 {
	bad := func(counter *int, format string, args ...any) {
		res.Verdict = Violation
		if counter != nil {
			*counter++
		}
		res.addf("%s on %s: "+format, append([]any{a, node}, args...)...)
	}
	fills := map[string]int{}
	var net int64
	for _, f := range v.Fills {
		fills[f.OrderID]++
		net += f.NetMsat()
	}
	fillsOf := fillsByOrder(v)
	left := legsLeft(fillsOf, placed)
	for _, id := range sortedMapKeys(fills) {
		n := fills[id]
		pl, ok := placed[id]
		_, adl := isADL(id)
		switch {
		case adl: // auto-deleveraging: checkRisk and checkADL
		case !ok:
			bad(nil, "fill of order %s, which this run never placed", id)
		case pl.w.Outcome == NotApplied:
			bad(nil, "order %s (op #%d) certainly failed but has %d fill(s)", id, pl.w.Invoke.ID, n)
		}
		if n > 1 {
			rep.DoubledFills += n - 1
			bad(nil, "order %s filled %d times", id, n)
		}
		if why := canceled[id]; why != "" && !partialLegBeforeCancel(id, why, pl, fillsOf, left) {
			bad(&rep.CanceledFilled, "order %s was canceled (%s) but filled", id, why)
		}
	}
	for _, id := range sortedMapKeys(placed) {
		pl := placed[id]
		if pl.leg == nil && pl.w.Outcome == Applied && pl.w.OrderStatus == "filled" && fills[id] == 0 {
			bad(&rep.LostFills, "order %s (op #%d) was acknowledged filled but has no fill", id, pl.w.Invoke.ID)
		}
	}
	listed := map[string]int{}
	for _, o := range v.Orders {
		listed[o.OrderID]++
		if listed[o.OrderID] == 2 {
			bad(nil, "order %s listed more than once: one key made two orders", o.OrderID)
		}
		pl, ok := placed[o.OrderID]
		if !ok || pl.w.Outcome == NotApplied {
			bad(nil, "order %s is listed but was never placed or certainly failed", o.OrderID)
		}
		switch n := fills[o.OrderID]; {
		case o.Status == "filled" && n == 0:
			bad(&rep.LostFills, "order %s is filled but has no fill", o.OrderID)
		case o.Status != "filled" && n > 0:
			bad(nil, "order %s is %s but has %d fill(s)", o.OrderID, o.Status, n)
		}
	}
	// At the closed-orders bound the node has dropped its oldest ended
	// orders, so a missing one proves nothing; an order acknowledged
	// filled is still held to its fill above.
	if closed := closedOrders(v); closed >= ClosedOrdersKept {
		res.addf("%s on %s: %d closed orders listed, the node keeps only the newest %d: acknowledged orders missing from the listing not judged",
			a, node, closed, ClosedOrdersKept)
	} else {
		for _, id := range sortedMapKeys(placed) {
			if pl := placed[id]; pl.w.Outcome == Applied && listed[id] == 0 {
				bad(nil, "order %s (op #%d) was acknowledged but is not listed", id, pl.w.Invoke.ID)
			}
		}
	}
	checkSpecs(bad, v, placed)
	checkLiquidationCancels(bad, v)
	return net + checkRisk(bad, rep, v)
}

// closedOrders counts the orders a view lists as ended (every status but
// a live order's accepted).
func closedOrders(v *TraderView) int {
	n := 0
	for _, o := range v.Orders {
		if o.Status != "accepted" {
			n++
		}
	}
	return n
}

// sortedMapKeys returns m's keys in order (map order must not leak into
// reports).
func sortedMapKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
