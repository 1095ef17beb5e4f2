package checker

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/jepsen/history"
)

// newRiskFixture extends the valid trading history of trader "t" (a long
// of 6 BTC-PERP holding 1000 msat of margin after seq 9) with risk, and
// adds a second trader "u":
//
//   - seq 40: funding at rate +100 (longs pay): t pays 30 msat (margin
//     970); seq 41: u's short receives 15;
//   - seq 50: t is partially liquidated: 2 closed, PnL -200, penalty 10,
//     4 left with 970 - 200 - 10 = 760 msat;
//   - seq 60: t is liquidated fully: 4 closed, PnL -900 of which the
//     margin pays 760 (deficit 140, no penalty, nothing returned); the
//     fund covers 100, so ADL runs;
//   - seq 61: u's short of 5 (order u1, seq 3, 500 msat of margin) is
//     deleveraged: a buy closing 4 with PnL +300 after the cut, no fee;
//     1 left with 100 msat;
//   - o5, a limit order of t resting in BTC-PERP, was canceled by the
//     liquidation.
//
// t's equity moves by -30 - 210 - 760: grant - 1190, all free. u's is
// grant - 50 + 15 + 300, of which 100 is margin.
func newRiskFixture() *tradingFixture {
	f := newTradingFixture()
	f.write(8, history.FOrder, "o5", "o5", history.OK, history.Op{OrderStatus: "resting"})
	f.add(history.Op{ID: 30, Type: history.Invoke, Process: 30, F: history.FFaucet, Account: "u", IdemKey: "gu"})
	f.add(history.Op{ID: 30, Type: history.OK, Process: 30, F: history.FFaucet, Account: "u", IdemKey: "gu", Msat: history.Int64(grant)})
	f.add(history.Op{ID: 31, Type: history.Invoke, Process: 31, F: history.FOrder, Account: "u", IdemKey: "u1", Order: "u1"})
	f.add(history.Op{ID: 31, Type: history.OK, Process: 31, F: history.FOrder, Account: "u", IdemKey: "u1", Order: "u1", OrderStatus: "filled"})
	eachNode(f, func(v *TraderView) {
		v.FreeMsat = grant - 1190
		v.Positions = nil
		v.Orders = append(v.Orders, OrderFinal{OrderID: "o5", MarketID: "BTC-PERP", Status: "canceled", Reason: ReasonLiquidation})
		v.Funding = []FundingFinal{{MarketID: "BTC-PERP", BoundaryTsMs: 3_600_000, RateQ9: 100, FlowMsat: -30, PaidMsat: -30, PositionID: "pos_1", Seq: "40"}}
		v.Liquidations = []LiquidationFinal{
			{PositionID: "pos_1", MarketID: "BTC-PERP", Long: true, Closed: 4, RealizedPnlMsat: -900, HasRemainder: true,
				DeficitMsat: 140, InsuranceCoveredMsat: 100, ADLTriggered: true, Seq: "60"},
			{PositionID: "pos_1", MarketID: "BTC-PERP", Long: true, Closed: 2, Partial: true, RealizedPnlMsat: -200, PenaltyMsat: 10,
				RemainingContracts: 4, RemainingMarginMsat: 760, Seq: "50"},
		}
	})
	f.final.Accounts["u"] = &AccountFinal{DepositsComplete: true, Deposits: []Deposit{{Seq: "2", RailRef: "ru", CreditedMsat: grant}}}
	f.final.Traders["u"] = &TraderFinal{Nodes: map[string]*TraderView{"n1": uView(), "n2": uView()}}
	return f
}

