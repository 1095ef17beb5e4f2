package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// Trading benchmarks (issue 10 point 11; docs/bench-trade.md has figures).
// Each drives a Machine without invariant checks, as raft does: encoded
// entries at consecutive indexes through Apply or ApplyBatch, so every
// figure includes decode, dispatch, the idempotency store, the ledger, the
// trading book and event building. Setup runs outside the timer.

// benchWorld is a machine past genesis with the default markets, fresh
// prints and funded accounts. Time only moves with prints, so the oracle
// stays fresh however long a benchmark runs.
type benchWorld struct {
	tb  testing.TB
	m   *Machine
	idx uint64
	ts  int64
	mid map[string]int64 // feed -> last mid
}

const (
	benchBTCMidQ8 = 100_000 * market.Q8
	benchETHMidQ8 = 3_400 * market.Q8
	benchTickBTC  = 50_000_000 // BTC-PERP tickSizeQ8
)

func newBenchWorld(tb testing.TB, accounts int, fundMsat int64) *benchWorld {
	tb.Helper()
	return newBenchWorldAt(tb, FeatureLevel, accounts, fundMsat)
}

// newBenchWorldAt is newBenchWorld at a given feature level.
func newBenchWorldAt(tb testing.TB, level uint32, accounts int, fundMsat int64) *benchWorld {
	tb.Helper()
	w := &benchWorld{tb: tb, m: NewMachine(Options{}), ts: mktLaunchMs, mid: map[string]int64{}}
	w.mustOK(w.apply(mustCommand(tb, CmdGenesis, 0, GenesisPayload{FeatureLevel: level, Seed: 42, Deployment: "testnet",
		SignupsPerHour: 1 << 30})))
	w.mustOK(w.apply(mustCommand(tb, CmdMarketsGenesis, 0, defaultMarketsGenesis())))
	w.print("BTCUSD", benchBTCMidQ8)
	w.print("ETHUSD", benchETHMidQ8)
	w.addAccounts(0, accounts, fundMsat)
	return w
}

func benchAcct(i int) (acct, key string) {
	return fmt.Sprintf("acc_%06d", i), fmt.Sprintf("key_%06d", i)
}

// addAccounts signs up and funds accounts from, .., from+n-1.
func (w *benchWorld) addAccounts(from, n int, fundMsat int64) {
	for i := from; i < from+n; i++ {
		acct, key := benchAcct(i)
		sum := sha256.Sum256([]byte(key))
		w.mustOK(w.apply(mustCommand(w.tb, CmdSignup, 0, access.NewAccount{AccountID: acct, KeyID: key, KeyHashHex: hex.EncodeToString(sum[:])})))
		w.mustOK(w.apply(mustCommand(w.tb, CmdDepositSettled, 0, funds.Settlement{AccountID: acct, AmountMsat: fundMsat,
			RailRef: "spark-in-" + acct, Path: funds.PathSpark})))
	}
}

// encode stamps c with the world's time and encodes it.
func (w *benchWorld) encode(c *Command) []byte {
	c.TsMs = w.ts
	b, err := c.Encode()
	if err != nil {
		w.tb.Fatal(err)
	}
	return b
}

func (w *benchWorld) applyRaw(b []byte) (*Result, []Event) {
	w.idx++
	return w.m.Apply(w.idx, b)
}

func (w *benchWorld) apply(c *Command) *Result {
	r, _ := w.applyRaw(w.encode(c))
	return r
}

func (w *benchWorld) mustOK(r *Result) {
	w.tb.Helper()
	if r == nil || !r.OK() {
		if r == nil {
			w.tb.Fatalf("no result (halted: %v)", w.m.Halted())
		}
		w.tb.Fatalf("refused: %d %s %s", r.Status, r.Code, r.Body)
	}
}

// printCmd is the oracle driver's entry for a new mid one millisecond on.
func (w *benchWorld) printCmd(feed string, midQ8 int64) []byte {
	w.ts++
	w.mid[feed] = midQ8
	return w.encode(mustCommand(w.tb, CmdOraclePrint, 0, OraclePrintPayload{FeedID: feed, MidQ8: midQ8, ConfQ9: 300_000, TsMs: w.ts}))
}

func (w *benchWorld) print(feed string, midQ8 int64) []Event {
	r, evs := w.applyRaw(w.printCmd(feed, midQ8))
	w.mustOK(r)
	return evs
}

