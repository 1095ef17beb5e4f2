package fsm

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// walkTo moves log time to tsMs in ticks of under a minute, as a leader
// does, and returns the events.
func (w *tradeWorld) walkTo(tsMs int64) []Event {
	w.t.Helper()
	from := len(w.events)
	for w.ts < tsMs {
		w.ts = min(w.ts+MaxClockStepMs-1000, tsMs) - 1
		wantOK(w.t, w.at(&Command{Type: CmdTick}))
	}
	return w.events[from:]
}

func levered(o trade.PlaceRequest, lev int64) trade.PlaceRequest {
	o.Leverage = lev
	return o
}

func (w *tradeWorld) fundingFlows(acct string) (p trade.FundingPage) {
	w.m.Read(func(st *State, _ uint64) { p = st.Trade.FundingFlows(acct, 0, 100) })
	return p
}

func (w *tradeWorld) liquidations(acct string) (p trade.LiquidationsPage) {
	w.m.Read(func(st *State, _ uint64) { p = st.Trade.Liquidations(acct, 0, 100) })
	return p
}

// Worked funding (DESIGN: rate x notional at the boundary mark; the
// heavier side pays; payer rounds up, receiver down):
//
//	BTC-PERP: 10,000 long, 5,000 short. skew = 5,000/15,000 = 333,333,333 (q9,
//	truncated); rate = skew x 1e5/1e9 = 33,333 (below the 50,000 cap). At a
//	mark of 100,000 the long's notional is 1e10 msat: it pays
//	ceil(1e10 x 33,333/1e9) = 333,330; the short's is 5e9: it receives
//	floor(5e9 x 33,333/1e9) = 166,665.
//	ETH-PERP: 1,000 long alone: skew 1e9, rate capped at 50,000. Notional at
//	3,400 is 1,000 x 3,400 x 300 = 1.02e9 msat: it pays 51,000.
func TestFundingFlowsAtTheBoundaryWorkedExamples(t *testing.T) {
	w := newTradeWorld(t)
	long, lk := w.account(btcBTC)
	short, sk := w.account(btcBTC)
	created(t, w.order(long, lk, levered(mktOrder("l", "BTC-PERP", "buy", 10_000), 10)), trade.StatusFilled)
	created(t, w.order(short, sk, levered(mktOrder("s", "BTC-PERP", "sell", 5_000), 10)), trade.StatusFilled)
	created(t, w.order(long, lk, levered(mktOrder("e", "ETH-PERP", "buy", 1_000), 10)), trade.StatusFilled)
	lm, sm, em := w.position(long, "BTC-PERP").MarginMsat, w.position(short, "BTC-PERP").MarginMsat, w.position(long, "ETH-PERP").MarginMsat
	house := w.balance(ledger.House)

	boundary := (mktLaunchMs/market.FundingIntervalMs + 1) * market.FundingIntervalMs
	w.walkTo(boundary - 2000)
	if len(w.fundingFlows(long).Funding) != 0 {
		t.Fatal("funding before the boundary")
	}
	w.walkTo(boundary + 1000)
	lf, sf := w.fundingFlows(long).Funding, w.fundingFlows(short).Funding
	if len(lf) != 2 || len(sf) != 1 {
		t.Fatalf("flows: long %+v short %+v", lf, sf)
	}
	// Newest first: ETH (settled after BTC, market id order), then BTC.
	eth, btc := lf[0], lf[1]
	if btc.MarketID != "BTC-PERP" || btc.RateQ9 != 33_333 || btc.FlowMsat != -333_330 || btc.PaidMsat != -333_330 || int64(btc.BoundaryTsMs) != boundary ||
		btc.PositionID != trade.PositionIDString(w.position(long, "BTC-PERP").ID) {
		t.Fatalf("btc long flow %+v", btc)
	}
	if sf[0].FlowMsat != 166_665 || sf[0].PaidMsat != 166_665 {
		t.Fatalf("btc short flow %+v", sf[0])
	}
	if eth.MarketID != "ETH-PERP" || eth.RateQ9 != 50_000 || eth.FlowMsat != -51_000 {
		t.Fatalf("eth flow %+v", eth)
	}
	if got := w.position(long, "BTC-PERP"); got.MarginMsat != lm-333_330 || got.FundingClockTsMs != boundary {
		t.Fatalf("long after funding %+v (margin was %d)", got, lm)
	}
	if got := w.position(short, "BTC-PERP").MarginMsat; got != sm+166_665 {
		t.Fatalf("short margin %d, want %d", got, sm+166_665)
	}
	if got := w.position(long, "ETH-PERP").MarginMsat; got != em-51_000 {
		t.Fatalf("eth margin %d, want %d", got, em-51_000)
	}
	if got := w.balance(ledger.House); got != house+333_330-166_665+51_000 {
		t.Fatalf("house %d, want %d", got, house+333_330-166_665+51_000)
	}
	// The next boundary pays again, once; the history has both.
	w.walkTo(boundary + market.FundingIntervalMs + 1000)
	if n := len(w.fundingFlows(short).Funding); n != 2 {
		t.Fatalf("short has %d flows after two boundaries", n)
	}
	var hist []market.FundingEntry
	w.m.Read(func(st *State, _ uint64) { hist, _ = st.Market.Funding("BTC-PERP") })
	if len(hist) != 2 || hist[0].RateQ9 != 33_333 || hist[0].TsMs != boundary {
		t.Fatalf("funding history %+v", hist)
	}
}

