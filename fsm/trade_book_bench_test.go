package fsm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
)

// The heavy trading state of the print and snapshot benchmarks: 10,000
// funded accounts, each with a 1,000-contract BTC-PERP position (half long,
// half short), 5 resting BTC-PERP limit orders and 5 reduce-only triggers
// protecting the position (stops and take-profits), all 1-10% from the mid
// (100,000 entries in one market's index, 10 per account, well inside
// trade.RestingOrdersPerAccountMax). It is built once per process through
// the machine and kept as a snapshot; each benchmark restores a copy.
const (
	bookAccounts         = 10_000
	bookOrdersPerAccount = 10 // half limit orders, half triggers
	bookContracts        = 1_000
)

var bookFixture struct {
	once sync.Once
	snap []byte
	ts   int64
	mid  map[string]int64
}

// protectingTrigger is a reduce-only BTC-PERP stop (stop true) or
// take-profit 1-10% from the mid, protecting a long (long true) or a short.
func protectingTrigger(rng *rand.Rand, id string, long, stop bool, contracts, midQ8, tickQ8 int64) trade.PlaceRequest {
	off := midQ8/100 + rng.Int64N(midQ8*9/100)
	side, typ, level := "sell", trade.TypeStopMarket, midQ8-off
	switch {
	case long && !stop:
		typ, level = trade.TypeTakeProfitMarket, midQ8+off
	case !long && stop:
		side, level = "buy", midQ8+off
	case !long && !stop:
		side, typ = "buy", trade.TypeTakeProfitMarket
	}
	return trade.PlaceRequest{OrderID: id, MarketID: "BTC-PERP", Side: side, Type: typ, Contracts: contracts,
		ReduceOnly: true, TriggerPriceQ8: level / tickQ8 * tickQ8}
}

func tradeBookWorld(b *testing.B) *benchWorld {
	b.Helper()
	f := &bookFixture
	f.once.Do(func() {
		w := newBenchWorld(b, bookAccounts, btcBTC)
		rng := rand.New(rand.NewPCG(3, 4))
		var entries [][]byte
		for i := range bookAccounts {
			side := "buy"
			if i%2 == 1 {
				side = "sell"
			}
			entries = append(entries, w.orderCmd(i, mktOrder(fmt.Sprintf("p%d", i), "BTC-PERP", side, bookContracts)))
		}
		for j := range bookOrdersPerAccount {
			for i := range bookAccounts {
				r := restingLimit(rng, fmt.Sprintf("r%d-%d", i, j), "BTC-PERP", j%2 == 0, bookContracts, benchBTCMidQ8, benchTickBTC)
				if j >= bookOrdersPerAccount/2 {
					r = protectingTrigger(rng, fmt.Sprintf("t%d-%d", i, j), i%2 == 0, j%2 == 0, bookContracts, benchBTCMidQ8, benchTickBTC)
				}
				entries = append(entries, w.orderCmd(i, r))
			}
		}
		w.runEntries(entries, 256)
		var resting, positions int
		w.m.Read(func(st *State, _ uint64) {
			resting = st.Trade.Books["BTC-PERP"].Index.Len()
			for _, a := range st.Trade.Accounts {
				positions += len(a.Positions)
			}
		})
		if resting != bookAccounts*bookOrdersPerAccount || positions != bookAccounts {
			b.Fatalf("fixture: %d resting orders, %d positions", resting, positions)
		}
		snap, err := w.m.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		f.snap, f.ts, f.mid = snap, w.ts, w.mid
	})
	if f.snap == nil {
		b.Fatal("trading fixture was not built")
	}
	w := &benchWorld{tb: b, m: NewMachine(Options{}), ts: f.ts, mid: maps.Clone(f.mid)}
	if err := w.m.Restore(f.snap); err != nil {
		b.Fatal(err)
	}
	w.idx = w.m.Applied()
	// A restored index builds its trees on first use: pay that here, not
	// in the first timed print.
	w.print("BTCUSD", benchBTCMidQ8)
	return w
}

