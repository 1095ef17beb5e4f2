package checker

import (
	"sort"

	"github.com/perpd/perpd/jepsen/history"
)

// FillsKept is how many fills a node keeps per account (fsm/trade): with
// more, older fills are gone and sums over fills prove nothing.
const FillsKept = 1000

// TraderFinal is a trading account's end state as each node listed it.
type TraderFinal struct {
	// Nodes maps a node's address to its complete view; a node whose
	// listings could not all be read is missing (and Errors says why).
	Nodes  map[string]*TraderView `json:"nodes"`
	Errors []string               `json:"errors,omitempty"`
}

// TraderView is one node's complete answer for a trader, read at or past
// the highest acknowledged raft index, after the run's writes ended.
type TraderView struct {
	FreeMsat     int64           `json:"freeMsat"`
	ReservedMsat int64           `json:"reservedMsat"`
	Positions    []PositionFinal `json:"positions"`
	Fills        []FillFinal     `json:"fills"`
	Orders       []OrderFinal    `json:"orders"`
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
	Seq             string `json:"seq"`
}

// NetMsat is what the fill moved into the trader's equity (free +
// reserved + margin): the realized PnL, of which a deficit is the part
// the margin could not pay (the house absorbs it), less the fee.
func (f FillFinal) NetMsat() int64 { return f.RealizedPnlMsat + f.DeficitMsat - f.FeeMsat }

// OrderFinal is one listed order. Reason is why the engine closed it
// (ReasonCancelAllAfter for the switch; empty for a client's cancel).
type OrderFinal struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
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
	// DriftMsat sums, over traders, the applied grants plus what the
	// fills moved, minus the equity observed (first complete node).
	DriftMsat int64 `json:"driftMsat"`
	// VenueNetMsat is what the fills moved into the venue's books (house
	// and fee revenue): minus the traders' sum, so the two always add up
	// to the deposits, as the ledger's own conservation check requires.
	VenueNetMsat int64 `json:"venueNetMsat"`
}

