package checker

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/jepsen/history"
)

// caa records a cancel-all-after call of trader "t" with timeoutMs; an
// acknowledged one answers as the engine does, its entry at log time
// logMs.
func (f *tradingFixture) caa(id int, timeoutMs int64, typ history.Type, logMs int64) {
	key := "caa" + string(rune('a'+id))
	f.add(history.Op{ID: id, Type: history.Invoke, Process: id, F: history.FCancelAfter, Account: "t", IdemKey: key,
		TimeoutMs: history.Int64(timeoutMs)})
	done := history.Op{ID: id, Type: typ, Process: id, F: history.FCancelAfter, Account: "t", IdemKey: key}
	switch {
	case typ == history.OK:
		armed := timeoutMs > 0
		done.Armed = &armed
		if armed {
			done.DeadlineTsMs = history.Int64(logMs + timeoutMs)
		}
	case typ == history.Info:
		done.Status, done.Code = 503, "unavailable"
	}
	f.add(done)
}

// newSwitchFixture extends the valid trading history with the switch, in
// this real-time order: 8 arms (2 s); o5 rests; the switch fires (o5
// canceled, reason cancel_all_after), so 10's cancel of o5 finds it
// closed; 11 disarms; o7 rests and 13 cancels it; 14 arms with an unknown
// outcome; o6 rests and the switch (armed by 14 after all) cancels it.
// Every node lists o5 and o6 as canceled by the switch, o7 by the client.
func newSwitchFixture() *tradingFixture {
	f := newTradingFixture()
	f.caa(8, 2000, history.OK, 100_000)
	f.write(9, history.FOrder, "o5", "o5", history.OK, history.Op{OrderStatus: "resting"})
	f.write(10, history.FCancel, "c5", "o5", history.OK, history.Op{OrderStatus: "not-canceled"})
	f.caa(11, 0, history.OK, 103_000)
	f.write(12, history.FOrder, "o7", "o7", history.OK, history.Op{OrderStatus: "resting"})
	f.write(13, history.FCancel, "c7", "o7", history.OK, history.Op{OrderStatus: "canceled"})
	f.caa(14, 1500, history.Info, 0)
	f.write(15, history.FOrder, "o6", "o6", history.OK, history.Op{OrderStatus: "resting"})
	for _, v := range f.final.Traders["t"].Nodes {
		v.Orders = append(v.Orders,
			OrderFinal{OrderID: "o6", Status: "canceled", Reason: ReasonCancelAllAfter},
			OrderFinal{OrderID: "o7", Status: "canceled"},
			OrderFinal{OrderID: "o5", Status: "canceled", Reason: ReasonCancelAllAfter})
	}
	return f
}

// setOrder changes how node lists order id.
func setOrder(f *tradingFixture, node, id, status, reason string) {
	for i, o := range f.final.Traders["t"].Nodes[node].Orders {
		if o.OrderID == id {
			f.final.Traders["t"].Nodes[node].Orders[i] = OrderFinal{OrderID: id, Status: status, Reason: reason}
		}
	}
}

// setOrderEverywhere changes how every node lists order id (an ended
// order reads the same on every replica).
func setOrderEverywhere(f *tradingFixture, id, status, reason string) {
	for node := range f.final.Traders["t"].Nodes {
		setOrder(f, node, id, status, reason)
	}
}

// setDone changes the completion of op id.
func setDone(f *tradingFixture, id int, change func(op *history.Op)) {
	for i := range f.ops {
		if f.ops[i].ID == id && f.ops[i].Type != history.Invoke {
			change(&f.ops[i])
		}
	}
}

func TestSwitchAcceptsAValidHistory(t *testing.T) {
	f := newSwitchFixture()
	res, rep := Trading(f.ops, f.final)
	if res.Verdict != Valid {
		t.Fatalf("verdict %s: %v", res.Verdict, res.Details)
	}
	if rep.Arms != 1 || rep.SwitchCancels != 2 || rep.CanceledWhileDisarmed != 0 || rep.Orders != 6 {
		t.Fatalf("report %+v", rep)
	}
}