// BenchmarkPrintWith100kRestingOrders measures one BTCUSD oracle print
// applied through the machine (decode, market bars, price and stats
// events, and the trading book's index lookup) with the fixture's 100,000
// resting limit orders and triggers, none of which the print crosses, plus
// crosses=k orders it does cross and fill (fill records, ledger, position,
// open interest, events): limit orders, or entry triggers that execute as
// market orders. Between timed prints, untimed, k orders are placed 0.5%
// from the mid and the price returns; the timed print moves 0.6%, down
// over k buys and up over k sells in turn, so the crossing accounts'
// positions open and close. ns/fill is the whole print's time divided by
// its fills; subtract crosses=0 for the marginal cost.
func BenchmarkPrintWith100kRestingOrders(b *testing.B) {
	for _, by := range []string{"limits", "triggers"} {
		for _, k := range []int{0, 1, 10, 100} {
			if by == "triggers" && k == 0 {
				continue // the same as limits/crosses=0
			}
			b.Run(fmt.Sprintf("%s/crosses=%d", by, k), func(b *testing.B) { benchPrintCrossing(b, by == "triggers", k) })
		}
	}
}

func benchPrintCrossing(b *testing.B, triggers bool, k int) {
	w := tradeBookWorld(b)
	base := benchBTCMidQ8
	fills := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		buy := i%2 == 0
		limit, target := base*995/1000, base*994/1000
		side := "buy"
		if !buy {
			limit, target, side = base*1005/1000, base*1006/1000, "sell"
		}
		for j := range k {
			id, level := fmt.Sprintf("x%d-%d", i, j), limit/benchTickBTC*benchTickBTC
			r := limitOrder(id, "BTC-PERP", side, bookContracts, level)
			if triggers {
				r = entryOrder(id, "BTC-PERP", side, bookContracts, level)
			}
			r0, _ := w.applyRaw(w.orderCmd(j, r))
			w.mustOK(r0)
		}
		entry := w.printCmd("BTCUSD", target)
		b.StartTimer()
		r, evs := w.applyRaw(entry)
		b.StopTimer()
		w.mustOK(r)
		for _, ev := range evs {
			if ev.Kind == "fill" {
				fills++
			}
		}
		w.print("BTCUSD", base)
	}
	if fills != k*b.N {
		b.Fatalf("%d fills in %d prints, want %d per print", fills, b.N, k)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "prints/s")
	if k > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fills), "ns/fill")
	}
}

// BenchmarkSnapshotTrade100kOrders10kPositions measures encoding (and,
// separately, restoring) the fixture's whole state: what raft's snapshot
// and the state hash pay for trading's weight. It reports the snapshot's
// size and the share of it that is the trading book and the idempotency
// store (which holds the 110,000 placements' answers: they are within 24
// hours).
func BenchmarkSnapshotTrade100kOrders10kPositions(b *testing.B) {
	b.Run("encode", func(b *testing.B) {
		w := tradeBookWorld(b)
		var tradeBytes, idemBytes int
		w.m.Read(func(st *State, _ uint64) {
			tb, err := Marshal(st.Trade)
			if err != nil {
				b.Fatal(err)
			}
			ib, err := Marshal(st.Idem)
			if err != nil {
				b.Fatal(err)
			}
			tradeBytes, idemBytes = len(tb), len(ib)
		})
		var size int
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s, err := w.m.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			size = len(s)
		}
		b.StopTimer()
		b.ReportMetric(float64(size), "bytes/snapshot")
		b.ReportMetric(float64(tradeBytes), "trade-bytes")
		b.ReportMetric(float64(idemBytes), "idem-bytes")
	})
	b.Run("restore", func(b *testing.B) {
		w := tradeBookWorld(b)
		snap, err := w.m.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := NewMachine(Options{}).Restore(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
}