// Trading checks orders, cancels and fills on every node's final view:
// an acknowledged filled order has exactly one fill; no order has more
// than one (a retried key makes one order, one fill); an order canceled
// by an acknowledged cancel never fills; no fill or order exists that the
// run did not place, or whose placement certainly failed; each listed
// order's status agrees with its fills; positions equal the signed sum
// of their fills; and each trader's equity (free + reserved + margin)
// equals its listed deposits plus what its fills moved (conservation).
// Orders the cancel-all-after switch canceled (reason cancel_all_after)
// are accepted, held to "never fills" on every node, and judged against
// the switch's calls as cancelafter.go explains.
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
		placed := map[string]Write{}
		for _, w := range orders[a] {
			placed[w.Invoke.IdemKey] = w
			if w.Outcome == Applied {
				rep.Orders++
			}
		}
		ackCanceled := map[string]int{}
		canceled := map[string]string{}
		for _, w := range cancels[a] {
			if w.Outcome == Applied && w.OrderStatus == "canceled" {
				ackCanceled[w.Invoke.Order] = w.Invoke.ID
				canceled[w.Invoke.Order] = "acknowledged"
			}
		}
		rep.Arms += checkCallAnswers(&res, a, calls[a])
		tf := final.Traders[a]
		if tf == nil || len(tf.Nodes) == 0 {
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: no node's final view could be read; %d orders unchecked", a, len(placed))
			continue
		}
		swc := switchCanceled(tf)
		checkSwitchCancels(&res, &rep, a, swc, calls[a], cancels[a], placed, ackCanceled)
		for id, node := range swc {
			if canceled[id] == "" {
				canceled[id] = "by cancel-all-after on " + node
			}
		}
		first := true
		for _, node := range sortedMapKeys(tf.Nodes) {
			v := tf.Nodes[node]
			if len(v.Fills) >= FillsKept {
				res.Verdict = worse(res.Verdict, Unknown)
				res.addf("%s on %s: %d fills listed, the node keeps only the newest %d: not checked", a, node, len(v.Fills), FillsKept)
				continue
			}
			net := checkView(&res, &rep, a, node, v, placed, canceled)
			if first {
				rep.Fills += len(v.Fills)
				for _, o := range v.Orders {
					if o.Status == "canceled" && o.Reason == ReasonCancelAllAfter {
						rep.SwitchCancels++
					}
				}
				rep.VenueNetMsat -= net
			}
			equity := v.FreeMsat + v.ReservedMsat
			for _, p := range v.Positions {
				equity += p.MarginMsat
			}
			if af := final.Accounts[a]; af != nil && af.DepositsComplete {
				var listed int64
				for _, d := range af.Deposits {
					listed += d.CreditedMsat
				}
				if listed+net != equity {
					res.Verdict = Violation
					res.addf("%s on %s: equity %d msat (free+reserved+margin) but deposits %d and fills %+d msat make %d",
						a, node, equity, listed, net, listed+net)
				}
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
	return res, rep
}

// checkView checks one node's view of trader a and returns the net msat
// its fills moved into the trader's equity.
func checkView(res *Result, rep *TradingReport, a, node string, v *TraderView, placed map[string]Write, canceled map[string]string) int64 {
	bad := func(counter *int, format string, args ...any) {
		res.Verdict = Violation
		if counter != nil {
			*counter++
		}
		res.addf("%s on %s: "+format, append([]any{a, node}, args...)...)
	}
	fills := map[string]int{}
	pos := map[string]int64{}
	var net int64
	for _, f := range v.Fills {
		fills[f.OrderID]++
		n := f.Closed + f.Opened
		if !f.Buy {
			n = -n
		}
		pos[f.MarketID] += n
		net += f.NetMsat()
	}
	for _, id := range sortedMapKeys(fills) {
		n := fills[id]
		w, ok := placed[id]
		switch {
		case !ok:
			bad(nil, "fill of order %s, which this run never placed", id)
		case w.Outcome == NotApplied:
			bad(nil, "order %s (op #%d) certainly failed but has %d fill(s)", id, w.Invoke.ID, n)
		}
		if n > 1 {
			rep.DoubledFills += n - 1
			bad(nil, "order %s filled %d times", id, n)
		}
		if why := canceled[id]; why != "" {
			bad(&rep.CanceledFilled, "order %s was canceled (%s) but filled", id, why)
		}
	}
	for _, id := range sortedMapKeys(placed) {
		w := placed[id]
		if w.Outcome == Applied && w.OrderStatus == "filled" && fills[id] == 0 {
			bad(&rep.LostFills, "order %s (op #%d) was acknowledged filled but has no fill", id, w.Invoke.ID)
		}
	}
	listed := map[string]int{}
	for _, o := range v.Orders {
		listed[o.OrderID]++
		if listed[o.OrderID] == 2 {
			bad(nil, "order %s listed more than once: one key made two orders", o.OrderID)
		}
		w, ok := placed[o.OrderID]
		if !ok || w.Outcome == NotApplied {
			bad(nil, "order %s is listed but was never placed or certainly failed", o.OrderID)
		}
		switch n := fills[o.OrderID]; {
		case o.Status == "filled" && n == 0:
			bad(&rep.LostFills, "order %s is filled but has no fill", o.OrderID)
		case o.Status != "filled" && n > 0:
			bad(nil, "order %s is %s but has %d fill(s)", o.OrderID, o.Status, n)
		}
	}
	for _, id := range sortedMapKeys(placed) {
		if w := placed[id]; w.Outcome == Applied && listed[id] == 0 {
			bad(nil, "order %s (op #%d) was acknowledged but is not listed", id, w.Invoke.ID)
		}
	}
	held := map[string]int64{}
	for _, p := range v.Positions {
		held[p.MarketID] += p.Contracts
	}
	for m := range pos {
		if _, ok := held[m]; !ok {
			held[m] = 0
		}
	}
	for _, m := range sortedMapKeys(held) {
		if held[m] != pos[m] {
			bad(nil, "position in %s is %d contracts but its fills sum to %d", m, held[m], pos[m])
		}
	}
	return net
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
