package fsm

import (
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// Risk benchmarks (issue 11 point 6; docs/bench-trade.md has figures): a
// print that liquidates, and the entry that passes a funding boundary,
// with 100,000 open BTC-PERP positions. Same style as the trading
// benchmarks: encoded entries through Machine.Apply, no invariant checks,
// setup outside the timer.
//
// The fixture: 100,000 funded accounts, each with one 1,000-contract
// BTC-PERP position at 5x opened at the mid, 60% long and 40% short (so
// the skew, and the funding rate, are not zero: 20,000 q9 an hour). At 5x
// a long is due near 84% of its entry and a short near 119%, so the
// prints below reach none of them. It is built once per process through
// the machine (300,000 entries) and kept as a snapshot; each benchmark
// restores a copy.
const (
	riskAccounts  = 100_000
	riskContracts = 1_000
	riskLowLev    = 5   // the fixture's positions
	riskHighLev   = 100 // the positions a print liquidates
	// riskLiqMidQ8 is the liquidating print: 0.6% under the mid. A 100x
	// long opened at the mid is due 0.5% under its entry; at 0.6% its
	// equity is still positive, so it is partially liquidated with no
	// deficit (and no auto-deleveraging).
	riskLiqMidQ8 = benchBTCMidQ8 * 994 / 1000
)

// riskLong says whether fixture account i holds a long (60% do).
func riskLong(i int) bool { return i%5 < 3 }

var riskFixture struct {
	once sync.Once
	snap []byte
	ts   int64
	mid  map[string]int64
}

func riskWorld(b *testing.B) *benchWorld {
	b.Helper()
	f := &riskFixture
	f.once.Do(func() {
		// newBenchWorld lifts genesis's SignupsPerHour, so 100,000
		// signups fit in one entry time.
		w := newBenchWorld(b, riskAccounts, btcBTC)
		entries := make([][]byte, riskAccounts)
		for i := range entries {
			side := "buy"
			if !riskLong(i) {
				side = "sell"
			}
			entries[i] = w.orderCmd(i, levered(mktOrder(fmt.Sprintf("p%d", i), "BTC-PERP", side, riskContracts), riskLowLev))
		}
		w.runEntries(entries, 256)
		var positions, indexed int
		var rate int64
		w.m.Read(func(st *State, _ uint64) {
			for _, a := range st.Trade.Accounts {
				positions += len(a.Positions)
			}
			indexed = st.Trade.Books["BTC-PERP"].Liq.Len()
			rate = st.Market.MarketsByID["BTC-PERP"].FundingRateHourlyQ9()
		})
		if positions != riskAccounts || indexed != riskAccounts || rate == 0 {
			b.Fatalf("fixture: %d positions, %d in the liquidation index, funding rate %d", positions, indexed, rate)
		}
		snap, err := w.m.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		f.snap, f.ts, f.mid = snap, w.ts, w.mid
	})
	if f.snap == nil {
		b.Fatal("risk fixture was not built")
	}
	w := &benchWorld{tb: b, m: NewMachine(Options{}), ts: f.ts, mid: maps.Clone(f.mid)}
	if err := w.m.Restore(f.snap); err != nil {
		b.Fatal(err)
	}
	w.idx = w.m.Applied()
	// Build the restored indexes' trees here, not in the first timed entry.
	w.print("BTCUSD", benchBTCMidQ8)
	return w
}

// order applies one order of fixture account i and fails unless it filled.
func (w *benchWorld) order(i int, r trade.PlaceRequest) {
	w.tb.Helper()
	res, _ := w.applyRaw(w.orderCmd(i, r))
	w.mustOK(res)
}

func (w *benchWorld) btcPosition(i int) (p trade.Position) {
	acct, _ := benchAcct(i)
	w.m.Read(func(st *State, _ uint64) { p = st.Trade.Position(acct, "BTC-PERP") })
	return p
}

// nextBoundary is the first funding boundary after log time.
func (w *benchWorld) nextBoundary() int64 {
	return (w.ts/market.FundingIntervalMs + 1) * market.FundingIntervalMs
}

// walkBefore moves log time to tsMs-1 with BTCUSD prints at the last mid,
// each under MaxClockStepMs after the one before, as the oracle driver and
// the leader's clock would: the mark stays fresh and no step is clamped.
func (w *benchWorld) walkBefore(tsMs int64) {
	for w.ts < tsMs-1 {
		w.ts = min(w.ts+MaxClockStepMs-1000, tsMs-1) - 1 // printCmd adds 1
		w.print("BTCUSD", w.mid["BTCUSD"])
	}
}

// tickAt is the leader's tick entry stamped tsMs.
func (w *benchWorld) tickAt(tsMs int64) []byte {
	w.ts = tsMs
	return w.encode(&Command{Type: CmdTick})
}

// BenchmarkPrintLiquidating measures one BTCUSD print 0.6% under the mid
// that liquidates k of the fixture's 100,000 positions (liquidations=k):
// the sweep of the liquidation index, and per liquidation the exact
// partial-close sizing, ledger legs, record, open interest, re-indexing
// and events. Before each timed print, untimed, k long accounts (taken in
// turn over the fixture's 60,000 longs, so none builds up a long order
// history) swap their 5x long for a 100x one opened at the mid; after it
// the price returns, and each closes what the liquidation left and opens
// its 5x long again, so every timed print sees 100,000 positions and
// liquidates exactly k. ns/liquidation is the whole print's time divided
// by its liquidations; liquidations=0 is the baseline to subtract.
//
// liquidations=100/closed=1000 liquidates the same 100 accounts every
// time, each keeping trade.ClosedOrdersKept closed orders (placed untimed
// before the run; the history is capped, so it stays at that size): an
// active trader's account, against the fresh ones above.
func BenchmarkPrintLiquidating(b *testing.B) {
	for _, k := range []int{0, 1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("liquidations=%d", k), func(b *testing.B) { benchPrintLiquidating(b, k, false) })
	}
	b.Run("liquidations=100/closed=1000", func(b *testing.B) { benchPrintLiquidating(b, 100, true) })
}

