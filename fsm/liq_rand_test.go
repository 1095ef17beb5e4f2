package fsm

// A seeded property test of the risk engine (a review of 2026-11-28):
// random accounts open random positions at random leverage on both
// sides, place stops, and the price walks and gaps at random, with
// halts, resumptions, stale prints, held jumps and maintenance-rate
// changes among the prints. Every entry that can liquidate is audited
// record by record (auditEntry: each liquidation's realised loss plus
// deficit is what left its position's margin, the fund covers in order
// and never goes below zero, ADL follows its ranking, the house moves by
// exactly what the records say), the machine checks the ledger's
// conservation and the book's invariants after every entry, and the
// insurance fund always equals the penalties it took less the deficits
// it covered.

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

func TestRandomRiskKeepsEveryRecordStraight(t *testing.T) {
	seeds, steps := 40, 400
	if testing.Short() {
		seeds, steps = 3, 120
	}
	total := riskAudit{}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(seed)))
			w := newTradeWorld(t)
			type trader struct{ id, key string }
			var ts []trader
			for i := 0; i < 14; i++ {
				a, k := w.account(btcBTC/50 + rng.Int63n(btcBTC))
				ts = append(ts, trader{a, k})
			}
			mid := usdQ8(100_000)
			halted := false
			var penalties, covered int64
			n := 0
			audit := func(apply func() *Result) {
				au := w.auditEntry("BTC-PERP", apply)
				penalties += au.penalties
				covered += au.covered
				total.liquidations += au.liquidations
				total.adlFills += au.adlFills
				total.deficits += au.deficits
				total.shortfalls += au.shortfalls
				total.penalties += au.penalties
			}
			for step := 0; step < steps; step++ {
				n++
				tr := ts[rng.Intn(len(ts))]
				switch r := rng.Intn(20); {
				case r < 7: // an order at random leverage; refusals are fine
					side := []string{"buy", "sell"}[rng.Intn(2)]
					o := levered(mktOrder(fmt.Sprintf("o%d", n), "BTC-PERP", side, 100+rng.Int63n(30_000)), 1+rng.Int63n(100))
					if rng.Intn(4) == 0 {
						o.ReduceOnly = true
					}
					w.order(tr.id, tr.key, o)
				case r < 9: // a reduce-only stop near the price
					p := w.position(tr.id, "BTC-PERP")
					if p.Contracts == 0 {
						continue
					}
					side, lvl := "sell", mid-mid/int64(50+rng.Intn(200))
					if p.Side == trade.Short {
						side, lvl = "buy", mid+mid/int64(50+rng.Intn(200))
					}
					o := stopOrder(fmt.Sprintf("s%d", n), "BTC-PERP", side, 1+rng.Int63n(p.Contracts), lvl)
					o.ReduceOnly = true
					w.order(tr.id, tr.key, o)
				case r < 16: // the price walks, sometimes gaps (within the jump guard)
					move := mid / 1000 * int64(rng.Intn(21)-10)
					if rng.Intn(6) == 0 {
						move = mid / 100 * int64(rng.Intn(41)-20)
					}
					mid = max(mid+move, usdQ8(1_000))
					audit(func() *Result { return w.print("BTCUSD", mid) })
				case r < 17: // a jump the guard holds, then the print that confirms or drops it
					held := mid * 3
					if rng.Intn(2) == 0 {
						held = mid / 3
					}
					if res := w.print("BTCUSD", held); string(res.Body) != `{"held":true}` {
						t.Fatalf("a jump of 3x was not held: %s", res.Body)
					}
					if rng.Intn(2) == 0 {
						mid = held + held/500
					}
					audit(func() *Result { return w.print("BTCUSD", mid) })
				case r < 18: // the maintenance rate moves (initial margin stays above it)
					mm := int64(2_000_000 + rng.Intn(6_000_000))
					audit(func() *Result {
						return w.at(mustCommand(w.t, CmdMarketSet, 0, MarketSetPayload{MarketID: "BTC-PERP", MMRateQ9: &mm}))
					})
				case r < 19: // a halt, or the resumption
					st := market.StatusHalted
					if halted {
						st = market.StatusLive
					}
					halted = !halted
					audit(func() *Result {
						return w.at(mustCommand(w.t, CmdMarketSet, 0, MarketSetPayload{MarketID: "BTC-PERP", Status: &st}))
					})
				default: // a print that is stale when it lands
					mid = max(mid-mid/50, usdQ8(1_000))
					audit(func() *Result { return w.stalePrint("BTCUSD", mid, 20_000) })
					audit(func() *Result { return w.print("BTCUSD", mid) })
				}
				if got := w.balance(ledger.Insurance); got != penalties-covered || got < 0 {
					t.Fatalf("step %d: insurance fund %d, penalties %d less covered %d", step, got, penalties, covered)
				}
			}
		})
	}
	t.Logf("%d liquidations, %d ADL fills, %d msat of deficits (%d short of the fund), %d msat of penalties",
		total.liquidations, total.adlFills, total.deficits, total.shortfalls, total.penalties)
	if !testing.Short() && (total.liquidations == 0 || total.deficits == 0 || total.adlFills == 0) {
		t.Fatalf("the walk never reached a deficit and ADL: %+v", total)
	}
}
