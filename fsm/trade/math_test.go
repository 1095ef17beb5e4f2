package trade

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

func inverseParams() *market.Params {
	p := market.DefaultCatalogue()[0] // BTC-PERP: inverse, tick 0.5 USD
	return &p
}

func quantoParams() *market.Params {
	p := market.DefaultCatalogue()[1] // ETH-PERP: quanto, 300 msat per contract per dollar
	return &p
}

func usd(d int64) int64 { return d * market.Q8 }

func eq(t *testing.T, name string, got int64, err error, want int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if got != want {
		t.Fatalf("%s = %d, want %d", name, got, want)
	}
}

// BitMEX's worked example: long 15000 XBTUSD contracts at 750, closed at
// 800, gains 15000 * (1/750 - 1/800) = 1.25 BTC. The division is exact, so
// nothing is lost to rounding; the short side loses exactly as much.
func TestBitmexInverseExample(t *testing.T) {
	p := inverseParams()
	got, err := PnLMsat(p, Long, 15000, usd(750), usd(800))
	eq(t, "long pnl", got, err, 125_000_000_000)
	got, err = PnLMsat(p, Short, 15000, usd(750), usd(800))
	eq(t, "short pnl", got, err, -125_000_000_000)
	// Value: 15000 contracts at 750 are 20 BTC; at 800, 18.75 BTC.
	got, err = NotionalMsat(p, 15000, usd(750))
	eq(t, "value at 750", got, err, 2_000_000_000_000)
	got, err = NotionalMsat(p, 15000, usd(800))
	eq(t, "value at 800", got, err, 1_875_000_000_000)
}

// A gain loses its fraction of a msat and a loss pays it: 1 contract from
// 3 to 7 dollars is 1e11/3 - 1e11/7 = 19,047,619,047.619... msat.
func TestInversePnLRoundsAgainstTheTrader(t *testing.T) {
	p := inverseParams()
	got, err := PnLMsat(p, Long, 1, usd(3), usd(7))
	eq(t, "gain", got, err, 19_047_619_047)
	got, err = PnLMsat(p, Short, 1, usd(3), usd(7))
	eq(t, "loss", got, err, -19_047_619_048)
	got, err = PnLMsat(p, Long, 1, usd(3), usd(3))
	eq(t, "unchanged", got, err, 0)
	// The value rounds up (it is what fees and margin are charged on).
	got, err = NotionalMsat(p, 1, usd(3))
	eq(t, "value 1 at 3", got, err, 33_333_333_334)
	got, err = NotionalMsat(p, 0, usd(3))
	eq(t, "value of nothing", got, err, 0)
}

func TestQuantoValueAndPnL(t *testing.T) {
	p := quantoParams() // 300 msat per contract per dollar
	got, err := NotionalMsat(p, 10, usd(3400))
	eq(t, "10 at 3400", got, err, 10_200_000)
	got, err = PnLMsat(p, Long, 10, usd(3400), usd(3500))
	eq(t, "long +100", got, err, 300_000)
	got, err = PnLMsat(p, Short, 10, usd(3400), usd(3500))
	eq(t, "short -100", got, err, -300_000)
	// 1 contract moving 1e-8 dollars is worth 3e-6 msat: the gain rounds to
	// 0, the loss to -1; the value of 1 contract at 1e-8 rounds up to 1.
	got, err = PnLMsat(p, Long, 1, 1, 2)
	eq(t, "tiny gain", got, err, 0)
	got, err = PnLMsat(p, Short, 1, 1, 2)
	eq(t, "tiny loss", got, err, -1)
	got, err = NotionalMsat(p, 1, 1)
	eq(t, "tiny value", got, err, 1)
}

// Closing both sides of the same trade never pays out more than it takes
// in: the long's and the short's PnL sum to 0 or -1 msat.
func TestPnLSidesSumToZeroOrVenueGain(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range []*market.Params{inverseParams(), quantoParams()} {
		for i := 0; i < 20000; i++ {
			n := rng.Int64N(1_000_000) + 1
			a, b := rng.Int64N(usd(200_000))+1, rng.Int64N(usd(200_000))+1
			l, err1 := PnLMsat(p, Long, n, a, b)
			s, err2 := PnLMsat(p, Short, n, a, b)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if sum := l + s; sum != 0 && sum != -1 {
				t.Fatalf("%s %d contracts %d->%d: long %d + short %d = %d", p.MarketID, n, a, b, l, s, sum)
			}
		}
	}
}