// orderCmd is the entry the HTTP layer proposes for POST /v1/orders: the
// order id as idempotency key and a sha256 request hash.
func (w *benchWorld) orderCmd(i int, r trade.PlaceRequest) []byte {
	acct, key := benchAcct(i)
	c := mustCommand(w.tb, CmdPlaceOrder, 0, r)
	sum := sha256.Sum256([]byte(fmt.Sprintf("POST /v1/orders %+v", r)))
	c.Account, c.KeyID, c.IdemKey, c.ReqHash = acct, key, "acct:"+acct+":"+r.OrderID, sum[:]
	return w.encode(c)
}

func (w *benchWorld) cancelCmd(i int, orderID string) []byte {
	acct, key := benchAcct(i)
	c := mustCommand(w.tb, CmdCancelOrder, 0, CancelOrderPayload{OrderID: orderID})
	sum := sha256.Sum256([]byte("DELETE /v1/orders/" + orderID))
	c.Account, c.KeyID, c.IdemKey, c.ReqHash = acct, key, "acct:"+acct+":c-"+orderID, sum[:]
	return w.encode(c)
}

// restingLimit is a limit order that rests: a buy 1-10% under the mid or
// a sell 1-10% over it, on the tick, so the book spreads over many levels.
func restingLimit(rng *rand.Rand, id, mkt string, buy bool, contracts, midQ8, tickQ8 int64) trade.PlaceRequest {
	off := midQ8/100 + rng.Int64N(midQ8*9/100)
	side, limit := "sell", midQ8+off
	if buy {
		side, limit = "buy", midQ8-off
	}
	return limitOrder(id, mkt, side, contracts, limit/tickQ8*tickQ8)
}

// runEntries applies entries one by one (raft's Apply) or in batches of
// batch (raft's ApplyBatch), failing on any refusal. It is the timed loop.
func (w *benchWorld) runEntries(entries [][]byte, batch int) {
	if batch <= 1 {
		for _, e := range entries {
			w.idx++
			if r, _ := w.m.Apply(w.idx, e); r == nil || !r.OK() {
				w.mustOK(r)
			}
		}
		return
	}
	idx := make([]uint64, batch)
	for len(entries) > 0 {
		n := min(batch, len(entries))
		for j := range n {
			w.idx++
			idx[j] = w.idx
		}
		rs, _ := w.m.ApplyBatch(idx[:n], entries[:n])
		for _, r := range rs {
			if r == nil || !r.OK() {
				w.mustOK(r)
			}
		}
		entries = entries[n:]
	}
}

func reportOrdersPerSec(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "orders/s")
	}
}

// BenchmarkApplyMarketOrder measures market orders filled against the
// oracle: 1,000 funded accounts take turns, each alternating buy and sell
// of the same size, so half the orders open a position and half close it
// (realised PnL, margin release). batch=256 feeds raft's batch size
// (node.go MaxAppendEntries) through ApplyBatch.
func BenchmarkApplyMarketOrder(b *testing.B) {
	const accounts = 1000
	cases := []struct {
		name      string
		mkt       string
		contracts int64
		batch     int
	}{
		{"BTC-PERP", "BTC-PERP", 1_000, 1}, // inverse: 1,000 USD
		{"ETH-PERP", "ETH-PERP", 100, 1},   // quanto: about 0.001 BTC
		{"BTC-PERP/batch=256", "BTC-PERP", 1_000, 256},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			w := newBenchWorld(b, accounts, btcBTC)
			entries := make([][]byte, b.N)
			for i := range entries {
				side := "buy"
				if (i/accounts)%2 == 1 {
					side = "sell"
				}
				entries[i] = w.orderCmd(i%accounts, mktOrder(fmt.Sprintf("m%d", i), tc.mkt, side, tc.contracts))
			}
			b.ReportAllocs()
			b.ResetTimer()
			w.runEntries(entries, tc.batch)
			b.StopTimer()
			reportOrdersPerSec(b)
		})
	}
}

// limitEntries builds n resting limit placements, alternately buys and
// sells on alternating markets, spread round-robin over accounts (so no
// account passes trade.RestingOrdersPerAccountMax when accounts >=
// n/RestingOrdersPerAccountMax). It returns the entries and each order's
// account and id.
func (w *benchWorld) limitEntries(rng *rand.Rand, n, accounts int) ([][]byte, []int, []string) {
	entries, accts, ids := make([][]byte, n), make([]int, n), make([]string, n)
	for i := range n {
		mkt, mid, tick, q := "BTC-PERP", w.mid["BTCUSD"], int64(benchTickBTC), int64(1_000)
		if i%4 >= 2 {
			mkt, mid, tick, q = "ETH-PERP", w.mid["ETHUSD"], market.DefaultCatalogue()[1].TickSizeQ8, 100
		}
		accts[i], ids[i] = i%accounts, fmt.Sprintf("l%d", i)
		entries[i] = w.orderCmd(accts[i], restingLimit(rng, ids[i], mkt, i%2 == 0, q, mid, tick))
	}
	return entries, accts, ids
}

