package fsm

// The risk engine under stress: gaps that take many positions past
// bankruptcy at once, the insurance fund drawn in order and never below
// zero, auto-deleveraging by its documented ranking, and every
// liquidation record adding up (a review of 2026-11-27).

import (
	mbig "math/big"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// riskAudit is what one entry did to a market's positions, the insurance
// fund and the house, checked record by record against the state before.
type riskAudit struct {
	liquidations, adlFills int
	fundingFlows           int
	deficits, covered      int64
	penalties, adlCut      int64
	shortfalls             int64
}

// marketPositions is every account's position in mkt.
func (w *tradeWorld) marketPositions(mkt string) map[string]trade.Position {
	out := map[string]trade.Position{}
	w.m.Read(func(st *State, _ uint64) {
		for id, a := range st.Trade.Accounts {
			if p, ok := a.Positions[mkt]; ok {
				out[id] = *p
			}
		}
	})
	return out
}

// auditEntry applies cmd and checks, in seq order, every funding flow,
// liquidation and auto-deleveraging fill it made in mkt against the
// positions before it (a flow moves the margin by what it paid and
// charges the rest to the entry):
// each record's fields add up (margin + PnL + deficit = penalty +
// remainder for a full close; the rest keeps margin + PnL - penalty for a
// partial one), the fund covers min(deficit, its balance) in that order
// and ends where the records say, adlTriggered is exactly cover <
// deficit, and each liquidation's ADL fills take the opposite side's
// profitable positions in the documented ranking (unrealised PnL per msat
// of margin at the mid, highest first, ties by account id), close at most
// the liquidated contracts and cut at most the shortfall, exactly it when
// the ranked profit suffices.
func (w *tradeWorld) auditEntry(mkt string, apply func() *Result) riskAudit {
	w.t.Helper()
	t := w.t
	p := w.marketParams(mkt)
	pos := w.marketPositions(mkt)
	fund, house := w.balance(ledger.Insurance), w.balance(ledger.House)
	nextFunding := func() (ts int64) {
		w.m.Read(func(st *State, _ uint64) { ts = st.Market.MarketsByID[mkt].NextFundingTsMs })
		return ts
	}
	boundary := nextFunding()
	from := len(w.events)
	wantOK(t, apply())
	evs := w.events[from:]
	if nextFunding() == boundary {
		boundary = 0
	} else {
		// The entry passed a funding boundary, settled before anything
		// else in it: every position's funding clock moved there.
		for id, q := range pos {
			q.FundingClockTsMs = boundary
			pos[id] = q
		}
	}
	var au riskAudit
	houseDelta := int64(0) // what the records say the house received
	type open struct {
		seq, shortfall, cut, closed, left int64
		side                              trade.Side
		ranked                            []string
		next                              int
		midQ8                             int64
	}
	var cur *open
	finish := func() {
		if cur == nil {
			return
		}
		if cur.cut > cur.shortfall || cur.left < 0 {
			t.Fatalf("liquidation %d: adl cut %d of a shortfall %d, closed %d contracts past its %d", cur.seq, cur.cut, cur.shortfall, cur.closed-cur.left, cur.closed)
		}
		// Whatever ranked candidates were passed over had nothing left to
		// give: the cut stops short only when contracts or profit ran out.
		if cur.cut < cur.shortfall && cur.left > 0 {
			for _, id := range cur.ranked[cur.next:] {
				if q := pos[id]; q.Contracts > 0 && q.Side == cur.side {
					if pnl, _ := trade.PnLMsat(&p, q.Side, min(q.Contracts, cur.left), q.EntryQ8, cur.midQ8); pnl > 0 {
						t.Fatalf("liquidation %d: shortfall %d, cut %d, but %s still had %d of profit", cur.seq, cur.shortfall, cur.cut, id, pnl)
					}
				}
			}
		}
		au.adlCut += cur.cut
		cur = nil
	}
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case trade.FundingFlowView:
			// A funding payment moves the margin by what was paid and
			// charges what the margin could not pay to the entry.
			finish()
			if d.MarketID != mkt {
				continue
			}
			before, ok := pos[ev.Account]
			if !ok || boundary == 0 || int64(d.BoundaryTsMs) != boundary {
				t.Fatalf("funding flow %+v of %s: no such position or boundary (had %+v, boundary %d)", d, ev.Account, before, boundary)
			}
			paid, flow := int64(d.PaidMsat), int64(d.FlowMsat)
			after := before
			after.MarginMsat += paid
			if paid != flow {
				after.EntryQ8 = trade.EntryCharged(&p, before.Side, before.Contracts, before.EntryQ8, paid-flow)
			}
			if after.MarginMsat < 0 || (paid != flow && (flow > 0 || after.MarginMsat != 0)) {
				t.Fatalf("funding flow %+v of %+v does not add up", d, before)
			}
			pos[ev.Account] = after
			houseDelta -= paid
			au.fundingFlows++
		case trade.LiquidationView:
			finish()
			if d.MarketID != mkt {
				continue
			}
			au.liquidations++
			before, ok := pos[d.AccountID]
			if !ok || before.Side.PositionName() != d.Side {
				t.Fatalf("liquidation %+v of no such position (had %+v)", d, before)
			}
			closed, pnl, pen, def, cov := int64(d.ClosedContracts), int64(d.RealizedPnlMsat), int64(d.PenaltyMsat), int64(d.DeficitMsat), int64(d.InsuranceCoveredMsat)
			want, err := trade.PnLMsat(&p, before.Side, closed, before.EntryQ8, int64(d.ExecPriceQ8))
			if err != nil || want != pnl {
				t.Fatalf("liquidation %+v: realized %d, the close books %d", d, pnl, want)
			}
			if closed+int64(d.RemainingContracts) != before.Contracts || pen < 0 || def < 0 || cov < 0 || cov > def || int64(d.FundingSettledMsat) != 0 {
				t.Fatalf("liquidation %+v of %+v: figures out of range", d, before)
			}
			if d.Partial {
				if d.RemainderMsat != nil || def != 0 || cov != 0 || d.ADLTriggered ||
					before.MarginMsat+pnl-pen != int64(d.RemainingMarginMsat) || d.RemainingMarginMsat <= 0 || int64(d.RemainingContracts) < p.MinOrderContracts {
					t.Fatalf("partial liquidation %+v of %+v does not add up", d, before)
				}
				fund += pen
				after := before
				after.Contracts, after.MarginMsat = int64(d.RemainingContracts), int64(d.RemainingMarginMsat)
				pos[d.AccountID] = after
			} else {
				rem := int64(0)
				if d.RemainderMsat != nil {
					rem = int64(*d.RemainderMsat)
				} else {
					t.Fatalf("full liquidation %+v without remainderMsat", d)
				}
				if d.RemainingContracts != 0 || d.RemainingMarginMsat != 0 || rem < 0 ||
					before.MarginMsat+pnl+def != pen+rem || (def > 0 && (pen != 0 || rem != 0)) {
					t.Fatalf("full liquidation %+v of %+v does not add up", d, before)
				}
				fund += pen
				if cov != min(def, fund) {
					t.Fatalf("liquidation %+v: the fund held %d, covered %d of %d", d, fund, cov, def)
				}
				fund -= cov
				if d.ADLTriggered != (cov < def) {
					t.Fatalf("liquidation %+v: adlTriggered %v with cover %d of %d", d, d.ADLTriggered, cov, def)
				}
				delete(pos, d.AccountID)
				if d.ADLTriggered {
					cur = &open{seq: int64(d.Seq), shortfall: def - cov, closed: closed, left: closed, side: -before.Side, midQ8: int64(d.Oracle.MidQ8)}
					cur.ranked = adlRanking(&p, pos, cur.side, cur.midQ8)
					au.shortfalls += def - cov
				}
			}
			if fund < 0 {
				t.Fatalf("insurance fund %d after %+v", fund, d)
			}
			houseDelta += -pnl - def + cov
			au.penalties += pen
			au.deficits += def
			au.covered += cov
		case trade.FillEvent:
			f := d.Fill
			if f.MarketID != mkt {
				continue
			}
			before := pos[f.AccountID]
			if !strings.HasPrefix(f.OrderID, trade.ADLOrderPrefix) {
				finish()
				houseDelta += -f.RealizedPnlMsat - f.DeficitMsat
				if f.After.Contracts == 0 {
					delete(pos, f.AccountID)
				} else {
					pos[f.AccountID] = f.After
				}
				continue
			}
			au.adlFills++
			if cur == nil || f.OrderID != trade.ADLOrderPrefix+strconv.FormatInt(cur.seq, 10) {
				t.Fatalf("adl fill %+v outside its liquidation", *f)
			}
			// The next ranked candidate with profit in the slice it gives.
			for cur.next < len(cur.ranked) && cur.ranked[cur.next] != f.AccountID {
				id := cur.ranked[cur.next]
				if q := pos[id]; q.Contracts > 0 {
					if pnl, _ := trade.PnLMsat(&p, q.Side, min(q.Contracts, cur.left), q.EntryQ8, cur.midQ8); pnl > 0 {
						t.Fatalf("adl of %s skipped %s, ranked before it with %d of profit (ranking %v)", f.AccountID, id, pnl, cur.ranked)
					}
				}
				cur.next++
			}
			if cur.next == len(cur.ranked) {
				t.Fatalf("adl of %s, not a ranked candidate %v", f.AccountID, cur.ranked)
			}
			cur.next++
			if before.Side != cur.side || f.Side != -before.Side || f.ExecQ8 != cur.midQ8 || f.FeeMsat != 0 || f.Opened != 0 {
				t.Fatalf("adl fill %+v of %+v", *f, before)
			}
			profit, _ := trade.PnLMsat(&p, before.Side, f.Closed, before.EntryQ8, cur.midQ8)
			cut := profit - f.RealizedPnlMsat
			if profit <= 0 || cut <= 0 || cut > profit || f.RealizedPnlMsat < 0 {
				t.Fatalf("adl fill %+v: profit %d, cut %d", *f, profit, cut)
			}
			released := before.MarginMsat
			if f.Closed < before.Contracts {
				released = before.MarginMsat * f.Closed / before.Contracts
			}
			if f.ReleasedMarginMsat != released || f.After.Contracts != before.Contracts-f.Closed ||
				(f.After.Contracts > 0 && f.After.MarginMsat != before.MarginMsat-released) {
				t.Fatalf("adl fill %+v of %+v: released %d", *f, before, released)
			}
			cur.cut += cut
			cur.left -= f.Closed
			houseDelta -= f.RealizedPnlMsat
			if f.After.Contracts == 0 {
				delete(pos, f.AccountID)
			} else {
				pos[f.AccountID] = f.After
			}
		}
	}
	finish()
	if got := w.balance(ledger.Insurance); got != fund {
		t.Fatalf("insurance %d, the records say %d", got, fund)
	}
	// The house took each liquidation's loss (less its deficit) and the
	// fund's cover, and paid each ADL fill's cut profit: nothing else.
	if got := w.balance(ledger.House) - house; got != houseDelta {
		t.Fatalf("house moved %d, the records say %d", got, houseDelta)
	}
	for id, q := range w.marketPositions(mkt) {
		if pos[id] != q {
			t.Fatalf("%s: position %+v, the records make it %+v", id, q, pos[id])
		}
	}
	for id := range pos {
		if _, ok := w.marketPositions(mkt)[id]; !ok {
			t.Fatalf("%s: the records leave %+v open, the book has none", id, pos[id])
		}
	}
	return au
}

