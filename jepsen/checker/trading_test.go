package checker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perpd/perpd/jepsen/history"
)

// tradingFixture is a valid trading history for trader "t" on two nodes:
// a granted deposit; o1 a market buy of 10, acknowledged filled; o2 a
// limit order, acknowledged resting, then canceled (acknowledged); o3 a
// market sell of 4 whose answer was lost, settled by its retry as filled;
// o4 refused. Each node lists the same fills, orders and position.
type tradingFixture struct {
	ops   []history.Op
	final *Final
}

func (f *tradingFixture) add(op history.Op) {
	op.Index, op.TimeNs = len(f.ops), int64(len(f.ops))*ms(1)
	f.ops = append(f.ops, op)
}

// write records an invocation and its completion (none when typ is "").
func (f *tradingFixture) write(id int, fn, key, order string, typ history.Type, done history.Op) {
	f.add(history.Op{ID: id, Type: history.Invoke, Process: id, F: fn, Account: "t", IdemKey: key, Order: order, Resolves: done.Resolves})
	if typ != "" {
		done.ID, done.Type, done.Process, done.F, done.Account, done.IdemKey, done.Order = id, typ, id, fn, "t", key, order
		f.add(done)
	}
}

func newTradingFixture() *tradingFixture {
	f := &tradingFixture{}
	f.write(1, history.FFaucet, "g1", "", history.OK, history.Op{Msat: history.Int64(grant)})
	f.write(2, history.FOrder, "o1", "o1", history.OK, history.Op{OrderStatus: "filled"})
	f.write(3, history.FOrder, "o2", "o2", history.OK, history.Op{OrderStatus: "resting"})
	f.write(4, history.FCancel, "c1", "o2", history.OK, history.Op{OrderStatus: "canceled"})
	f.write(5, history.FOrder, "o3", "o3", history.Info, history.Op{Status: 503, Code: "unavailable"})
	f.write(6, history.FOrder, "o4", "o4", history.Fail, history.Op{Status: 400, Code: "insufficient_margin"})
	f.write(7, history.FOrder, "o3", "o3", history.OK, history.Op{Resolves: 5, OrderStatus: "filled"})
	f.final = &Final{
		Accounts: map[string]*AccountFinal{"t": {DepositsComplete: true, Deposits: []Deposit{{Seq: "1", RailRef: "r", CreditedMsat: grant}}}},
		Traders:  map[string]*TraderFinal{"t": {Nodes: map[string]*TraderView{"n1": view(), "n2": view()}}},
	}
	return f
}

// view: fills o1 (+10, fee 100, leaving 1500 msat of margin) and o3 (-4
// closing, PnL -50, fee 40, leaving 1000); position +6 with 1000 msat
// margin; equity = grant - 190.
func view() *TraderView {
	return &TraderView{
		FreeMsat: grant - 190 - 1000, ReservedMsat: 0,
		Positions: []PositionFinal{{MarketID: "BTC-PERP", Contracts: 6, MarginMsat: 1000}},
		Fills: []FillFinal{
			{OrderID: "o3", MarketID: "BTC-PERP", Buy: false, Closed: 4, FeeMsat: 40, RealizedPnlMsat: -50, AfterContracts: 6, AfterMarginMsat: 1000, Seq: "9"},
			{OrderID: "o1", MarketID: "BTC-PERP", Buy: true, Opened: 10, FeeMsat: 100, AfterContracts: 10, AfterMarginMsat: 1500, Seq: "5"},
		},
		Orders: []OrderFinal{{OrderID: "o3", Status: "filled"}, {OrderID: "o2", Status: "canceled"}, {OrderID: "o1", Status: "filled"}},
	}
}

func TestTradingAcceptsAValidHistory(t *testing.T) {
	f := newTradingFixture()
	res, rep := Trading(f.ops, f.final)
	if res.Verdict != Valid {
		t.Fatalf("verdict %s: %v", res.Verdict, res.Details)
	}
	if rep.Orders != 3 || rep.Fills != 2 || rep.DriftMsat != 0 || rep.VenueNetMsat != 190 {
		t.Fatalf("report %+v", rep)
	}
}

