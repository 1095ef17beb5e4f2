package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/market"
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