// A crash of 40% in one print: every leveraged long is liquidated in that
// entry, the insurance fund takes the penalties and pays what it can of
// the deficits, and the rest deleverages the profitable shorts.
func TestCrashLiquidatesEveryLeveragedLong(t *testing.T) {
	w := newTradeWorld(t)
	var longs []string
	for i := 0; i < 40; i++ {
		a, k := w.account(btcBTC / 10)
		created(t, w.order(a, k, levered(mktOrder("l", "BTC-PERP", "buy", int64(1000+100*i)), int64(2+i%30))), trade.StatusFilled)
		longs = append(longs, a)
	}
	var shorts []string
	for i := 0; i < 5; i++ {
		a, k := w.account(btcBTC)
		created(t, w.order(a, k, levered(mktOrder("s", "BTC-PERP", "sell", 2000), 5)), trade.StatusFilled)
		shorts = append(shorts, a)
	}
	w.events = nil
	w.print("BTCUSD", usdQ8(60_000)) // checked after the entry: nothing left below maintenance
	var penalties, covered, deficits int64
	adl := 0
	for _, a := range longs {
		if p := w.position(a, "BTC-PERP"); p.Contracts != 0 {
			t.Fatalf("%s still long after the crash: %+v", a, p)
		}
		l := w.liquidations(a).Liquidations
		if len(l) != 1 || l[0].Partial || l[0].Side != "long" || int64(l[0].Oracle.MidQ8) != usdQ8(60_000) || l[0].RemainderMsat == nil {
			t.Fatalf("%s liquidation %+v", a, l)
		}
		penalties += int64(l[0].PenaltyMsat)
		covered += int64(l[0].InsuranceCoveredMsat)
		deficits += int64(l[0].DeficitMsat)
		if l[0].ADLTriggered {
			adl++
		}
	}
	if deficits == 0 || adl == 0 {
		t.Fatalf("a 40%% crash at up to 31x left no deficit (%d) or no ADL (%d)", deficits, adl)
	}
	if got := w.balance(ledger.Insurance); got != penalties-covered {
		t.Fatalf("insurance %d, want penalties %d - covered %d", got, penalties, covered)
	}
	// The shorts were deleveraged by fills at the mid.
	adlFills := 0
	for _, ev := range w.events {
		if f, ok := fillView(ev); ok && strings.HasPrefix(f.OrderID, trade.ADLOrderPrefix) {
			adlFills++
			if int64(f.ExecPriceQ8) != usdQ8(60_000) || f.FeeMsat != 0 {
				t.Fatalf("adl fill %+v", f)
			}
		}
	}
	if adlFills == 0 {
		t.Fatal("no adl fill")
	}
	reduced := 0
	for _, s := range shorts {
		if w.position(s, "BTC-PERP").Contracts < 2000 {
			reduced++
		}
	}
	if reduced == 0 {
		t.Fatal("no short was deleveraged")
	}
	var oi int64
	w.m.Read(func(st *State, _ uint64) { oi = st.Market.MarketsByID["BTC-PERP"].LongOIContracts })
	if oi != 0 {
		t.Fatalf("long open interest %d after every long was liquidated", oi)
	}
}