// adlRanking is the documented order of the positions on side with
// profit at mid: unrealised PnL per msat of margin, highest first, ties by
// account id. Venue accounts are never picked.
func adlRanking(p *market.Params, pos map[string]trade.Position, side trade.Side, midQ8 int64) []string {
	type c struct {
		id    string
		score *mbig.Rat
	}
	var cs []c
	for id, q := range pos {
		if q.Side != side || strings.HasPrefix(id, "venue") {
			continue
		}
		pnl, _ := trade.PnLMsat(p, side, q.Contracts, q.EntryQ8, midQ8)
		if pnl <= 0 {
			continue
		}
		cs = append(cs, c{id, mbig.NewRat(pnl, max(q.MarginMsat, 1))})
	}
	sort.Slice(cs, func(i, j int) bool {
		if k := cs[i].score.Cmp(cs[j].score); k != 0 {
			return k > 0
		}
		return cs[i].id < cs[j].id
	})
	out := make([]string, len(cs))
	for i, x := range cs {
		out[i] = x.id
	}
	return out
}

// TestGapPastBankruptcyAccountsForEveryMsat: forty longs from 2x to 100x,
// a fund seeded by one partial liquidation, then a 12% gap down in one
// print. Every long past its level is liquidated in that entry, in the
// order the price met their levels (highest first, ties by account id),
// the fund is drawn in that order and never below zero, and each
// shortfall is taken from the shorts in the documented ranking.
func TestGapPastBankruptcyAccountsForEveryMsat(t *testing.T) {
	w := newTradeWorld(t)
	for i := 0; i < 40; i++ {
		a, k := w.account(btcBTC / 10)
		created(t, w.order(a, k, levered(mktOrder("l", "BTC-PERP", "buy", int64(2_000+137*i)), int64(2+(i*7)%99))), trade.StatusFilled)
	}
	for i := 0; i < 8; i++ {
		a, k := w.account(btcBTC)
		created(t, w.order(a, k, levered(mktOrder("s", "BTC-PERP", "sell", int64(3_000+500*i)), int64(1+i*3))), trade.StatusFilled)
	}
	// Seed the fund: a 50x long liquidated in part a little lower.
	seed, sk := w.account(btcBTC)
	created(t, w.order(seed, sk, levered(mktOrder("l", "BTC-PERP", "buy", 200_000), 50)), trade.StatusFilled)
	p := w.marketParams("BTC-PERP")
	level, _, _ := trade.LiqLevel(&p, w.position(seed, "BTC-PERP"))
	au := w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", level) })
	if au.penalties == 0 || w.balance(ledger.Insurance) == 0 {
		t.Fatalf("the seed liquidation funded nothing: %+v", au)
	}
	au = w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(88_000)) })
	if au.liquidations < 20 || au.deficits == 0 || au.shortfalls == 0 || au.adlFills == 0 {
		t.Fatalf("a 12%% gap: %+v", au)
	}
	if au.deficits != au.covered+au.shortfalls || au.adlCut > au.shortfalls {
		t.Fatalf("deficits %d = covered %d + shortfalls %d; adl took %d", au.deficits, au.covered, au.shortfalls, au.adlCut)
	}
}