func TestTradingCatchesPlantedBugs(t *testing.T) {
	cases := []struct {
		name  string
		plant func(f *tradingFixture)
		want  string
		count func(TradingReport) int
	}{
		{"doubled fill", func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n2"]
			v.Fills = append(v.Fills, FillFinal{OrderID: "o3", MarketID: "BTC-PERP", Closed: 4, Seq: "12"})
		}, "filled 2 times", func(r TradingReport) int { return r.DoubledFills }},
		{"lost fill", func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n2"]
			v.Fills = v.Fills[:1] // o1's fill is gone on n2 only
		}, "acknowledged filled but has no fill", func(r TradingReport) int { return r.LostFills }},
		{"canceled order filled", func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n1"]
			v.Fills = append(v.Fills, FillFinal{OrderID: "o2", MarketID: "ETH-PERP", Buy: true, Opened: 1, Seq: "13"})
			v.Positions = append(v.Positions, PositionFinal{MarketID: "ETH-PERP", Contracts: 1})
			v.Orders[1].Status = "filled"
		}, "was canceled (acknowledged) but filled", func(r TradingReport) int { return r.CanceledFilled }},
		{"fill of a failed order", func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n1"]
			v.Fills = append(v.Fills, FillFinal{OrderID: "o4", MarketID: "ETH-PERP", Buy: true, Opened: 1, Seq: "14"})
			v.Positions = append(v.Positions, PositionFinal{MarketID: "ETH-PERP", Contracts: 1})
		}, "certainly failed", nil},
		{"retried key made two orders", func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n1"]
			v.Orders = append(v.Orders, OrderFinal{OrderID: "o3", Status: "canceled"})
		}, "listed more than once", nil},
		{"position is not the sum of fills", func(f *tradingFixture) {
			f.final.Traders["t"].Nodes["n1"].Positions[0].Contracts = 7
		}, "fills and liquidations sum to 6", nil},
		{"money created", func(f *tradingFixture) {
			f.final.Traders["t"].Nodes["n1"].FreeMsat += 1
		}, "equity", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newTradingFixture()
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

func TestTradingDriftCountsMoneyCreated(t *testing.T) {
	f := newTradingFixture()
	f.final.Traders["t"].Nodes["n1"].FreeMsat -= 7 // first node by name
	_, rep := Trading(f.ops, f.final)
	if rep.DriftMsat != 7 {
		t.Fatalf("drift %d, want 7", rep.DriftMsat)
	}
}

func TestMoneyLeavesTradersToTrading(t *testing.T) {
	f := newTradingFixture()
	f.final.Accounts["t"].FreeMsat = history.Int64(grant - 1190) // fills moved it off the deposits
	f.final.Samples = map[string][]StateSample{"n1": {{Applied: 5, Hash: "h"}}, "n2": {{Applied: 5, Hash: "h"}}}
	res, rep := Money(f.ops, f.final)
	if res.Verdict != Valid || rep.DriftMsat != 0 {
		t.Fatalf("money judged a trader as a register: %s %v drift %d", res.Verdict, res.Details, rep.DriftMsat)
	}
}

// A replica still catching up (a member wiped and re-joined) does not
// know the account yet and answers 401 before looking at the idempotency
// key: that settles nothing, and the next retry's answer decides.
func TestUnauthorizedRetryDoesNotSettle(t *testing.T) {
	f := &tradingFixture{}
	f.write(1, history.FOrder, "o1", "o1", history.Info, history.Op{Status: 503, Code: "unavailable"})
	f.write(2, history.FOrder, "o1", "o1", history.Fail, history.Op{Resolves: 1, Status: 401, Code: "unauthorized"})
	f.write(3, history.FOrder, "o1", "o1", history.OK, history.Op{Resolves: 1, OrderStatus: "filled"})
	ws := Writes(f.ops, history.FOrder)
	if len(ws) != 1 || ws[0].Outcome != Applied || ws[0].OrderStatus != "filled" {
		t.Fatalf("writes %+v: a 401 from a lagging replica settled the order", ws)
	}
}

// A trader whose node keeps only its newest ClosedOrdersKept closed orders
// (a run of 25 minutes or more places that many) has older acknowledged
// orders missing from the listing by design: they are not reported as
// lost, and the rest of the view is still judged.
func TestOrdersMissingAtTheClosedOrdersBoundAreNotJudged(t *testing.T) {
	f := newTradingFixture()
	var closed []OrderFinal
	for i := range ClosedOrdersKept {
		id := fmt.Sprintf("x%d", i)
		f.write(100+i, history.FOrder, id, id, history.OK, history.Op{OrderStatus: "resting"})
		closed = append(closed, OrderFinal{OrderID: id, Status: "canceled"})
	}
	for _, v := range f.final.Traders["t"].Nodes {
		// o1, the oldest, is dropped; the newer ones are listed.
		v.Orders = append(append([]OrderFinal(nil), closed...), v.Orders[:2]...)
	}
	res, _ := Trading(f.ops, f.final)
	if res.Verdict == Violation {
		t.Fatalf("a listing at its bound was judged: %v", res.Details[:min(3, len(res.Details))])
	}
	if !strings.Contains(strings.Join(res.Details, "\n"), "missing from the listing not judged") {
		t.Fatalf("the unjudged orders are not reported: %s %v", res.Verdict, res.Details)
	}
	// The rest is still judged: money created on a node at the bound.
	f.final.Traders["t"].Nodes["n1"].FreeMsat++
	if res, _ := Trading(f.ops, f.final); res.Verdict != Violation || !strings.Contains(strings.Join(res.Details, "\n"), "equity") {
		t.Fatalf("a view at the closed-orders bound is no longer judged: verdict %s %v", res.Verdict, res.Details[:min(3, len(res.Details))])
	}
	// One below the bound, the same missing order is a loss.
	f = newTradingFixture()
	for _, v := range f.final.Traders["t"].Nodes {
		v.Orders = v.Orders[:2]
	}
	if res, _ := Trading(f.ops, f.final); res.Verdict != Violation {
		t.Fatalf("an acknowledged order missing below the bound: verdict %s", res.Verdict)
	}
}