func benchPrintLiquidating(b *testing.B, k int, history bool) {
	w := riskWorld(b)
	base := benchBTCMidQ8
	next := 0 // next fixture account to try as a hot long
	hot := make([]int, 0, k)
	if history {
		for a := 0; len(hot) < k; a++ {
			if !riskLong(a) {
				continue
			}
			hot = append(hot, a)
			for h := 0; h < trade.ClosedOrdersKept; h += 2 {
				w.order(a, mktOrder(fmt.Sprintf("fb%d", h), "BTC-PERP", "buy", 10))
				w.order(a, mktOrder(fmt.Sprintf("fs%d", h), "BTC-PERP", "sell", 10))
			}
		}
	}
	liquidations := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if w.nextBoundary()-w.ts < 10 {
			// A long run nears a funding boundary: pass it untimed,
			// so no timed print pays 100,000 flows.
			w.walkBefore(w.nextBoundary())
			r, _ := w.applyRaw(w.tickAt(w.ts + 1))
			w.mustOK(r)
		}
		if !history {
			hot = hot[:0]
			for len(hot) < k {
				if a := next % riskAccounts; riskLong(a) {
					hot = append(hot, a)
				}
				next++
			}
		}
		for _, a := range hot {
			w.order(a, trade.PlaceRequest{OrderID: fmt.Sprintf("c%d", i), MarketID: "BTC-PERP", Side: "sell",
				Type: trade.TypeMarket, Contracts: riskContracts, ReduceOnly: true})
			w.order(a, levered(mktOrder(fmt.Sprintf("h%d", i), "BTC-PERP", "buy", riskContracts), riskHighLev))
		}
		entry := w.printCmd("BTCUSD", riskLiqMidQ8)
		b.StartTimer()
		r, evs := w.applyRaw(entry)
		b.StopTimer()
		w.mustOK(r)
		for _, ev := range evs {
			switch ev.Kind {
			case "liquidation":
				liquidations++
			case "fill":
				b.Fatalf("print %d: a fill (auto-deleveraging?) for %s", i, ev.Account)
			}
		}
		w.print("BTCUSD", base)
		for _, a := range hot {
			if rest := w.btcPosition(a).Contracts; rest > 0 {
				w.order(a, trade.PlaceRequest{OrderID: fmt.Sprintf("r%d", i), MarketID: "BTC-PERP", Side: "sell",
					Type: trade.TypeMarket, Contracts: rest, ReduceOnly: true})
			}
			w.order(a, levered(mktOrder(fmt.Sprintf("o%d", i), "BTC-PERP", "buy", riskContracts), riskLowLev))
		}
	}
	b.StopTimer()
	if liquidations != k*b.N {
		b.Fatalf("%d liquidations in %d prints, want %d per print", liquidations, b.N, k)
	}
	var positions int
	w.m.Read(func(st *State, _ uint64) { positions = st.Trade.Books["BTC-PERP"].Liq.Len() })
	if positions != riskAccounts {
		b.Fatalf("%d positions indexed after the run, want %d", positions, riskAccounts)
	}
	if k > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(liquidations), "ns/liquidation")
	}
}

// BenchmarkFundingBoundary100kPositions measures the entry (a leader's
// tick) whose time passes an hourly funding boundary with the fixture's
// 100,000 positions: every position pays or receives (the skew is 20%),
// so the entry makes 100,000 ledger transfers, flow records and
// funding_flow events, moves every position's liquidation level, and
// sweeps. Log time moves at most MaxClockStepMs an entry, so each
// iteration first walks, untimed, to 1 ms before the next boundary with
// fresh prints; the state is not restored between iterations (an hour's
// funding at 0.002% barely moves a 5x margin), so iteration n pays the
// n-th boundary.
func BenchmarkFundingBoundary100kPositions(b *testing.B) {
	w := riskWorld(b)
	flows := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		boundary := w.nextBoundary()
		w.walkBefore(boundary)
		entry := w.tickAt(boundary)
		b.StartTimer()
		r, evs := w.applyRaw(entry)
		b.StopTimer()
		w.mustOK(r)
		n, boundaries := 0, 0
		for _, ev := range evs {
			switch ev.Kind {
			case "funding_flow":
				n++
			case "funding":
				boundaries++
			case "liquidation":
				b.Fatalf("boundary %d liquidated %s", i, ev.Account)
			}
		}
		if n != riskAccounts || boundaries != 2 {
			b.Fatalf("boundary %d: %d funding flows, %d market boundaries; want %d and 2", i, n, boundaries, riskAccounts)
		}
		flows += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(flows), "ns/position")
}
