package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Feature level 8, the oracle (review of 2026-11-27). Each test runs at
// level 7 (the old rule, kept for replay) and at level 8.

// newMarketReplicaAt is newMarketReplica on a cluster started at level.
func newMarketReplicaAt(t *testing.T, level uint32) *replica {
	t.Helper()
	r := newReplica(t)
	wantOK(t, r.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: level, Seed: 42, Deployment: "testnet"})))
	wantOK(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())))
	return r
}

// TestPrintInsideSeededHistoryIsRefused: a feed's first print may carry
// any positive time not ahead of log time. One stamped five days before
// launch (a source answering from a stale cache) was taken and turned
// that day's seeded bar into a "real" bar at its price, which GET candles
// shows without `seeded` for good; one stamped in seconds rather than
// milliseconds (1970) put a real bar before the whole history. From the
// level both are refused (409 conflict) and the history stays seeded;
// a print on launch day is taken as before.
func TestPrintInsideSeededHistoryIsRefused(t *testing.T) {
	for _, level := range []uint32{LevelPrintAfterHistory - 1, LevelPrintAfterHistory} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			r := newMarketReplicaAt(t, level)
			seeded := func() (n int, real []market.Candle) {
				r.m.Read(func(st *State, _ uint64) {
					c, err := st.Market.Candles("BTC-PERP", market.Interval1d, market.CandleLimitMax, st.NowMs)
					if err != nil {
						t.Fatal(err)
					}
					for _, b := range c {
						if b.Seeded {
							n++
						} else {
							real = append(real, b)
						}
					}
				})
				return n, real
			}
			fiveDaysBack := r.apply(printAt(t, mktLaunchMs+1, "BTCUSD", usdQ8(50_000), mktLaunchMs-5*86_400_000))
			inSeconds := r.apply(printAt(t, mktLaunchMs+2, "BTCUSD", usdQ8(50_000), mktLaunchMs/1000))
			n, real := seeded()
			if level < LevelPrintAfterHistory {
				wantOK(t, fiveDaysBack)
				if n != market.SeedDays-1 || len(real) != 1 || real[0].OQ8 != usdQ8(50_000) {
					t.Fatalf("below the level the print rewrote a seeded bar: %d seeded, real %+v", n, real)
				}
				return
			}
			wantRefused(t, fiveDaysBack, http.StatusConflict, wire.CodeConflict)
			wantRefused(t, inSeconds, http.StatusConflict, wire.CodeConflict)
			if n != market.SeedDays || len(real) != 0 {
				t.Fatalf("refused prints touched the history: %d seeded, real %+v", n, real)
			}
			if _, ok := r.lastPrint("BTCUSD"); ok {
				t.Fatal("a refused print became the feed's last")
			}
			wantOK(t, r.apply(printAt(t, mktLaunchMs+3, "BTCUSD", btcAnchorQ8, mktLaunchMs+3)))
			if n, real := seeded(); n != market.SeedDays || len(real) != 1 || real[0].OQ8 != btcAnchorQ8 {
				t.Fatalf("the launch-day print: %d seeded, real %+v", n, real)
			}
		})
	}
}

func (r *replica) lastPrint(feed string) (p market.Print, ok bool) {
	r.m.Read(func(st *State, _ uint64) { p, ok = st.Market.FeedLast(feed) })
	return p, ok
}

// TestHeldPrintStopsOrders: BTC really halves in one print, which the
// guard holds. Below the level a short opened meanwhile at the price from
// before the jump, to be paid by the longs when the next print confirmed
// it; from the level the order is refused oracle_stale,
// changing nothing, and after the confirming print it fills at the new
// price. A cancel is not held up.
func TestHeldPrintStopsOrders(t *testing.T) {
	for _, level := range []uint32{LevelHeldPrintStopsOrders - 1, LevelHeldPrintStopsOrders} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			long, lk := w.account(10 * btcBTC)
			created(t, w.order(long, lk, mktOrder("l", "BTC-PERP", "buy", 10_000)), trade.StatusFilled)
			a, k := w.account(btcBTC)
			limit := trade.PlaceRequest{OrderID: "rest", MarketID: "BTC-PERP", Side: "buy", Type: trade.TypeLimit, Contracts: 100, LimitPriceQ8: usdQ8(90_000)}
			created(t, w.order(a, k, limit), trade.StatusResting)
			if res := w.print("BTCUSD", usdQ8(45_000)); string(res.Body) != `{"held":true}` {
				t.Fatalf("a halving: %d %s", res.Status, res.Body)
			}
			before := w.hashNow()
			w.ts-- // the order at the held print's time: the log clock stays
			res := w.order(a, k, mktOrder("s", "BTC-PERP", "sell", 10_000))
			if level < LevelHeldPrintStopsOrders {
				created(t, res, trade.StatusFilled)
				return
			}
			wantRefused(t, res, http.StatusBadRequest, wire.CodeOracleStale)
			if w.hashNow() != before {
				t.Fatal("a refused order changed the state")
			}
			wantOK(t, w.cancel(a, k, "rest", "cancel-rest"))
			wantOK(t, w.print("BTCUSD", usdQ8(46_000)))
			created(t, w.order(a, k, mktOrder("s2", "BTC-PERP", "sell", 10_000)), trade.StatusFilled)
			if o := w.orderOf(a, "s2"); o.Status != trade.StatusFilled {
				t.Fatalf("after the confirming print: %+v", o)
			}
		})
	}
}