func TestEntryAfterAdd(t *testing.T) {
	inv, qu := inverseParams(), quantoParams()
	// Inverse: 100 at 100 plus 100 at 200: harmonic mean 133.333... dollars.
	got, err := EntryAfterAdd(inv, Long, 100, usd(100), 100, usd(200))
	eq(t, "inverse long", got, err, 13_333_333_334)
	got, err = EntryAfterAdd(inv, Short, 100, usd(100), 100, usd(200))
	eq(t, "inverse short", got, err, 13_333_333_333)
	// The harmonic mean keeps the msat value of the parts: 1e11 + 5e10.
	whole, _ := NotionalMsat(inv, 200, 13_333_333_333)
	if whole != 150_000_000_004 {
		t.Fatalf("value at the mean = %d", whole)
	}
	// Exact mean: no rounding.
	got, err = EntryAfterAdd(inv, Long, 15000, usd(750), 15000, usd(750))
	eq(t, "same price", got, err, usd(750))
	// Quanto: arithmetic mean (100 + 2*101)/3 = 100.67 (in q8 units).
	got, err = EntryAfterAdd(qu, Long, 1, 100, 2, 101)
	eq(t, "quanto long", got, err, 101)
	got, err = EntryAfterAdd(qu, Short, 1, 100, 2, 101)
	eq(t, "quanto short", got, err, 100)
	if _, err := EntryAfterAdd(qu, Long, 0, 100, 0, 101); !errors.Is(err, ErrMath) {
		t.Fatalf("adding nothing to nothing: %v", err)
	}
}

// Adding at a second price and closing at a third realises the same PnL
// (to the msat) as the two parts closed separately, for inverse contracts:
// that is what the harmonic mean is for.
func TestHarmonicMeanKeepsInversePnL(t *testing.T) {
	p := inverseParams()
	entry, _ := EntryAfterAdd(p, Long, 15000, usd(750), 5000, usd(700))
	whole, _ := PnLMsat(p, Long, 20000, entry, usd(800))
	a, _ := PnLMsat(p, Long, 15000, usd(750), usd(800))
	b, _ := PnLMsat(p, Long, 5000, usd(700), usd(800))
	// The mean itself is a q8 number: rounding it up by less than 1e-8
	// dollars costs the long at most n*1e19/(entry*(entry-1)) msat (here 36),
	// never the venue.
	bound := refDivCeil(refMul(refBi(20000), bigInverse), refMul(refBi(entry), refBi(entry-1))).Int64()
	if d := a + b - whole; d < 0 || d > bound+2 {
		t.Fatalf("averaged pnl %d vs parts %d: off by %d, bound %d", whole, a+b, d, bound)
	}
}

func TestInitialMarginAndLeverage(t *testing.T) {
	got, err := InitialMarginMsat(2_000_000_000_000, 10_000_000, 100) // 1% of 20 BTC
	eq(t, "im", got, err, 20_000_000_000)
	got, err = InitialMarginMsat(1, 10_000_000, 100) // 0.01 msat rounds up
	eq(t, "im rounds up", got, err, 1)
	got, err = InitialMarginMsat(100, 10_000_000, 100) // exactly 1 msat
	eq(t, "im exact", got, err, 1)
	got, err = InitialMarginMsat(101, 10_000_000, 100) // 1.01 msat
	eq(t, "im just above", got, err, 2)
	// imRate exactly 1/maxLeverage is allowed; anything beyond is refused.
	if _, err := InitialMarginMsat(1000, 10_000_000, 99); !errors.Is(err, ErrLeverage) {
		t.Fatalf("a 1%% rate (100x) in a market capped at 99x: %v", err)
	}
	if _, err := InitialMarginMsat(1000, 10_000_000, 101); err != nil {
		t.Fatalf("a 1%% rate (100x) in a market capped at 101x: %v", err)
	}
	if _, err := InitialMarginMsat(1000, 9_999_999, 100); !errors.Is(err, ErrLeverage) {
		t.Fatalf("rate below 1/maxLeverage: %v", err)
	}
	if _, err := InitialMarginMsat(1000, market.Q9, 1); err != nil {
		t.Fatalf("1x at 100%%: %v", err)
	}
}

func TestTakerFeeRoundsUp(t *testing.T) {
	for _, c := range []struct{ notional, want int64 }{
		{2_000_000_000_000, 1_000_000_000}, // 0.05% of 20 BTC
		{1999, 1}, {2000, 1}, {2001, 2}, {0, 0},
	} {
		got, err := TakerFeeMsat(c.notional, 500_000)
		eq(t, "fee", got, err, c.want)
	}
}