func accountsFor(orders int) int {
	return max(1, (orders+trade.RestingOrdersPerAccountMax-1)/trade.RestingOrdersPerAccountMax)
}

// BenchmarkApplyLimitOrderRest measures limit orders that rest: validation,
// the quote that shows they cannot fill yet, the reservation moved from
// free to reserved, the price index insert and the order event. Orders are
// spread over as many accounts as the per-account cap requires.
func BenchmarkApplyLimitOrderRest(b *testing.B) {
	accounts := accountsFor(b.N)
	w := newBenchWorld(b, accounts, btcBTC)
	entries, _, _ := w.limitEntries(rand.New(rand.NewPCG(1, 2)), b.N, accounts)
	b.ReportAllocs()
	b.ResetTimer()
	w.runEntries(entries, 1)
	b.StopTimer()
	reportOrdersPerSec(b)
}

// BenchmarkApplyCancelOrder measures cancelling resting limit orders (index
// removal, reservation released, order closed and announced), from a book
// of b.N resting orders placed untimed.
func BenchmarkApplyCancelOrder(b *testing.B) {
	accounts := accountsFor(b.N)
	w := newBenchWorld(b, accounts, btcBTC)
	place, accts, ids := w.limitEntries(rand.New(rand.NewPCG(1, 2)), b.N, accounts)
	w.runEntries(place, 1)
	cancels := make([][]byte, b.N)
	for i := range cancels {
		cancels[i] = w.cancelCmd(accts[i], ids[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	w.runEntries(cancels, 1)
	b.StopTimer()
	var resting int
	w.m.Read(func(st *State, _ uint64) {
		for _, bk := range st.Trade.Books {
			resting += bk.Index.Len()
		}
	})
	if resting != 0 {
		b.Fatalf("%d orders still rest after cancelling all", resting)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cancels/s")
}

// steadyWorld is shared by the runs of BenchmarkApplyMarketOrderSteady:
// filling it takes seconds, and whatever a run adds leaves it as full as
// before (every order then drops an older one).
var steadyWorld struct {
	w    *benchWorld
	next int // orders placed so far; the next order's number
}

// steadyAccounts trade in BenchmarkApplyMarketOrderSteady.
const steadyAccounts = 100

// BenchmarkApplyMarketOrderSteady measures market orders once the state
// has stopped growing, as on a venue that has traded for a while: every
// account already keeps trade.ClosedOrdersKept closed orders and
// trade.FillsKept fills, and the idempotency store is at its bound, so
// each order drops an old order, an old fill and an old stored answer as
// it adds its own. BenchmarkApplyMarketOrder runs on a growing state
// instead, where part of the cost is the first touch of new memory.
// Filling the state (about 500,000 orders, untimed, until the store holds
// IdemMaxRecords) takes 10-20 s, once per test binary.
func BenchmarkApplyMarketOrderSteady(b *testing.B) {
	sw := &steadyWorld
	entry := func(i int) []byte {
		side := "buy"
		if (i/steadyAccounts)%2 == 1 {
			side = "sell"
		}
		return sw.w.orderCmd(i%steadyAccounts, mktOrder(fmt.Sprintf("s%d", i), "BTC-PERP", side, 1_000))
	}
	fill := func(n int) {
		const chunk = 10_000
		for n > 0 {
			k := min(n, chunk)
			entries := make([][]byte, k)
			for j := range entries {
				entries[j] = entry(sw.next + j)
			}
			sw.w.runEntries(entries, 256)
			sw.next += k
			n -= k
		}
	}
	if sw.w == nil {
		sw.w = newBenchWorld(b, steadyAccounts, btcBTC)
		fill(steadyAccounts * max(trade.ClosedOrdersKept, trade.FillsKept))
		for len(sw.w.m.st.Idem.Records) < IdemMaxRecords {
			fill(10_000)
		}
	}
	sw.w.tb = b
	entries := make([][]byte, b.N)
	for i := range entries {
		entries[i] = entry(sw.next + i)
	}
	sw.next += b.N
	records := len(sw.w.m.st.Idem.Records)
	b.ReportAllocs()
	b.ResetTimer()
	sw.w.runEntries(entries, 1)
	b.StopTimer()
	reportOrdersPerSec(b)
	if n := len(sw.w.m.st.Idem.Records); n > records+steadyAccounts {
		b.Fatalf("the idempotency store grew from %d to %d records: not steady", records, n)
	}
}