func uView() *TraderView {
	return &TraderView{
		FreeMsat:  grant + 165,
		Positions: []PositionFinal{{MarketID: "BTC-PERP", Contracts: -1, MarginMsat: 100}},
		Fills: []FillFinal{
			{OrderID: "adl-60", MarketID: "BTC-PERP", Buy: true, Closed: 4, RealizedPnlMsat: 300, AfterContracts: -1, AfterMarginMsat: 100, Seq: "61"},
			{OrderID: "u1", MarketID: "BTC-PERP", Opened: 5, FeeMsat: 50, AfterContracts: -5, AfterMarginMsat: 500, Seq: "3"},
		},
		Orders:  []OrderFinal{{OrderID: "u1", MarketID: "BTC-PERP", Status: "filled"}},
		Funding: []FundingFinal{{MarketID: "BTC-PERP", BoundaryTsMs: 3_600_000, RateQ9: 100, FlowMsat: 15, PaidMsat: 15, PositionID: "pos_2", Seq: "41"}},
	}
}

// views returns trader a's view on every node.
func views(f *tradingFixture, a string) []*TraderView {
	var out []*TraderView
	for _, n := range sortedMapKeys(f.final.Traders[a].Nodes) {
		out = append(out, f.final.Traders[a].Nodes[n])
	}
	return out
}

// liq returns t's liquidation seq on v.
func liq(v *TraderView, seq string) *LiquidationFinal {
	for i := range v.Liquidations {
		if v.Liquidations[i].Seq == seq {
			return &v.Liquidations[i]
		}
	}
	panic("no liquidation " + seq)
}

func TestRiskAcceptsAValidHistory(t *testing.T) {
	for _, settled := range []bool{false, true} {
		f := newRiskFixture()
		f.final.Traders["t"].Settled, f.final.Traders["u"].Settled = settled, settled
		res, rep := Trading(f.ops, f.final)
		if res.Verdict != Valid {
			t.Fatalf("settled=%t: verdict %s: %v", settled, res.Verdict, res.Details)
		}
		if rep.Liquidations != 2 || rep.PartialLiquidations != 1 || rep.Deficits != 1 || rep.ADLFills != 1 ||
			rep.FundingFlows != 2 || rep.DriftMsat != 0 || rep.Fills != 4 || rep.VenueNetMsat != 1190-265 {
			t.Fatalf("report %+v", rep)
		}
	}
}