// bankruptLong opens a 100x long of n contracts for a fresh account: a 3%
// gap down takes it far past bankruptcy.
func (w *tradeWorld) bankruptLong(n int64) string {
	w.t.Helper()
	a, k := w.account(btcBTC)
	created(w.t.(*testing.T), w.order(a, k, mktOrder("bl", "BTC-PERP", "buy", n)), trade.StatusFilled)
	return a
}

// TestADLOfAWinnerWithLegsAndRestingOrders: the only profitable short has
// a bracket whose take-profit covers half of it, a resting reduce-only
// buy limit and a resting opening sell limit. A first shortfall
// deleverages it in part: its legs stay armed and its reservations are
// untouched; the take-profit then executes for what it covers of the rest.
// A second shortfall closes what is left: the armed legs go
// (position_closed), the limit orders keep their reservations, and the
// ledger balances after each entry (the machine's check).
func TestADLOfAWinnerWithLegsAndRestingOrders(t *testing.T) {
	w := newTradeWorld(t)
	s, sk := w.account(btcBTC)
	br := bracket("br", "sell", 10_000, 0, usdQ8(110_000), usdQ8(90_000))
	br.Bracket.TakeProfitContracts = 5_000
	br.Leverage = 10
	created(t, w.order(s, sk, br), trade.StatusFilled)
	created(t, w.order(s, sk, func() trade.PlaceRequest {
		r := limitOrder("ro", "BTC-PERP", "buy", 2_000, usdQ8(80_000))
		r.ReduceOnly = true
		return r
	}()), trade.StatusResting)
	created(t, w.order(s, sk, limitOrder("open", "BTC-PERP", "sell", 3_000, usdQ8(120_000))), trade.StatusResting)
	reserved := w.balance(ledger.Reserved(s))
	l1 := w.bankruptLong(6_000)
	au := w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(97_000)) })
	if au.adlFills != 1 || w.position(s, "BTC-PERP").Contracts != 4_000 {
		t.Fatalf("first gap: %+v, short %+v", au, w.position(s, "BTC-PERP"))
	}
	if len(w.liquidations(l1).Liquidations) != 1 {
		t.Fatal("the long was not liquidated")
	}
	if got := w.balance(ledger.Reserved(s)); got != reserved {
		t.Fatalf("reserved %d, was %d", got, reserved)
	}
	legs := w.triggersPage(s, "armed").Triggers
	if len(legs) != 2 {
		t.Fatalf("armed legs after a partial ADL: %+v", legs)
	}
	// Back up to 97,000 after a second bankrupt long is gone: it takes the rest.
	w.bankruptLong(10_000)
	au = w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(94_000)) })
	if p := w.position(s, "BTC-PERP"); p.Contracts != 0 {
		t.Fatalf("second gap: %+v, short %+v", au, p)
	}
	if n := len(w.triggersPage(s, "armed").Triggers); n != 0 {
		t.Fatalf("%d legs armed on a closed position", n)
	}
	if got := w.balance(ledger.Reserved(s)); got != reserved {
		t.Fatalf("reserved %d, was %d", got, reserved)
	}
}