// A position just below maintenance is closed only in part: what remains
// holds at least twice its maintenance, and the penalty goes to the fund.
func TestPartialLiquidation(t *testing.T) {
	w := newTradeWorld(t)
	a, k := w.account(btcBTC)
	created(t, w.order(a, k, levered(mktOrder("l", "BTC-PERP", "buy", 100_000), 20)), trade.StatusFilled)
	pos := w.position(a, "BTC-PERP")
	p := w.marketParams("BTC-PERP")
	level, _, ok := trade.LiqLevel(&p, pos)
	if !ok {
		t.Fatal("no liquidation level")
	}
	w.print("BTCUSD", level+p.TickSizeQ8) // just above: nothing
	if len(w.liquidations(a).Liquidations) != 0 {
		t.Fatal("liquidated above the level")
	}
	w.print("BTCUSD", level)
	l := w.liquidations(a).Liquidations
	if len(l) != 1 || !l[0].Partial || l[0].RemainderMsat != nil || l[0].DeficitMsat != 0 || l[0].PenaltyMsat <= 0 {
		t.Fatalf("liquidation %+v", l)
	}
	after := w.position(a, "BTC-PERP")
	if after.Contracts != pos.Contracts-int64(l[0].ClosedContracts) || after.Contracts != int64(l[0].RemainingContracts) ||
		after.MarginMsat != int64(l[0].RemainingMarginMsat) || after.ID != pos.ID {
		t.Fatalf("after %+v, liquidation %+v", after, l[0])
	}
	if trade.UnderMaintenance(&p, after, level) {
		t.Fatal("the rest is still under maintenance")
	}
	if w.balance(ledger.Insurance) != int64(l[0].PenaltyMsat) {
		t.Fatalf("insurance %d, penalty %d", w.balance(ledger.Insurance), int64(l[0].PenaltyMsat))
	}
}

// An insurance fund too small for a gap's deficit: the shortfall comes out
// of the most profitable short's profit, and the house is made whole.
func TestInsuranceShortfallTriggersADL(t *testing.T) {
	w := newTradeWorld(t)
	long, lk := w.account(btcBTC)
	created(t, w.order(long, lk, mktOrder("l", "BTC-PERP", "buy", 20_000)), trade.StatusFilled) // 100x
	// Two shorts; the higher-leverage one ranks first (more profit per msat of margin).
	s1, k1 := w.account(btcBTC)
	s2, k2 := w.account(btcBTC)
	created(t, w.order(s1, k1, levered(mktOrder("s", "BTC-PERP", "sell", 50_000), 2)), trade.StatusFilled)
	created(t, w.order(s2, k2, levered(mktOrder("s", "BTC-PERP", "sell", 50_000), 20)), trade.StatusFilled)
	w.events = nil
	w.print("BTCUSD", usdQ8(90_000)) // a 10% gap: the 100x long is far past bankruptcy
	l := w.liquidations(long).Liquidations
	if len(l) != 1 || !l[0].ADLTriggered || l[0].DeficitMsat <= 0 || int64(l[0].InsuranceCoveredMsat) != int64(l[0].PenaltyMsat) {
		t.Fatalf("liquidation %+v", l)
	}
	// The fund paid all it had (its own penalty), the rest came from s2.
	if w.balance(ledger.Insurance) != 0 {
		t.Fatalf("insurance left %d", w.balance(ledger.Insurance))
	}
	shortfall := int64(l[0].DeficitMsat - l[0].InsuranceCoveredMsat)
	var cut int64
	for _, ev := range w.events {
		f, ok := fillView(ev)
		if !ok || !strings.HasPrefix(f.OrderID, trade.ADLOrderPrefix) {
			continue
		}
		if f.AccountID != s2 {
			t.Fatalf("adl hit %s before the top-ranked %s: %+v", f.AccountID, s2, f)
		}
		var p market.Params
		w.m.Read(func(st *State, _ uint64) { p = st.Market.MarketsByID["BTC-PERP"].Params })
		full, _ := trade.PnLMsat(&p, trade.Short, int64(f.ClosedContracts), w.lastEntry(s2), usdQ8(90_000))
		cut += full - int64(f.RealizedPnlMsat)
	}
	if cut != shortfall {
		t.Fatalf("adl cut %d, shortfall %d", cut, shortfall)
	}
	if w.position(s1, "BTC-PERP").Contracts != 50_000 {
		t.Fatal("the lower-ranked short was deleveraged too")
	}
}

