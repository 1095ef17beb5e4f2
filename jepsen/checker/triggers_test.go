package checker

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/jepsen/history"
)

// place records an order placement of trader "t" that asked for spec.
func (f *tradingFixture) place(id int, key string, spec *history.OrderSpec, typ history.Type, status string) {
	f.add(history.Op{ID: id, Type: history.Invoke, Process: id, F: history.FOrder, Account: "t", IdemKey: key, Order: key, Spec: spec})
	done := history.Op{ID: id, Type: typ, Process: id, F: history.FOrder, Account: "t", IdemKey: key, Order: key, OrderStatus: status}
	if typ == history.Fail {
		done.Status, done.Code = 400, "validation"
	}
	f.add(done)
}

// newTriggerFixture extends the valid trading history (a long of 6
// BTC-PERP) with triggers and brackets:
//   - b1, a bracket buying 5 at market (answered filled) with a stop leg
//     of 5 and a take-profit leg of 3; the take-profit executed, so the
//     stop was canceled (oco);
//   - s1, a reduce-only sell stop of 2 (answered working) that executed;
//   - e1, an entry trigger buying 1 ETH-PERP, still armed;
//   - b2, a bracket selling 4 on an entry trigger with a stop leg,
//     canceled by an acknowledged cancel before its entry fired (its leg
//     went with it, entry_canceled).
//
// Fills: b1 +5 (fee 50), b1.tp -3 (PnL +300, fee 30), s1 -2 (PnL -100,
// fee 20): 100 msat more equity, and the position is 6 again (margin
// 1400, 1200, then 1000 after each).
func newTriggerFixture() *tradingFixture {
	f := newTradingFixture()
	f.place(20, "b1", &history.OrderSpec{Market: "BTC-PERP", Buy: true, Contracts: 5, Kind: history.KindBracket,
		Legs: []history.LegSpec{{ID: "b1.stop", Kind: history.KindStop, LevelQ8: 90, Contracts: 5},
			{ID: "b1.tp", Kind: history.KindTakeProfit, LevelQ8: 110, Contracts: 3}}}, history.OK, "filled")
	f.place(21, "s1", &history.OrderSpec{Market: "BTC-PERP", Contracts: 2, ReduceOnly: true, Kind: history.KindStop, LevelQ8: 80},
		history.OK, "working")
	f.place(22, "e1", &history.OrderSpec{Market: "ETH-PERP", Buy: true, Contracts: 1, Kind: history.KindEntry, LevelQ8: 200},
		history.OK, "working")
	f.place(23, "b2", &history.OrderSpec{Market: "BTC-PERP", Contracts: 4, Kind: history.KindBracket, LevelQ8: 95,
		Legs: []history.LegSpec{{ID: "b2.stop", Kind: history.KindStop, LevelQ8: 100, Contracts: 4}}}, history.OK, "working")
	f.write(24, history.FCancel, "c2", "b2", history.OK, history.Op{OrderStatus: "canceled"})
	for _, v := range f.final.Traders["t"].Nodes {
		v.FreeMsat += 100
		v.Fills = append([]FillFinal{
			{OrderID: "s1", MarketID: "BTC-PERP", Closed: 2, FeeMsat: 20, RealizedPnlMsat: -100, AfterContracts: 6, AfterMarginMsat: 1000, Seq: "30"},
			{OrderID: "b1.tp", MarketID: "BTC-PERP", Closed: 3, FeeMsat: 30, RealizedPnlMsat: 300, AfterContracts: 8, AfterMarginMsat: 1200, Seq: "25"},
			{OrderID: "b1", MarketID: "BTC-PERP", Buy: true, Opened: 5, FeeMsat: 50, AfterContracts: 11, AfterMarginMsat: 1400, Seq: "20"},
		}, v.Fills...)
		v.Orders = append(v.Orders,
			OrderFinal{OrderID: "b1", MarketID: "BTC-PERP", Type: "market", Buy: true, Contracts: 5, Status: "filled"},
			OrderFinal{OrderID: "b1.stop", MarketID: "BTC-PERP", Type: "stop_market", Contracts: 5, Status: "canceled", Reason: ReasonOCO},
			OrderFinal{OrderID: "b1.tp", MarketID: "BTC-PERP", Type: "take_profit_market", Contracts: 3, Status: "filled"},
			OrderFinal{OrderID: "s1", MarketID: "BTC-PERP", Type: "stop_market", Contracts: 2, Status: "filled"},
			OrderFinal{OrderID: "e1", MarketID: "ETH-PERP", Type: "market", Buy: true, Contracts: 1, Status: "accepted"},
			OrderFinal{OrderID: "b2", MarketID: "BTC-PERP", Type: "market", Contracts: 4, Status: "canceled"},
			OrderFinal{OrderID: "b2.stop", MarketID: "BTC-PERP", Type: "stop_market", Buy: true, Contracts: 4, Status: "canceled", Reason: "entry_canceled"})
		v.Triggers = []TriggerFinal{{OrderID: "e1", MarketID: "ETH-PERP", Kind: history.KindEntry, Buy: true, Contracts: 1, LevelQ8: 200, Status: "armed"}}
	}
	return f
}