// TestHedgeIsNeverDeleveraged: the USDx hedge is the most profitable
// short when a gap leaves a shortfall; auto-deleveraging passes it over
// for the organic short ranked after it, supply stays equal to the hedge's
// contracts, and what the organic short cannot cover stays with the house.
func TestHedgeIsNeverDeleveraged(t *testing.T) {
	w := newUSDxWorld(t)
	a, k := w.account(10 * btcBTC)
	w.mintN(a, k, 50_000)
	s, sk := w.account(btcBTC)
	created(t, w.order(s, sk, levered(mktOrder("s", "BTC-PERP", "sell", 1_000), 2)), trade.StatusFilled)
	w.bankruptLong(20_000)
	before := w.st()
	au := w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(96_000)) })
	after := w.st()
	if au.shortfalls == 0 || au.adlFills != 1 || w.position(s, "BTC-PERP").Contracts != 0 {
		t.Fatalf("%+v, organic short %+v", au, w.position(s, "BTC-PERP"))
	}
	if after.hedge != before.hedge || after.u.Supply != before.u.Supply || after.hedge != after.u.Supply {
		t.Fatalf("hedge %d -> %d, supply %d -> %d", before.hedge, after.hedge, before.u.Supply, after.u.Supply)
	}
}

// TestLiquidationByMarketStatusAndPrintAge: a reduce_only market still
// liquidates (a close is reducing) with its deficit and ADL; a halted
// market or a stale print liquidates nothing, and the first fresh print of
// a live market does, once.
func TestLiquidationByMarketStatusAndPrintAge(t *testing.T) {
	w := newTradeWorld(t)
	s, sk := w.account(btcBTC)
	created(t, w.order(s, sk, levered(mktOrder("s", "BTC-PERP", "sell", 50_000), 5)), trade.StatusFilled)
	ro, halted, live := market.StatusReduceOnly, market.StatusHalted, market.StatusLive
	l1 := w.bankruptLong(10_000)
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &ro})
	au := w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(97_000)) })
	if au.liquidations != 1 || au.shortfalls == 0 || au.adlFills != 1 || len(w.liquidations(l1).Liquidations) != 1 {
		t.Fatalf("reduce_only: %+v", au)
	}
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
	l2 := w.bankruptLong(10_000)
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
	au = w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(94_000)) })
	if au.liquidations != 0 {
		t.Fatalf("halted: %+v", au)
	}
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
	if n := len(w.liquidations(l2).Liquidations); n != 1 {
		t.Fatalf("resuming liquidated %d times", n)
	}
	l3 := w.bankruptLong(10_000)
	au = w.auditEntry("BTC-PERP", func() *Result { return w.stalePrint("BTCUSD", usdQ8(90_000), 20_000) })
	if au.liquidations != 0 || len(w.liquidations(l3).Liquidations) != 0 {
		t.Fatalf("stale: %+v", au)
	}
	au = w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(90_000)) })
	if au.liquidations != 1 || len(w.liquidations(l3).Liquidations) != 1 {
		t.Fatalf("fresh after stale: %+v", au)
	}
}

