package fsm

// A seeded property test of the risk engine (a review of 2026-11-28):
// random accounts (two of them whales) open random positions in the
// inverse BTC or the quanto ETH market at random leverage on both sides
// and place stops and limit orders, while the price walks and gaps at random, with halts,
// resumptions, stale prints, held jumps, maintenance-rate changes and
// funding boundaries among the prints. Every entry that can liquidate is
// audited record by record (auditEntry: each liquidation's realised loss
// plus deficit is what left its position's margin, the fund covers in
// order and never goes below zero, ADL follows its ranking, funding moves
// margins and entries as its flows say, the house moves by exactly what
// the records say), the machine checks the ledger's conservation and the
// book's invariants after every entry, and the insurance fund always
// equals the penalties it took less the deficits it covered.

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

func TestRandomRiskKeepsEveryRecordStraight(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	seeds, steps := 40, 400
	if testing.Short() {
		seeds, steps = 3, 120
	}
	total := riskAudit{}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(seed)))
			w := newTradeWorld(t)
			// Odd seeds trade the inverse BTC market, even ones the quanto
			// ETH market.
			mkt, feed, mid := "BTC-PERP", "BTCUSD", usdQ8(100_000)
			if seed%2 == 0 {
				mkt, feed, mid = "ETH-PERP", "ETHUSD", usdQ8(3_400)
			}
			floor, ceiling := mid/100, mid*100
			type trader struct{ id, key string }
			var ts []trader
			for i := 0; i < 14; i++ {
				a, k := w.account(btcBTC/50 + rng.Int63n(btcBTC))
				ts = append(ts, trader{a, k})
			}
			// Two whales, whose orders move the skew's impact.
			for i := 0; i < 2; i++ {
				a, k := w.account(50 * btcBTC)
				ts = append(ts, trader{a, k})
			}
			halted := false
			var penalties, covered int64
			n := 0
			audit := func(apply func() *Result) {
				au := w.auditEntry(mkt, apply)
				penalties += au.penalties
				covered += au.covered
				total.liquidations += au.liquidations
				total.adlFills += au.adlFills
				total.deficits += au.deficits
				total.shortfalls += au.shortfalls
				total.penalties += au.penalties
				total.fundingFlows += au.fundingFlows
			}
			for step := 0; step < steps; step++ {
				n++
				tr := ts[rng.Intn(len(ts))]
				switch r := rng.Intn(20); {
				case r < 7: // an order at random leverage; refusals are fine
					side := []string{"buy", "sell"}[rng.Intn(2)]
					size := 100 + rng.Int63n(30_000)
					if rng.Intn(5) == 0 {
						size = 100_000 + rng.Int63n(900_000)
					}
					o := levered(mktOrder(fmt.Sprintf("o%d", n), mkt, side, size), 1+rng.Int63n(100))
					if rng.Intn(4) == 0 {
						o.ReduceOnly = true
					}
					w.order(tr.id, tr.key, o)
				case r < 8 && rng.Intn(2) == 0: // a limit order near the price, to rest and fill on a later print
					side, lim := "buy", mid-mid/int64(30+rng.Intn(300))
					if rng.Intn(2) == 0 {
						side, lim = "sell", mid+mid/int64(30+rng.Intn(300))
					}
					o := levered(limitOrder(fmt.Sprintf("l%d", n), mkt, side, 100+rng.Int63n(30_000), lim), 1+rng.Int63n(100))
					o.ReduceOnly = rng.Intn(3) == 0
					w.order(tr.id, tr.key, o)
				case r < 9: // a reduce-only stop near the price
					p := w.position(tr.id, mkt)
					if p.Contracts == 0 {
						continue
					}
					side, lvl := "sell", mid-mid/int64(50+rng.Intn(200))
					if p.Side == trade.Short {
						side, lvl = "buy", mid+mid/int64(50+rng.Intn(200))
					}
					o := stopOrder(fmt.Sprintf("s%d", n), mkt, side, 1+rng.Int63n(p.Contracts), lvl)
					o.ReduceOnly = true
					w.order(tr.id, tr.key, o)
				case r < 16: // the price walks, sometimes gaps (within the jump guard)
					move := mid / 1000 * int64(rng.Intn(21)-10)
					if rng.Intn(6) == 0 {
						move = mid / 100 * int64(rng.Intn(41)-20)
					}
					mid = min(max(mid+move, floor), ceiling)
					audit(func() *Result { return w.print(feed, mid) })
				case r < 17: // a jump the guard holds, then the print that confirms or drops it
					held := mid * 3
					if rng.Intn(2) == 0 {
						held = mid / 3
					}
					if res := w.print(feed, held); string(res.Body) != `{"held":true}` {
						last, _ := w.feedLastOf(feed)
						t.Fatalf("a jump of 3x (%d from %d, last %+v) was not held: %s", held, mid, last, res.Body)
					}
					if rng.Intn(2) == 0 && held >= floor && held <= ceiling {
						mid = held + held/500 // confirmed (within the range walks clamp to)
					}
					audit(func() *Result { return w.print(feed, mid) })
				case r < 18: // the maintenance rate moves (initial margin stays above it)
					mm := int64(2_000_000 + rng.Intn(6_000_000))
					audit(func() *Result {
						return w.at(mustCommand(w.t, CmdMarketSet, 0, MarketSetPayload{MarketID: mkt, MMRateQ9: &mm}))
					})
				case r < 19: // a halt, or the resumption
					st := market.StatusHalted
					if halted {
						st = market.StatusLive
					}
					halted = !halted
					audit(func() *Result {
						return w.at(mustCommand(w.t, CmdMarketSet, 0, MarketSetPayload{MarketID: mkt, Status: &st}))
					})
				case r < 20 && rng.Intn(3) == 0: // an hourly funding boundary at a fresh print
					var next int64
					w.m.Read(func(st *State, _ uint64) { next = st.Market.MarketsByID[mkt].NextFundingTsMs })
					w.walkTo(next - 3000)
					audit(func() *Result { return w.print(feed, mid) })
					w.ts = next - 1
					audit(func() *Result { return w.at(&Command{Type: CmdTick}) })
				default: // a print that is stale when it lands
					mid = max(mid-mid/50, floor)
					audit(func() *Result { return w.stalePrint(feed, mid, 20_000) })
					audit(func() *Result { return w.print(feed, mid) })
				}
				if got := w.balance(ledger.Insurance); got != penalties-covered || got < 0 {
					t.Fatalf("step %d: insurance fund %d, penalties %d less covered %d", step, got, penalties, covered)
				}
			}
		})
	}
	t.Logf("%d liquidations, %d ADL fills, %d msat of deficits (%d short of the fund), %d msat of penalties, %d funding flows",
		total.liquidations, total.adlFills, total.deficits, total.shortfalls, total.penalties, total.fundingFlows)
	if !testing.Short() && (total.liquidations == 0 || total.deficits == 0 || total.adlFills == 0 || total.fundingFlows == 0) {
		t.Fatalf("the walk never reached a deficit and ADL: %+v", total)
	}
}

func (w *tradeWorld) feedLastOf(feed string) (p market.Print, ok bool) {
	w.m.Read(func(st *State, _ uint64) { p, ok = st.Market.FeedLast(feed) })
	return p, ok
}