func TestImpactFollowsSkew(t *testing.T) {
	const capOI = 100_000_000
	cases := []struct {
		name           string
		side           Side
		q, net, wantQ9 int64
	}{
		{"buy on an empty book", Long, 1_000_000, 0, 25_000},
		{"sell on an empty book", Short, 1_000_000, 0, 25_000},
		{"buy into a long-heavy book grows skew", Long, 1_000_000, 1_000_000, 75_000},
		{"sell into a long-heavy book reduces skew", Short, 1_000_000, 1_000_000, 0},
		{"sell that crosses zero pays beyond the midpoint", Short, 4_000_000, 1_000_000, 50_000},
		{"sell that lands exactly on zero... midpoint", Short, 2_000_000, 1_000_000, 0},
		{"one contract rounds up", Long, 1, 0, 1},
		{"full cap from zero", Long, capOI, 0, ImpactAtCapQ9 / 2},
	}
	for _, c := range cases {
		got, err := ImpactQ9(c.side, c.q, c.net, capOI)
		if err != nil || got != c.wantQ9 {
			t.Errorf("%s: impact %d (%v), want %d", c.name, got, err, c.wantQ9)
		}
	}
	grow, _ := ImpactQ9(Long, 10, 500, capOI)
	shrink, _ := ImpactQ9(Short, 10, 500, capOI)
	if shrink >= grow {
		t.Fatalf("reducing skew pays %d, growing %d", shrink, grow)
	}
}

func TestExecPriceRoundsToTheTickAgainstTheTrader(t *testing.T) {
	tick := int64(50_000_000) // 0.5 USD
	cases := []struct {
		name                string
		side                Side
		mid, spread, wantQ8 int64
	}{
		{"buy rounds up", Long, usd(100), 200_000, 10_050_000_000},    // 100.02 -> 100.5
		{"sell rounds down", Short, usd(100), 200_000, 9_950_000_000}, // 99.98 -> 99.5
		{"buy on the tick", Long, usd(100), 5_000_000, 10_050_000_000},
		{"sell on the tick", Short, usd(100), 5_000_000, 9_950_000_000},
		{"no spread buy", Long, usd(100), 0, usd(100)},
		{"no spread sell", Short, usd(100), 0, usd(100)},
		{"buy one unit above a tick", Long, usd(100) + 1, 0, usd(100) + tick},
		{"sell one unit below a tick", Short, usd(100) - 1, 0, usd(100) - tick},
	}
	for _, c := range cases {
		got, err := ExecPriceQ8(c.side, c.mid, c.spread, tick)
		if err != nil || got != c.wantQ8 {
			t.Errorf("%s: %d (%v), want %d", c.name, got, err, c.wantQ8)
		}
	}
	if _, err := ExecPriceQ8(Short, 1, 1, 1); !errors.Is(err, ErrMath) {
		t.Fatalf("a sell rounding to zero: %v", err)
	}
	if _, err := ExecPriceQ8(Long, math.MaxInt64, 500_000_000, 1); !errors.Is(err, ErrMath) {
		t.Fatalf("overflow: %v", err)
	}
}

func TestSlippageBoundIsInclusive(t *testing.T) {
	mid := usd(100)
	if !WithinSlippage(Long, usd(100)+50_000_000, mid, 5_000_000) { // exactly 0.5%
		t.Fatal("exactly at the bound must pass")
	}
	if WithinSlippage(Long, usd(100)+50_000_000, mid, 4_999_999) {
		t.Fatal("beyond the bound must fail")
	}
	if !WithinSlippage(Short, usd(100)-50_000_000, mid, 5_000_000) || WithinSlippage(Short, usd(100)-50_000_001, mid, 5_000_000) {
		t.Fatal("sell side bound")
	}
	if !WithinSlippage(Long, usd(99), mid, 0) || !WithinSlippage(Short, usd(101), mid, 0) {
		t.Fatal("a better price is always within")
	}
}

func TestImpactMsatIsTheImpactShareOfNotionalAtMid(t *testing.T) {
	p := inverseParams()
	// 15000 contracts at 750: 2e12 msat; 25,000 q9 (0.0025%) of it.
	got, err := ImpactMsat(p, 15000, usd(750), 25_000)
	eq(t, "impact", got, err, 50_000_000)
	got, err = ImpactMsat(p, 1, usd(3), 1) // 33,333,333,333.3 * 1e-9, rounded down
	eq(t, "impact rounds down", got, err, 33)
}

// The 128-bit fast path of notional and fee answers exactly what the
// math/big path does, over random and edge inputs.
func TestMulDivCeil64MatchesBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(a, b, d uint64) {
		t.Helper()
		got, ok := mulDivCeil64(a, b, d)
		num := new(big.Int).Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))
		want := refDivCeil(num, new(big.Int).SetUint64(d))
		if ok != want.IsInt64() || (ok && got != want.Int64()) {
			t.Fatalf("ceil(%d*%d/%d): fast %d ok %v, big %s", a, b, d, got, ok, want)
		}
	}
	edges := []uint64{0, 1, 2, 3, 99, 1e8, 1e9, 1e19, 1<<63 - 1, 1 << 63, 1<<64 - 1}
	for _, a := range edges {
		for _, b := range edges {
			for _, d := range edges[1:] {
				check(a, b, d)
			}
		}
	}
	for i := 0; i < 200_000; i++ {
		a, b, d := rng.Uint64()>>rng.IntN(64), rng.Uint64()>>rng.IntN(64), rng.Uint64()>>rng.IntN(64)|1
		check(a, b, d)
	}
}