func TestRiskCatchesPlantedBugs(t *testing.T) {
	cases := []struct {
		name    string
		settled bool
		plant   func(f *tradingFixture)
		want    string
		count   func(TradingReport) int
	}{
		{"a liquidation closes more than was open", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "60").Closed = 5
			}
		}, "liquidation seq 60 closed 5 contracts of a long position of 4", func(r TradingReport) int { return r.OverLiquidated }},
		{"a liquidation of a position that is not open", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				v.Liquidations = append(v.Liquidations, LiquidationFinal{MarketID: "ETH-PERP", Long: true, Closed: 1, HasRemainder: true, Seq: "70"})
			}
		}, "liquidation seq 70 closed 1 contracts of a long position in ETH-PERP, but the position was 0", nil},
		{"a liquidation on the wrong side", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "50").Long = false
			}
		}, "liquidation seq 50 closed 2 contracts of a short position in BTC-PERP, but the position was 6", nil},
		{"a partial liquidation leaves the wrong margin", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "50").RemainingMarginMsat = 761
			}
		}, "partial liquidation seq 50 leaves 761 msat of margin, but margin 970 + PnL -200 - penalty 10 is 760", nil},
		{"a partial liquidation leaves the wrong size", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "50").RemainingContracts = 3
			}
		}, "partial liquidation seq 50 closed 2 of 6 contracts but leaves 3", nil},
		{"a full liquidation returns too much", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "60").RemainderMsat = 5
				v.FreeMsat += 5
			}
		}, "full liquidation seq 60 returned 5 msat to free, but margin 760 + PnL -900 + deficit 140 - penalty 0 is 0", nil},
		{"a penalty deepens a deficit", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				l := liq(v, "60")
				l.PenaltyMsat, l.DeficitMsat, l.InsuranceCoveredMsat = 10, 150, 110
			}
		}, "full liquidation seq 60 has a deficit of 150 msat yet a penalty of 10", nil},
		{"ADL flag disagrees with the cover", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "60").InsuranceCoveredMsat = 140
			}
		}, "liquidation seq 60: adlTriggered true with deficit 140 and insurance cover 140", nil},
		{"a position still holds liquidated contracts", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				v.Positions = []PositionFinal{{MarketID: "BTC-PERP", Contracts: 4, MarginMsat: 760}}
				v.FreeMsat -= 760
			}
		}, "position in BTC-PERP is 4 contracts but its fills and liquidations sum to 0", nil},
		{"a liquidation's loss left out of the balance", false, func(f *tradingFixture) {
			f.final.Traders["t"].Nodes["n1"].FreeMsat += 210
		}, "equity", nil},
		{"a liquidation listed twice", false, func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n1"]
			v.Liquidations = append(v.Liquidations, v.Liquidations[1])
		}, "seq 50 is listed twice", nil},
		{"a liquidation under a fill's seq", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "50").Seq = "9"
			}
		}, "seq 9 is listed twice (as a fill and as a liquidation)", nil},
		{"replicas disagree on a liquidation", false, func(f *tradingFixture) {
			liq(f.final.Traders["t"].Nodes["n2"], "50").ExecQ8 = 7
		}, "liquidation seq 50 is", nil},
		{"a liquidation missing on a settled replica", true, func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n2"]
			v.Liquidations = v.Liquidations[1:]
			v.Positions = []PositionFinal{{MarketID: "BTC-PERP", Contracts: 4, MarginMsat: 760}}
			v.FreeMsat = grant - 1190 // equity grant - 430, 760 of it margin; o5 went with the partial liquidation
			f.final.Traders["u"].Settled = true
		}, "settled, yet n1 and n2 differ: liquidation seq 60 only on the first", nil},
		{"funding paid by the receiving side", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				v.Funding[0].FlowMsat, v.Funding[0].PaidMsat = 30, 30
				v.FreeMsat += 60
			}
		}, "funding flow seq 40: a position of 6 at rate 100 got 30 msat", nil},
		{"funding paid in part with margin left", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				v.Funding[0].PaidMsat = -20
			}
		}, "funding flow seq 40 owed -30 msat and paid -20 from a margin of 1000", nil},
		{"a position pays twice at one boundary", false, func(f *tradingFixture) {
			for _, v := range views(f, "u") {
				g := v.Funding[0]
				g.Seq = "42"
				v.Funding = append(v.Funding, g)
			}
		}, "funding flows seq 41 and 42 both settle BTC-PERP at boundary 3600000", nil},
		{"funding for no position", false, func(f *tradingFixture) {
			for _, v := range views(f, "u") {
				v.Funding = append(v.Funding, FundingFinal{MarketID: "ETH-PERP", BoundaryTsMs: 3_600_000, RateQ9: 100, FlowMsat: 5, PaidMsat: 5, Seq: "43"})
				v.FreeMsat += 5
			}
		}, "funding flow seq 43 in ETH-PERP, but no position was open there", nil},
		{"funding left out of the balance", false, func(f *tradingFixture) {
			f.final.Traders["u"].Nodes["n1"].FreeMsat -= 15
		}, "u on n1: equity", nil},
		{"an ADL fill names no liquidation", false, func(f *tradingFixture) {
			setFillOf(f, "u", "adl-60", func(x *FillFinal) { x.OrderID = "adl-99" })
		}, "ADL fill seq 61 names liquidation 99, which no trader lists", nil},
		{"an ADL fill for a liquidation the fund covered", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				l := liq(v, "60")
				l.InsuranceCoveredMsat, l.ADLTriggered = 140, false
			}
		}, "ADL fill seq 61 for liquidation 60 of t, which did not trigger ADL", nil},
		{"an ADL fill on the liquidated side", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				liq(v, "60").MarketID = "ETH-PERP"
			}
		}, "ADL fill seq 61 is a buy in BTC-PERP, but liquidation 60 closed a long position in ETH-PERP", nil},
		{"ADL closes more than was liquidated", false, func(f *tradingFixture) {
			setFillOf(f, "u", "adl-60", func(x *FillFinal) { x.Closed, x.AfterContracts, x.AfterMarginMsat = 5, 0, 0 })
			for _, v := range views(f, "u") {
				v.Positions, v.FreeMsat = nil, v.FreeMsat+100
			}
		}, "ADL fills of liquidation 60 closed 5 contracts, the liquidation only 4", nil},
		{"an ADL fill with a fee", false, func(f *tradingFixture) {
			setFillOf(f, "u", "adl-60", func(x *FillFinal) { x.FeeMsat = 3 })
		}, "ADL fill seq 61 (adl-60) closed 4, opened 0, fee 3", nil},
		{"an ADL fill before its liquidation", false, func(f *tradingFixture) {
			setFillOf(f, "u", "adl-60", func(x *FillFinal) { x.Seq = "59" })
		}, "ADL fill seq 59 is not after its liquidation 60", nil},
		{"a trader deleveraged for its own liquidation", false, func(f *tradingFixture) {
			for _, v := range views(f, "u") {
				liq := LiquidationFinal{MarketID: "BTC-PERP", Long: true, Closed: 4, HasRemainder: true, Seq: "60"}
				v.Liquidations = append(v.Liquidations, liq)
			}
		}, "seq 60 is listed by t and by u", nil},
		{"a seq listed by two traders", false, func(f *tradingFixture) {
			for _, v := range views(f, "u") {
				v.Funding[0].Seq = "40"
			}
		}, "seq 40 is listed by t and by u (a funding flow)", nil},
		{"an order canceled by a liquidation that never happened", false, func(f *tradingFixture) {
			for _, v := range views(f, "t") {
				v.Orders[len(v.Orders)-1].MarketID = "ETH-PERP"
			}
		}, "order o5 was canceled by a liquidation, but no position in ETH-PERP was liquidated", nil},
		{"a fill that opens against an open position", false, func(f *tradingFixture) {
			setFillOf(f, "t", "o3", func(x *FillFinal) { x.Closed, x.Opened = 0, 4 })
		}, "fill seq 9 of order o3 (sell 4 in BTC-PERP) closed 0 contracts of a position of 10: it closes 4", nil},
		{"a fill's positionAfter disagrees", false, func(f *tradingFixture) {
			setFillOf(f, "t", "o3", func(x *FillFinal) { x.AfterContracts = 7 })
		}, "fill seq 9 of order o3 left a position of 7 by its positionAfter, but the records before it make 6", nil},
		{"a position's margin off its records", false, func(f *tradingFixture) {
			for _, v := range views(f, "u") {
				v.Positions[0].MarginMsat, v.FreeMsat = 90, v.FreeMsat+10
			}
		}, "position in BTC-PERP holds 90 msat of margin but its last fill, liquidation and funding flows leave 100", nil},
		{"a fill settles funding", false, func(f *tradingFixture) {
			setFillOf(f, "t", "o3", func(x *FillFinal) { x.FundingSettledMsat = 4 })
		}, "fill seq 9 settled 4 msat of funding", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newRiskFixture()
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

// setFillOf changes trader a's fill of order id on every node.
func setFillOf(f *tradingFixture, a, id string, change func(x *FillFinal)) {
	for _, v := range views(f, a) {
		for i := range v.Fills {
			if v.Fills[i].OrderID == id {
				change(&v.Fills[i])
			}
		}
	}
}

// What the views do not prove is not claimed.
func TestRiskClaimsNothingUnproven(t *testing.T) {
	cases := []struct {
		name  string
		plant func(f *tradingFixture)
		want  Verdict
	}{
		{"a replica read before the full liquidation, not settled", func(f *tradingFixture) {
			v := f.final.Traders["t"].Nodes["n2"]
			v.Liquidations = v.Liquidations[1:]
			v.Positions = []PositionFinal{{MarketID: "BTC-PERP", Contracts: 4, MarginMsat: 760}}
			v.FreeMsat = grant - 1190 // equity grant - 430, 760 of it margin; o5 went with the partial liquidation
			// u was read on n2 before its ADL fill too.
			u := f.final.Traders["u"].Nodes["n2"]
			u.Fills = u.Fills[1:]
			u.Positions = []PositionFinal{{MarketID: "BTC-PERP", Contracts: -5, MarginMsat: 515}}
			u.FreeMsat = grant - 50 + 15 - 515
		}, Unknown},
		{"an ADL fill whose liquidated trader was not read on that node", func(f *tradingFixture) {
			delete(f.final.Traders["t"].Nodes, "n2")
		}, Unknown},
		{"ADL triggered with no profitable position to close", func(f *tradingFixture) {
			delete(f.final.Traders, "u")
			delete(f.final.Accounts, "u")
			var ops []history.Op
			for _, op := range f.ops {
				if op.Account != "u" {
					ops = append(ops, op)
				}
			}
			f.ops = ops
		}, Valid},
		{"funding paid in part by a margin that ran out", func(f *tradingFixture) {
			// t's margin was 1000: it pays all of it, and the partial
			// liquidation after it starts from 0 margin and a gain.
			for _, v := range views(f, "t") {
				v.Funding[0].FlowMsat, v.Funding[0].PaidMsat = -1500, -1000
				l := liq(v, "50")
				l.RealizedPnlMsat, l.RemainingMarginMsat = 800, 790
				full := liq(v, "60")
				full.RealizedPnlMsat = -930 // 790 - 930 = -140: the same deficit
				v.FreeMsat = grant - 190 - 1000 + 790 - 790
			}
		}, Valid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newRiskFixture()
			c.plant(f)
			if res, _ := Trading(f.ops, f.final); res.Verdict != c.want {
				t.Fatalf("verdict %s, want %s: %v", res.Verdict, c.want, res.Details)
			}
		})
	}
}

