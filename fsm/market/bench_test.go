package market

import (
	"strconv"
	"testing"
)

// BenchmarkPrintWith100kTriggers measures one oracle print plus the price
// index lookup the trading engine will run on it, with 100,000 resting
// levels within +-10% of the price (about five per dollar, half on each
// side). The price moves about 10 dollars a print, BTC's one-second
// volatility, so each print crosses a handful of levels.
func BenchmarkPrintWith100kTriggers(b *testing.B) {
	s := newTestState(b)
	x := NewPriceIndex()
	g := &splitmix64{state: 1}
	const n = 100_000
	span := btcQ8 / 10
	for i := range n {
		off := int64(g.next()%uint64(span)) + 1
		id := "t" + strconv.Itoa(i)
		var err error
		if i%2 == 0 {
			err = x.Insert(id, btcQ8+off, Rising)
		} else {
			err = x.Insert(id, btcQ8-off, Falling)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	mid := btcQ8
	ts := launchMs
	crossed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts += 1_000
		step := int64(g.next()%2_001) - 1_000 // -10..+10 dollars in cents
		// A slight pull back to the centre keeps the walk among the levels
		// however long the benchmark runs.
		next := mid + step*1_000_000 - (mid-btcQ8)/512
		if err := s.ApplyPrint(ts, "BTCUSD", next, 300_000, ts); err != nil {
			b.Fatal(err)
		}
		crossed += len(x.Crossed(mid, next))
		mid = next
	}
	b.StopTimer()
	// No float metric: this package's tests stay integer-only too.
	if b.N >= 1_000 {
		if crossed == 0 {
			b.Fatal("no print crossed any level: the benchmark measures nothing")
		}
		b.Logf("%d prints, %d levels crossed (%d per 100 prints)", b.N, crossed, crossed*100/b.N)
	}
}

// BenchmarkPriceIndexInsertRemove measures the engine's bookkeeping when a
// trigger is placed and later cancelled in an index of 100,000 levels.
func BenchmarkPriceIndexInsertRemove(b *testing.B) {
	x := NewPriceIndex()
	for i := range 100_000 {
		if err := x.Insert("t"+strconv.Itoa(i), int64(i+1)*Q8, Rising); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := x.Insert("new", int64(i%100_000+1)*Q8+1, Falling); err != nil {
			b.Fatal(err)
		}
		x.Remove("new")
	}
}