// TestGapWithManyShortfallsRanksOnce: a print 3% down takes k 100x longs
// past bankruptcy with an empty fund among n accounts (40% of them
// profitable 5x shorts), so each of the k liquidations auto-deleverages.
// The ranking is built once for the print and only the positions each
// liquidation touched are ranked again: the entry's allocations stay
// within a few hundred per liquidation plus a few per account. Before,
// every shortfall scanned every account and sorted every profitable short
// with math/big (k x n log n): 20,000 accounts and 200 such longs took
// 28 s of apply on one print on the shared test machine, every replica
// stalled alike; here that was 3,100,000 allocations for n = 3,000 and
// k = 100, now under 5,000, and the state hash after the print is the
// same.
func TestGapWithManyShortfallsRanksOnce(t *testing.T) {
	const n, k = 3_000, 100
	w := newBenchWorld(t, n+k, btcBTC)
	var entries [][]byte
	for i := 0; i < n; i++ {
		side := "buy"
		if i%5 >= 3 {
			side = "sell"
		}
		entries = append(entries, w.orderCmd(i, levered(mktOrder("p", "BTC-PERP", side, 1_000), 5)))
	}
	for i := n; i < n+k; i++ {
		entries = append(entries, w.orderCmd(i, mktOrder("p", "BTC-PERP", "buy", 1_000)))
	}
	w.runEntries(entries, 256)
	entry := w.printCmd("BTCUSD", benchBTCMidQ8*97/100)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, evs := w.applyRaw(entry)
	runtime.ReadMemStats(&after)
	w.mustOK(res)
	liqs, adl := 0, 0
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case trade.LiquidationView:
			if !d.ADLTriggered {
				t.Fatalf("liquidation without a shortfall: %+v", d)
			}
			liqs++
		case trade.FillEvent:
			if strings.HasPrefix(d.Fill.OrderID, trade.ADLOrderPrefix) {
				adl++
			}
		}
	}
	if liqs != k || adl < k {
		t.Fatalf("%d liquidations, %d adl fills", liqs, adl)
	}
	if allocs, bound := after.Mallocs-before.Mallocs, uint64(50*k+5*n); allocs > bound {
		t.Fatalf("the print allocated %d times, bound %d", allocs, bound)
	}
}