// Liquidations of shorts, at a profit and at a loss, are judged like
// longs mirrored.
func TestRiskShortLiquidations(t *testing.T) {
	var got []string
	bad := func(_ *int, format string, args ...any) { got = append(got, format) }
	var rep TradingReport
	p := &walkPos{n: -10, margin: 1000}
	checkLiquidation(bad, &rep, &LiquidationFinal{Closed: 3, Partial: true, RealizedPnlMsat: 50, PenaltyMsat: 20,
		RemainingContracts: 7, RemainingMarginMsat: 1030, Seq: "1"}, p)
	if p.n != -7 || p.margin != 1030 {
		t.Fatalf("after a partial liquidation of a short: %+v", *p)
	}
	checkLiquidation(bad, &rep, &LiquidationFinal{Closed: 7, RealizedPnlMsat: 400, PenaltyMsat: 30, HasRemainder: true,
		RemainderMsat: 1400, Seq: "2"}, p)
	if p.n != 0 || p.margin != 0 || len(got) != 0 {
		t.Fatalf("after a full liquidation of a short at a profit: %+v, complaints %v", *p, got)
	}
	p = &walkPos{n: -10, margin: 1000}
	checkLiquidation(bad, &rep, &LiquidationFinal{Closed: 10, RealizedPnlMsat: -1000, HasRemainder: true, Seq: "3"}, p)
	if len(got) != 0 {
		t.Fatalf("a liquidation losing exactly the margin: %v", got)
	}
	checkLiquidation(bad, &rep, &LiquidationFinal{Long: true, Closed: 1, HasRemainder: true, Seq: "4"}, &walkPos{n: -2})
	if len(got) != 1 {
		t.Fatalf("a long liquidation of a short position not flagged: %v", got)
	}
}