// eachNode applies change to every node's view of "t".
func eachNode(f *tradingFixture, change func(v *TraderView)) {
	for _, v := range f.final.Traders["t"].Nodes {
		change(v)
	}
}

// setFill changes order id's fill on every node.
func setFill(f *tradingFixture, id string, change func(x *FillFinal)) {
	eachNode(f, func(v *TraderView) {
		for i := range v.Fills {
			if v.Fills[i].OrderID == id {
				change(&v.Fills[i])
			}
		}
	})
}

func TestTriggersAcceptAValidHistory(t *testing.T) {
	for _, settled := range []bool{false, true} {
		f := newTriggerFixture()
		f.final.Traders["t"].Settled = settled
		res, rep := Trading(f.ops, f.final)
		if res.Verdict != Valid {
			t.Fatalf("settled=%t: verdict %s: %v", settled, res.Verdict, res.Details)
		}
		if rep.Triggers != 4 || rep.TriggerFills != 2 || rep.LegFills != 1 || rep.OCOCancels != 1 || rep.Fills != 5 || rep.DriftMsat != 0 {
			t.Fatalf("report %+v", rep)
		}
	}
}

func TestTriggersCatchPlantedBugs(t *testing.T) {
	cases := []struct {
		name    string
		settled bool
		plant   func(f *tradingFixture)
		want    string
		count   func(TradingReport) int
	}{
		{"a trigger executes twice", false, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) {
				v.Fills = append(v.Fills, FillFinal{OrderID: "s1", MarketID: "BTC-PERP", Closed: 2, Seq: "31"})
				v.Positions[0].Contracts -= 2
			})
		}, "order s1 filled 2 times", func(r TradingReport) int { return r.DoubledFills }},
		{"both legs execute", false, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) {
				v.Fills = append(v.Fills, FillFinal{OrderID: "b1.stop", MarketID: "BTC-PERP", Closed: 5, Seq: "26"})
				v.Positions[0].Contracts -= 5
				v.Orders[4].Status, v.Orders[4].Reason = "filled", ""
			})
		}, "leg b1.stop of bracket b1 closed 5 contracts after its sibling left 2", nil},
		{"a leg executes before its entry", false, func(f *tradingFixture) {
			setFill(f, "b1.tp", func(x *FillFinal) { x.Seq = "19" })
		}, "leg b1.tp filled at seq 19, not after its entry's fill at seq 20", nil},
		{"a leg executes though its entry never did", false, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) {
				v.Fills = append(v.Fills, FillFinal{OrderID: "b2.stop", MarketID: "BTC-PERP", Buy: true, Closed: 4, Seq: "40"})
				v.Positions[0].Contracts += 4
				v.Orders[len(v.Orders)-1].Status, v.Orders[len(v.Orders)-1].Reason = "filled", ""
			})
		}, "leg b2.stop filled but its entry b2 never did", nil},
		{"a leg executes after its bracket was canceled", false, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) {
				v.Fills = append(v.Fills, FillFinal{OrderID: "b2.stop", MarketID: "BTC-PERP", Buy: true, Closed: 4, Seq: "40"})
				v.Positions[0].Contracts += 4
			})
		}, "order b2.stop was canceled (with its bracket, acknowledged) but filled", func(r TradingReport) int { return r.CanceledFilled }},
		{"a reduce-only trigger opens", false, func(f *tradingFixture) {
			setFill(f, "s1", func(x *FillFinal) { x.Closed, x.Opened = 1, 1 })
		}, "reduce-only order s1 of 2 contracts closed 1 and opened 1", nil},
		{"a leg fills on the entry's side", false, func(f *tradingFixture) {
			setFill(f, "b1.tp", func(x *FillFinal) { x.Buy = true })
			eachNode(f, func(v *TraderView) { v.Positions[0].Contracts += 6 })
		}, "fill seq 25 of order b1.tp is a buy in BTC-PERP, the order was a sell", nil},
		{"an entry fills the wrong size", false, func(f *tradingFixture) {
			setFill(f, "b1", func(x *FillFinal) { x.Opened = 4 })
			eachNode(f, func(v *TraderView) { v.Positions[0].Contracts-- })
		}, "fill seq 20 of order b1 of 5 contracts is for 4", nil},
		{"a leg of a failed bracket", false, func(f *tradingFixture) {
			f.place(25, "b3", &history.OrderSpec{Market: "BTC-PERP", Buy: true, Contracts: 1, Kind: history.KindBracket,
				Legs: []history.LegSpec{{ID: "b3.tp", Kind: history.KindTakeProfit, LevelQ8: 120, Contracts: 1}}}, history.Fail, "")
			eachNode(f, func(v *TraderView) {
				v.Orders = append(v.Orders, OrderFinal{OrderID: "b3.tp", MarketID: "BTC-PERP", Type: "take_profit_market", Contracts: 1, Status: "accepted"})
			})
		}, "order b3.tp is listed but was never placed or certainly failed", nil},
		{"a trigger answers filled", false, func(f *tradingFixture) {
			setDone(f, 22, func(op *history.Op) { op.OrderStatus = "filled" })
		}, `entry e1 (op #22) answered "filled", want "working"`, nil},
		{"an ended trigger stays on the triggers page", false, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) {
				v.Triggers = append(v.Triggers, TriggerFinal{OrderID: "s1", MarketID: "BTC-PERP", Kind: history.KindStop,
					Contracts: 2, LevelQ8: 80, ReduceOnly: true, Status: "executed"})
			})
		}, "trigger s1 is executed on the triggers page", nil},
		{"a trigger listed at another level", false, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) { v.Triggers[0].LevelQ8 = 201 })
		}, "it was placed as entry buy 1 at 200", nil},
		{"a market-entry bracket on the triggers page", false, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) {
				v.Triggers = append(v.Triggers, TriggerFinal{OrderID: "b1", MarketID: "BTC-PERP", Kind: history.KindEntry,
					Buy: true, Contracts: 5, OCOGroup: "b1", Status: "armed"})
			})
		}, "order b1 (entry) is on the triggers page", nil},
		{"a live trigger missing from the page, settled", true, func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) { v.Triggers = nil })
		}, "trigger e1 is live (accepted) but not on the triggers page", nil},
		{"a fill missing on one replica, settled", true, func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n2"]
			v.Fills = v.Fills[1:] // s1's fill, with its position and money
			v.Positions[0].Contracts += 2
			v.FreeMsat += 120
			v.Orders[len(v.Orders)-4].Status = "accepted"
			v.Triggers = append(v.Triggers, TriggerFinal{OrderID: "s1", MarketID: "BTC-PERP", Kind: history.KindStop,
				Contracts: 2, LevelQ8: 80, ReduceOnly: true, Status: "armed"})
		}, "settled, yet n1 and n2 differ: fill seq 30 only on the first", nil},
		{"an ended order ends differently on two replicas", false, func(f *tradingFixture) {
			setOrder(f, "n2", "b1.stop", "canceled", "position_closed")
		}, "order b1.stop ended as", nil},
		{"one fill, two contents", false, func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n2"]
			v.Fills[0].FeeMsat++
			v.FreeMsat--
		}, "fill seq 30 is", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newTriggerFixture()
			f.final.Traders["t"].Settled = c.settled
			c.plant(f)
			res, rep := Trading(f.ops, f.final)
			if res.Verdict != Violation || !strings.Contains(strings.Join(res.Details, "\n"), c.want) {
				t.Fatalf("verdict %s, want a violation mentioning %q: %v", res.Verdict, c.want, res.Details)
			}
			if c.count != nil && c.count(rep) == 0 {
				t.Fatalf("report does not count it: %+v", rep)
			}
		})
	}
}

