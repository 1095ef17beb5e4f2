package growth

import (
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// indexStepAsBefore and drawdownQ9AsBefore are the fold's arithmetic as it
// was, all in math/big: the reference the 128-bit paths must equal.
func indexStepAsBefore(index int64, d Day) int64 {
	open := max(d.OpenEquityMsat, 1)
	end := open + d.PnlMsat
	if end <= 0 || index == 0 {
		return 0
	}
	var x big.Int
	x.Mul(big.NewInt(index), big.NewInt(end))
	x.Quo(&x, big.NewInt(open))
	if !x.IsInt64() || x.Int64() > IndexMaxQ9 {
		return IndexMaxQ9
	}
	return x.Int64()
}

func drawdownQ9AsBefore(peak, index int64) int64 {
	if peak <= 0 || index >= peak {
		return 0
	}
	var x, m big.Int
	x.Mul(big.NewInt(peak-index), big.NewInt(Q9))
	x.QuoRem(&x, big.NewInt(peak), &m)
	if m.Sign() != 0 {
		x.Add(&x, big.NewInt(1))
	}
	return x.Int64()
}

// The equity index and drawdown take the same values as the math/big
// arithmetic they replaced, on the edges (the cap, a quotient past 64
// bits, an end of one msat, exact and inexact divisions) and on a million
// random days, so every Snap, rank and row a recompute makes is the same.
func TestFoldMathIsTheBigIntArithmetic(t *testing.T) {
	edges := []int64{math.MinInt64, math.MinInt64 + 1, -Q9, -2, -1, 0, 1, 2, 3, Q9 - 1, Q9, Q9 + 1,
		IndexMaxQ9 - 1, IndexMaxQ9, IndexMaxQ9 + 1, 1 << 32, 1<<62 + 12345, math.MaxInt64 - 1, math.MaxInt64}
	check := func(index, open, pnl int64) {
		d := Day{OpenEquityMsat: open, PnlMsat: pnl}
		if got, want := indexStep(index, d), indexStepAsBefore(index, d); got != want {
			t.Fatalf("indexStep(%d, open %d pnl %d) = %d, math/big %d", index, open, pnl, got, want)
		}
		if got, want := drawdownQ9(open, index), drawdownQ9AsBefore(open, index); got != want {
			t.Fatalf("drawdownQ9(%d, %d) = %d, math/big %d", open, index, got, want)
		}
	}
	for _, a := range edges {
		for _, b := range edges {
			for _, c := range edges {
				if (b > 0 && c > math.MaxInt64-b) || (b < 0 && c < math.MinInt64-b) {
					continue // open+pnl would wrap in both
				}
				check(a, b, c)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		index := rng.Int64N(4 * IndexMaxQ9)
		if rng.IntN(4) == 0 {
			index = rng.Int64N(2 * Q9)
		}
		open := rng.Int64N(1 << uint(rng.IntN(62)+1))
		pnl := rng.Int64N(1<<uint(rng.IntN(61)+1)) - open/2
		if rng.IntN(8) == 0 {
			pnl = -open + rng.Int64N(3) - 1
		}
		check(index, open, pnl)
	}
}

// A recompute of traders with a month of days each makes the snapshots'
// few allocations per trader, not three math/big values per day folded:
// about 178 allocations a trader before (10,000 traders: 0.45 s per
// recompute), at most 4 now (the snapshot, its windows, ranks and
// curve). Counted in mallocs, which do not depend on the machine.
func TestRecomputeOfAMonthAllocatesPerTraderNotPerDay(t *testing.T) {
	const traders = 2_000
	w := rankedWorld(t, traders)
	today := dayOf(w.now)
	for id, tr := range w.s.Board.Traders {
		tr.Days = tr.Days[:0]
		for d := range int64(TraderDaysKept) {
			tr.Days = append(tr.Days, Day{Day: today - (TraderDaysKept-1-d)*DayMs, PnlMsat: int64(len(id)+int(d)*13)%201*1000 - 100_000,
				Volume: 50, Trades: 3, OpenEquityMsat: 10_000_000})
		}
	}
	w.now += int64(CadenceMinutes * 60_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w.s.OnClockBoards(w.env())
	runtime.ReadMemStats(&after)
	if per := (after.Mallocs - before.Mallocs) / traders; per > 4 {
		t.Fatalf("a recompute made %d allocations a trader with %d days each", per, TraderDaysKept)
	}
}

// curveAsBefore is Trader.curve as it was, growing its slice by append.
func curveAsBefore(t *Trader, today int64) []CurvePoint {
	var out []CurvePoint
	index := int64(Q9)
	for _, d := range t.Days {
		if d.Day <= today-CurveDays*DayMs || d.Day > today {
			continue
		}
		index = indexStep(index, d)
		out = append(out, CurvePoint{Day: d.Day, IndexQ9: index})
	}
	return out
}

// The sized curve has the points the appends made, and is nil where they
// left it nil (no day in range), so a Snap encodes the same.
func TestSizedCurveIsTheAppendedCurve(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	today := int64(20_000) * DayMs
	for k := range 20_000 {
		tr := &Trader{}
		first := today - int64(rng.IntN(70)-5)*DayMs
		for d := range rng.IntN(TraderDaysKept + 1) {
			tr.Days = append(tr.Days, Day{Day: first + int64(d)*DayMs, PnlMsat: rng.Int64N(2_000_000) - 1_000_000, OpenEquityMsat: rng.Int64N(10_000_000)})
		}
		got, want := tr.curve(today), curveAsBefore(tr, today)
		if (got == nil) != (want == nil) || !slices.Equal(got, want) {
			t.Fatalf("case %d: curve %v, appended %v", k, got, want)
		}
	}
}