// Unknown outcomes leave the switch possibly armed: nothing is claimed.
func TestSwitchClaimsNothingUnproven(t *testing.T) {
	cases := []struct {
		name  string
		plant func(f *tradingFixture)
	}{
		{"disarm outcome unknown", func(f *tradingFixture) {
			// o7 canceled by the switch after 11's disarm; but 11 may never
			// have been applied, so 8's arm may still have held.
			setOrderEverywhere(f, "o7", "canceled", ReasonCancelAllAfter)
			setDone(f, 13, func(op *history.Op) { op.OrderStatus = "not-canceled" })
			setDone(f, 11, func(op *history.Op) { op.Type, op.Armed, op.Status, op.Code = history.Info, nil, 503, "unavailable" })
		}},
		{"no cancel bounds the fire", func(f *tradingFixture) {
			// o7 canceled by the switch; 13 never answered, so the fire may
			// have come after 14's arm, whose outcome is unknown.
			setOrderEverywhere(f, "o7", "canceled", ReasonCancelAllAfter)
			setDone(f, 13, func(op *history.Op) {
				op.Type, op.OrderStatus, op.Status, op.Code = history.Info, "", 503, "unavailable"
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newSwitchFixture()
			c.plant(f)
			if res, _ := Trading(f.ops, f.final); res.Verdict != Valid {
				t.Fatalf("verdict %s, want ok: %v", res.Verdict, res.Details)
			}
		})
	}
}

func TestSwitchCatchesPlantedBugs(t *testing.T) {
	cases := []struct {
		name  string
		plant func(f *tradingFixture)
		want  string
		count func(TradingReport) int
	}{
		{"fill after a switch cancel", func(f *tradingFixture) {
			// n1 says the switch canceled o5; n2 filled it instead.
			v := f.final.Traders["t"].Nodes["n2"]
			v.Fills = append(v.Fills, FillFinal{OrderID: "o5", MarketID: "ETH-PERP", Buy: true, Opened: 1, Seq: "20"})
			v.Positions = append(v.Positions, PositionFinal{MarketID: "ETH-PERP", Contracts: 1})
			setOrder(f, "n2", "o5", "filled", "")
		}, "o5 was canceled (by cancel-all-after on n1) but filled", func(r TradingReport) int { return r.CanceledFilled }},
		{"switch cancel while provably disarmed", func(f *tradingFixture) {
			// o7 rested after 11's acknowledged disarm, and 13 found it
			// closed before 14 was even invoked: no arm could have held.
			setOrder(f, "n2", "o7", "canceled", ReasonCancelAllAfter)
			setDone(f, 13, func(op *history.Op) { op.OrderStatus = "not-canceled" })
		}, "o7 (placed by op #12) was canceled by cancel-all-after (listed on n2) while the switch was provably disarmed",
			func(r TradingReport) int { return r.CanceledWhileDisarmed }},
		{"switch cancels an order a client canceled", func(f *tradingFixture) {
			setOrder(f, "n1", "o7", "canceled", ReasonCancelAllAfter)
		}, "canceled by client cancel op #13 and again by cancel-all-after", nil},
		{"arm answered disarmed", func(f *tradingFixture) {
			setDone(f, 8, func(op *history.Op) { op.Armed, op.DeadlineTsMs = new(bool), nil })
		}, "armed 2000 ms but answered disarmed", nil},
		{"disarm answered armed", func(f *tradingFixture) {
			armed := true
			setDone(f, 11, func(op *history.Op) { op.Armed = &armed })
		}, "disarmed but answered armed", nil},
		{"log time goes back", func(f *tradingFixture) {
			f.caa(16, 1000, history.OK, 99_000) // invoked after 8 returned, at an earlier log time
		}, "log time went back", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newSwitchFixture()
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