// lastEntry is the entry price of acct's first fill (the tests open once).
func (w *tradeWorld) lastEntry(acct string) int64 {
	var e int64
	w.m.Read(func(st *State, _ uint64) { e = st.Trade.Accounts[acct].Fills[0].ExecQ8 })
	return e
}

// No liquidation runs in a halted market; the entry that lifts the halt
// liquidates what became due, and a raised maintenance rate moves every
// level at once.
func TestHaltDefersLiquidationAndParamsReindex(t *testing.T) {
	w := newTradeWorld(t)
	a, k := w.account(btcBTC)
	created(t, w.order(a, k, levered(mktOrder("l", "BTC-PERP", "buy", 10_000), 50)), trade.StatusFilled)
	b, kb := w.account(btcBTC)
	created(t, w.order(b, kb, levered(mktOrder("l", "BTC-PERP", "buy", 10_000), 10)), trade.StatusFilled)
	halted, live := market.StatusHalted, market.StatusLive
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
	w.print("BTCUSD", usdQ8(97_000)) // -3%: beyond the 50x long's level
	if len(w.liquidations(a).Liquidations) != 0 {
		t.Fatal("liquidated in a halted market")
	}
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
	if len(w.liquidations(a).Liquidations) != 1 {
		t.Fatal("lifting the halt did not liquidate the position that became due")
	}
	// 10x at -3% is safe at 0.5% maintenance, not at 8%.
	if len(w.liquidations(b).Liquidations) != 0 {
		t.Fatal("10x long liquidated at -3%")
	}
	im, mm := int64(100_000_000), int64(80_000_000)
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", IMRateQ9: &im, MMRateQ9: &mm})
	if len(w.liquidations(b).Liquidations) != 1 {
		t.Fatal("raising mmRate did not liquidate the position it put under maintenance")
	}
}

// TestFundingReceiverIsPaidTheExactAmountRoundedDown: at a mark of
// 100,000.00000001 the short's 5,000 contracts are worth
// 5,000 x 1e19 / 10,000,000,000,001 = 4,999,999,999.9995 msat, so at a
// rate of 33,333 it is owed floor(166,664.99999998...) = 166,664 msat.
// Below trade.LevelExactFunding the floor was taken from the notional
// already rounded up (5,000,000,000): 166,665, one msat more than owed
// (found by a review on 2026-11-26). The payer's side rounds up either
// way: ceil(1e10 x 33,333 / 1e9) = 333,330.
func TestFundingReceiverIsPaidTheExactAmountRoundedDown(t *testing.T) {
	for _, tc := range []struct {
		level    uint32
		received int64
	}{{trade.LevelExactFunding, 166_664}, {trade.LevelExactFunding - 1, 166_665}} {
		w := newTradeWorld(t)
		w.m.Read(func(st *State, _ uint64) { st.FeatureLevel = tc.level }) // a cluster at that level
		long, lk := w.account(btcBTC)
		short, sk := w.account(btcBTC)
		created(t, w.order(long, lk, levered(mktOrder("l", "BTC-PERP", "buy", 10_000), 10)), trade.StatusFilled)
		created(t, w.order(short, sk, levered(mktOrder("s", "BTC-PERP", "sell", 5_000), 10)), trade.StatusFilled)
		boundary := (mktLaunchMs/market.FundingIntervalMs + 1) * market.FundingIntervalMs
		w.walkTo(boundary - 2000)
		wantOK(t, w.print("BTCUSD", 10_000_000_000_001))
		w.walkTo(boundary + 1000)
		lf, sf := w.fundingFlows(long).Funding, w.fundingFlows(short).Funding
		if len(lf) != 1 || len(sf) != 1 || lf[0].RateQ9 != 33_333 {
			t.Fatalf("level %d: flows long %+v short %+v", tc.level, lf, sf)
		}
		if lf[0].FlowMsat != -333_330 || int64(sf[0].FlowMsat) != tc.received || int64(sf[0].PaidMsat) != tc.received {
			t.Fatalf("level %d: long %+v, short %+v, want the short paid %d", tc.level, lf[0], sf[0], tc.received)
		}
	}
}