// TestManyShortfallsDeleverageInRankOrder: thirty 100x longs past
// bankruptcy with an empty fund, against twelve shorts of which several
// tie (same leverage, size and entry: ranked by account id) and most are
// larger than one liquidation, so each is deleveraged in part, ranked
// again, and taken again by the next shortfall. Every ADL fill follows the
// ranking a fresh scan of every position gives at that moment
// (auditEntry), so ranking once per sweep changes no result.
func TestManyShortfallsDeleverageInRankOrder(t *testing.T) {
	w := newTradeWorld(t)
	for i := 0; i < 12; i++ {
		a, k := w.account(btcBTC)
		lev, n := int64(1+(i%4)*5), int64(4_000+1_000*(i%3))
		created(t, w.order(a, k, levered(mktOrder("s", "BTC-PERP", "sell", n), lev)), trade.StatusFilled)
	}
	for i := 0; i < 30; i++ {
		w.bankruptLong(int64(500 + 97*i))
	}
	au := w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(96_000)) })
	if au.liquidations != 30 || au.adlFills < 30 || au.covered != 0 || au.adlCut != au.shortfalls {
		t.Fatalf("%+v", au)
	}
}

// TestCancelAllAfterInTheLiquidatingEntry: a dead-man switch falls due in
// the very entry whose print liquidates the account. The switch fires
// first (timers run before the entry's command): its orders are cancelled
// as cancel_all_after with their reservations back in free, the
// liquidation then finds nothing left to cancel, and its record adds up.
// The fund is exactly zero, so the whole deficit deleverages the short.
func TestCancelAllAfterInTheLiquidatingEntry(t *testing.T) {
	w := newTradeWorld(t)
	s, sk := w.account(btcBTC)
	created(t, w.order(s, sk, levered(mktOrder("s", "BTC-PERP", "sell", 50_000), 5)), trade.StatusFilled)
	a, k := w.account(btcBTC)
	created(t, w.order(a, k, mktOrder("l", "BTC-PERP", "buy", 10_000)), trade.StatusFilled)
	created(t, w.order(a, k, limitOrder("lim", "BTC-PERP", "buy", 1_000, usdQ8(90_000))), trade.StatusResting)
	created(t, w.order(a, k, stopOrder("st", "BTC-PERP", "sell", 10_000, usdQ8(99_000))), trade.StatusWorking)
	free, reserved := w.balance(ledger.Free(a)), w.balance(ledger.Reserved(a))
	w.cancelAfter(a, k, "caa", trade.CancelAfterMinMs)
	if w.balance(ledger.Insurance) != 0 {
		t.Fatal("the fund is not empty")
	}
	w.ts += trade.CancelAfterMinMs
	au := w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", usdQ8(97_000)) })
	if au.liquidations != 1 || au.covered != 0 || au.adlCut != au.shortfalls || au.shortfalls == 0 {
		t.Fatalf("%+v", au)
	}
	if o := w.orderOf(a, "lim"); o.Status != trade.StatusCanceled || o.Reason != trade.ReasonCancelAllAfter {
		t.Fatalf("limit %+v", o)
	}
	w.wantTrigger(a, "st", trade.TrigCancelled, trade.ReasonCancelAllAfter)
	// Bankrupt: no remainder; free gained exactly the reservation back.
	l := w.liquidations(a).Liquidations[0]
	if reserved == 0 || l.DeficitMsat == 0 || *l.RemainderMsat != 0 || w.balance(ledger.Reserved(a)) != 0 || w.balance(ledger.Free(a)) != free+reserved {
		t.Fatalf("liquidation %+v; free %d (was %d, reserved %d)", l, w.balance(ledger.Free(a)), free, reserved)
	}
}

