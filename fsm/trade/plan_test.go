package trade

import (
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

func mkt(p *market.Params) *market.MarketState { return &market.MarketState{Params: *p} }

func at(execQ8 int64) Quote { return Quote{MidQ8: execQ8, ExecQ8: execQ8} }

const rich = int64(1_000_000_000_000_000) // 10,000 BTC of free balance

func plan(t *testing.T, m *market.MarketState, pos Position, side Side, q int64, qt Quote, free int64) Plan {
	t.Helper()
	pl, ref := PlanFill(m, pos, side, q, qt, free, 1000)
	if ref != nil {
		t.Fatalf("refused: %v", ref)
	}
	return pl
}

func wantPlan(t *testing.T, name string, got, want int64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", name, got, want)
	}
}

// BitMEX's example through the fill plan, with the default 0.05% taker
// fee and 1% initial margin: open 15000 at 750 (20 BTC of notional: 0.2
// BTC margin, 0.01 BTC fee), close at 800 (18.75 BTC of notional: 0.009375
// BTC fee). The trader nets 1.25 - 0.01 - 0.009375 = 1.230625 BTC.
func TestPlanBitmexRoundTrip(t *testing.T) {
	m := mkt(inverseParams())
	open := plan(t, m, Position{}, Long, 15000, at(usd(750)), rich)
	wantPlan(t, "opened", open.Opened, 15000)
	wantPlan(t, "notional", open.TradeNotionalMsat, 2_000_000_000_000)
	wantPlan(t, "margin", open.FreeToMargin, 20_000_000_000)
	wantPlan(t, "fee", open.FeeFromFree, 1_000_000_000)
	if open.After != (Position{Side: Long, Contracts: 15000, EntryQ8: usd(750), MarginMsat: 20_000_000_000, FundingClockTsMs: 1000}) {
		t.Fatalf("after open: %+v", open.After)
	}
	closing := plan(t, m, open.After, Short, 15000, at(usd(800)), rich)
	wantPlan(t, "closed", closing.Closed, 15000)
	wantPlan(t, "pnl", closing.RealizedPnlMsat, 125_000_000_000)
	wantPlan(t, "released", closing.ReleasedMarginMsat, 20_000_000_000)
	wantPlan(t, "house pays", closing.HouseToMargin, 125_000_000_000)
	wantPlan(t, "fee", closing.FeeMsat, 937_500_000)
	wantPlan(t, "fee from margin", closing.FeeFromMargin, 937_500_000)
	wantPlan(t, "to free", closing.MarginToFree, 144_062_500_000)
	if closing.After != (Position{}) {
		t.Fatalf("after close: %+v", closing.After)
	}
	net := closing.MarginToFree - open.FreeToMargin - open.FeeFromFree
	wantPlan(t, "net gain", net, 123_062_500_000)
}

// A partial close at a loss pays from the closed share of the margin, then
// from the rest of the position's margin; the fee then comes from free.
func TestPlanPartialCloseLossPaysFromMargin(t *testing.T) {
	m := mkt(inverseParams())
	pos := Position{Side: Long, Contracts: 1000, EntryQ8: usd(100), MarginMsat: 10_000_000_000, FundingClockTsMs: 5}
	pl := plan(t, m, pos, Short, 400, at(usd(99)), rich)
	// 400*1e11*(1/100 - 1/99) = -4,040,404,040.40..., rounded down.
	wantPlan(t, "pnl", pl.RealizedPnlMsat, -4_040_404_041)
	wantPlan(t, "released", pl.ReleasedMarginMsat, 4_000_000_000)
	wantPlan(t, "to house", pl.MarginToHouse, 4_040_404_041)
	wantPlan(t, "to free", pl.MarginToFree, 0)
	// Fee: 400e19/99e8 = 404,040,404,040.4 -> 404,040,404,041; 0.05% -> 202,020,202.02 -> up.
	wantPlan(t, "fee from free", pl.FeeFromFree, 202_020_203)
	wantPlan(t, "deficit", pl.DeficitMsat, 0)
	if pl.After != (Position{Side: Long, Contracts: 600, EntryQ8: usd(100), MarginMsat: 5_959_595_959, FundingClockTsMs: 5}) {
		t.Fatalf("after: %+v", pl.After)
	}
}

// A partial close's margin share rounds down; the remainder stays.
func TestPlanPartialCloseReleasesMarginRoundedDown(t *testing.T) {
	m := mkt(inverseParams())
	pos := Position{Side: Short, Contracts: 3, EntryQ8: usd(100), MarginMsat: 10, FundingClockTsMs: 5}
	pl := plan(t, m, pos, Long, 1, at(usd(100)), rich)
	wantPlan(t, "released", pl.ReleasedMarginMsat, 3) // 10/3 = 3.33
	wantPlan(t, "kept", pl.After.MarginMsat, 7)
	pl = plan(t, m, pl.After, Long, 2, at(usd(100)), rich)
	wantPlan(t, "released on full close", pl.ReleasedMarginMsat, 7)
}