// What the history does not prove is not claimed.
func TestTriggersClaimNothingUnproven(t *testing.T) {
	cases := []struct {
		name  string
		plant func(f *tradingFixture)
		want  Verdict
	}{
		{"a bracket canceled after its entry filled", func(f *tradingFixture) {
			// The cancel found b1's entry executed and ended its live leg;
			// the entry's own fill came before and stands.
			f.write(26, history.FCancel, "c1b", "b1", history.OK, history.Op{OrderStatus: "canceled"})
			eachNode(f, func(v *TraderView) {
				v.Fills = append(v.Fills[:1:1], v.Fills[2:]...) // b1.tp never executed
				v.Fills[0].AfterContracts = 9                   // s1 closed 2 of 11
				v.FreeMsat -= 270
				v.Positions[0].Contracts += 3
				setOrderIn(v, "b1.tp", "canceled", "")
				setOrderIn(v, "b1.stop", "canceled", "")
			})
		}, Valid},
		{"replicas read at different points, not settled", func(f *tradingFixture) {
			// n2 was read before s1 fired there: s1 live, no fill yet,
			// and b1.tp's 1200 msat of margin still held.
			v := f.final.Traders["t"].Nodes["n2"]
			v.Fills = v.Fills[1:]
			v.Positions[0].Contracts += 2
			v.Positions[0].MarginMsat = 1200
			v.FreeMsat += 120 - 200
			setOrderIn(v, "s1", "accepted", "")
			v.Triggers = append(v.Triggers, TriggerFinal{OrderID: "s1", MarketID: "BTC-PERP", Kind: history.KindStop,
				Contracts: 2, LevelQ8: 80, ReduceOnly: true, Status: "armed"})
		}, Unknown},
		{"a leg blocked with no position to reduce", func(f *tradingFixture) {
			eachNode(f, func(v *TraderView) { setOrderIn(v, "b1.stop", "rejected", "reduce_only") })
		}, Valid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newTriggerFixture()
			c.plant(f)
			if res, _ := Trading(f.ops, f.final); res.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %v", res.Verdict, c.want, res.Details)
			}
		})
	}
}