// TestLiquidationOfAPositionToppedUpByFunding: a 50x short receives
// funding for two boundaries (the longs are heavier), so its margin is
// above what it opened with and its level moves up; the print at its new
// level liquidates it in part, on the topped-up margin, and the record
// adds up (auditEntry).
func TestLiquidationOfAPositionToppedUpByFunding(t *testing.T) {
	w := newTradeWorld(t)
	l, lk := w.account(10 * btcBTC)
	created(t, w.order(l, lk, levered(mktOrder("l", "BTC-PERP", "buy", 500_000), 5)), trade.StatusFilled)
	s, sk := w.account(btcBTC)
	created(t, w.order(s, sk, levered(mktOrder("s", "BTC-PERP", "sell", 100_000), 50)), trade.StatusFilled)
	opened := w.position(s, "BTC-PERP")
	p := w.marketParams("BTC-PERP")
	level0, _, _ := trade.LiqLevel(&p, opened)
	boundary := (mktLaunchMs/market.FundingIntervalMs + 2) * market.FundingIntervalMs
	w.walkTo(boundary + 1000)
	topped := w.position(s, "BTC-PERP")
	level, _, _ := trade.LiqLevel(&p, topped)
	if len(w.fundingFlows(s).Funding) != 2 || topped.MarginMsat <= opened.MarginMsat || level <= level0 {
		t.Fatalf("opened %+v (level %d), after funding %+v (level %d)", opened, level0, topped, level)
	}
	au := w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", level-p.TickSizeQ8) })
	if au.liquidations != 0 {
		t.Fatalf("liquidated under its topped-up level: %+v", au)
	}
	au = w.auditEntry("BTC-PERP", func() *Result { return w.print("BTCUSD", level) })
	lq := w.liquidations(s).Liquidations
	if au.liquidations != 1 || len(lq) != 1 || !lq[0].Partial {
		t.Fatalf("%+v %+v", au, lq)
	}
}