// A loss beyond the whole margin is the deficit: the house receives only
// the margin, the trader's free balance is untouched by the loss.
func TestPlanLossBeyondMarginIsDeficit(t *testing.T) {
	m := mkt(inverseParams())
	pos := Position{Side: Long, Contracts: 1000, EntryQ8: usd(100), MarginMsat: 10_000_000_000}
	pl := plan(t, m, pos, Short, 1000, at(usd(90)), rich)
	wantPlan(t, "pnl", pl.RealizedPnlMsat, -111_111_111_112)
	wantPlan(t, "to house", pl.MarginToHouse, 10_000_000_000)
	wantPlan(t, "deficit", pl.DeficitMsat, 101_111_111_112)
	wantPlan(t, "to free", pl.MarginToFree, 0)
	if pl.FeeFromFree != pl.FeeMsat || pl.FeeMsat == 0 {
		t.Fatalf("fee %d, from free %d", pl.FeeMsat, pl.FeeFromFree)
	}
}

// A flip is a close and an open in one fill.
func TestPlanFlipClosesThenOpens(t *testing.T) {
	m := mkt(inverseParams())
	pos := Position{Side: Long, Contracts: 100, EntryQ8: usd(100), MarginMsat: 1_000_000_000}
	pl := plan(t, m, pos, Short, 300, at(usd(100)), rich)
	wantPlan(t, "closed", pl.Closed, 100)
	wantPlan(t, "opened", pl.Opened, 200)
	wantPlan(t, "fee", pl.FeeMsat, 150_000_000)
	wantPlan(t, "fee from margin", pl.FeeFromMargin, 150_000_000)
	wantPlan(t, "to free", pl.MarginToFree, 850_000_000)
	wantPlan(t, "new margin", pl.FreeToMargin, 2_000_000_000)
	_, ref := PlanFill(m, pos, Short, 300, at(usd(100)), 1_150_000_000-1, 1000)
	if ref == nil || ref.Code != wire.CodeInsufficientMargin {
		t.Fatalf("one msat short: %v", ref)
	}
	pl = plan(t, m, pos, Short, 300, at(usd(100)), 1_150_000_000)
	if pl.After != (Position{Side: Short, Contracts: 200, EntryQ8: usd(100), MarginMsat: 2_000_000_000, FundingClockTsMs: 1000}) {
		t.Fatalf("after: %+v", pl.After)
	}
}

func TestPlanAddAveragesEntry(t *testing.T) {
	m := mkt(inverseParams())
	pos := Position{Side: Long, Contracts: 100, EntryQ8: usd(100), MarginMsat: 1_000_000_000, FundingClockTsMs: 7}
	pl := plan(t, m, pos, Long, 100, at(usd(200)), rich)
	if pl.After != (Position{Side: Long, Contracts: 200, EntryQ8: 13_333_333_334, MarginMsat: 1_500_000_000, FundingClockTsMs: 7}) {
		t.Fatalf("after: %+v", pl.After)
	}
}

func TestPlanRefusals(t *testing.T) {
	inv := inverseParams()
	m := mkt(inv)
	// Opening 100 at 100 needs 1e9 margin plus 5e7 fee: exactly enough passes.
	if _, ref := PlanFill(m, Position{}, Long, 100, at(usd(100)), 1_050_000_000, 0); ref != nil {
		t.Fatalf("exact balance refused: %v", ref)
	}
	if _, ref := PlanFill(m, Position{}, Long, 100, at(usd(100)), 1_050_000_000-1, 0); ref == nil || ref.Code != wire.CodeInsufficientMargin {
		t.Fatalf("one short: %v", ref)
	}
	// Closing at a total loss with nothing free: the fee cannot be paid.
	pos := Position{Side: Long, Contracts: 100, EntryQ8: usd(100), MarginMsat: 1_000_000_000}
	if _, ref := PlanFill(m, pos, Short, 100, at(usd(50)), 0, 0); ref == nil || ref.Code != wire.CodeInsufficientBalance {
		t.Fatalf("unpayable fee on a close: %v", ref)
	}

	limit := PositionLimitContracts(inv)
	big := Position{Side: Long, Contracts: limit - 5, EntryQ8: usd(100), MarginMsat: 1}
	if _, ref := PlanFill(m, big, Long, 5, at(usd(100)), rich, 0); ref != nil {
		t.Fatalf("up to the position limit: %v", ref)
	}
	if _, ref := PlanFill(m, big, Long, 6, at(usd(100)), rich, 0); ref == nil || ref.Code != wire.CodePositionLimit {
		t.Fatalf("beyond the position limit: %v", ref)
	}
	// Reducing is never refused for limits.
	if _, ref := PlanFill(m, big, Short, 6, at(usd(100)), rich, 0); ref != nil {
		t.Fatalf("reducing a large position: %v", ref)
	}

	capOI := OICapContracts(inv)
	m.LongOIContracts = capOI - 5
	if _, ref := PlanFill(m, Position{}, Long, 5, at(usd(100)), rich, 0); ref != nil {
		t.Fatalf("up to the cap: %v", ref)
	}
	if _, ref := PlanFill(m, Position{}, Long, 6, at(usd(100)), rich, 0); ref == nil || ref.Code != wire.CodeOICap {
		t.Fatalf("beyond the cap: %v", ref)
	}
	if _, ref := PlanFill(m, Position{}, Short, 6, at(usd(100)), rich, 0); ref != nil {
		t.Fatalf("the other side is not capped by this one: %v", ref)
	}
}