// setOrderIn changes how v lists order id.
func setOrderIn(v *TraderView, id, status, reason string) {
	for i := range v.Orders {
		if v.Orders[i].OrderID == id {
			v.Orders[i].Status, v.Orders[i].Reason = status, reason
		}
	}
}

// TestLegsLeftAfterAPartialLeg: b1 buys 5 with a stop for 5 and a
// take-profit for 3. Once the take-profit filled for 3 (leaving a
// position of 8, of which the bracket's 2), the stop may stay for 2 and
// fill at most 2 (level 8's partial legs); a take-profit for all 5 leaves
// nothing, and then a stop fill is a broken one-cancels-other.
func TestLegsLeftAfterAPartialLeg(t *testing.T) {
	placed := placements([]Write{{Invoke: history.Op{IdemKey: "b1", Spec: &history.OrderSpec{Market: "BTC-PERP", Buy: true, Contracts: 5,
		Kind: history.KindBracket, Legs: []history.LegSpec{{ID: "b1.stop", Kind: history.KindStop, Contracts: 5},
			{ID: "b1.tp", Kind: history.KindTakeProfit, Contracts: 3}}}}}})
	fills := map[string][]FillFinal{
		"b1":    {{OrderID: "b1", Opened: 5, AfterContracts: 11, Seq: "20"}},
		"b1.tp": {{OrderID: "b1.tp", Closed: 3, AfterContracts: 8, Seq: "25"}},
	}
	left := legsLeft(fills, placed)
	if len(left) != 1 || left["b1.stop"] != 2 {
		t.Fatalf("left %v, want b1.stop: 2", left)
	}
	if !listedContracts(2, 5, left, nil, "b1.stop") || !listedContracts(5, 5, left, nil, "b1.stop") || listedContracts(3, 5, left, nil, "b1.stop") {
		t.Fatal("a trimmed leg is listed with its placed contracts or what was left, nothing else")
	}
	fills["b1.tp"][0].Closed = 5
	if left := legsLeft(fills, placed); len(left) != 0 {
		t.Fatalf("a full take-profit left %v", left)
	}
	// A short's stop leg: the position the fill left is negative.
	fills["b1.tp"][0].Closed, fills["b1.tp"][0].AfterContracts = 3, -1
	if left := legsLeft(fills, placed); left["b1.stop"] != 1 {
		t.Fatalf("left %v, want b1.stop: 1 (the position left)", left)
	}
}

// TestLegsArmedToWhatTheEntryOpened: b1 buys 5 with a stop for 5 and a
// take-profit for 3 on a short of 3, so its entry opens 2 (feature level
// 9): both legs arm for 2 and may be listed so; once the take-profit
// filled for 2 of a position grown to 10 by another order, the stop is
// left nothing of the bracket and must not fill.
func TestLegsArmedToWhatTheEntryOpened(t *testing.T) {
	placed := placements([]Write{{Invoke: history.Op{IdemKey: "b1", Spec: &history.OrderSpec{Market: "BTC-PERP", Buy: true, Contracts: 5,
		Kind: history.KindBracket, Legs: []history.LegSpec{{ID: "b1.stop", Kind: history.KindStop, Contracts: 5},
			{ID: "b1.tp", Kind: history.KindTakeProfit, Contracts: 3}}}}}})
	fills := map[string][]FillFinal{"b1": {{OrderID: "b1", Closed: 3, Opened: 2, AfterContracts: 2, Seq: "20"}}}
	armed := legsArmed(fills, placed)
	if len(armed) != 2 || armed["b1.stop"] != 2 || armed["b1.tp"] != 2 {
		t.Fatalf("armed %v, want both legs at 2", armed)
	}
	if !listedContracts(2, 5, nil, armed, "b1.stop") || !listedContracts(5, 5, nil, armed, "b1.stop") || listedContracts(4, 5, nil, armed, "b1.stop") {
		t.Fatal("a leg is listed with its placed contracts or what its entry opened, nothing else")
	}
	fills["b1.tp"] = []FillFinal{{OrderID: "b1.tp", Closed: 2, AfterContracts: 10, Seq: "25"}}
	if left := legsLeft(fills, placed); len(left) != 0 {
		t.Fatalf("a take-profit for all the entry opened left %v", left)
	}
	// An entry that opened all it has arms its legs as placed.
	fills["b1"][0].Closed, fills["b1"][0].Opened = 0, 5
	if armed := legsArmed(fills, placed); len(armed) != 0 {
		t.Fatalf("armed %v for an entry that opened all it has", armed)
	}
}

// TestBracketCanceledAfterAPartialLeg: b1's take-profit closed 3 of its 5
// contracts, so from feature level 8 its stop stayed armed for the 2
// left, and a later cancel of b1 answered canceled for that stop. The
// take-profit's fill came before the cancel and is not a fill after it;
// a stop fill would be.
func TestBracketCanceledAfterAPartialLeg(t *testing.T) {
	cancelB1 := func(f *tradingFixture) {
		f.write(25, history.FCancel, "c1", "b1", history.OK, history.Op{OrderStatus: "canceled"})
		setOrderEverywhere(f, "b1.stop", "canceled", "")
	}
	f := newTriggerFixture()
	cancelB1(f)
	if res, _ := Trading(f.ops, f.final); res.Verdict != Valid {
		t.Fatalf("a partial take-profit before the cancel: verdict %s: %v", res.Verdict, res.Details)
	}
	f = newTriggerFixture()
	cancelB1(f)
	eachNode(f, func(v *TraderView) {
		v.Fills = append(v.Fills, FillFinal{OrderID: "b1.stop", MarketID: "BTC-PERP", Closed: 2, AfterContracts: 4, Seq: "26"})
	})
	res, _ := Trading(f.ops, f.final)
	if res.Verdict != Violation || !strings.Contains(strings.Join(res.Details, "\n"), "order b1.stop was canceled (with its bracket, acknowledged) but filled") {
		t.Fatalf("a stop fill after the acknowledged cancel: verdict %s: %v", res.Verdict, res.Details)
	}
}
