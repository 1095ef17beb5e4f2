package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
)

// Feature level 7, trading review (2026-11-27). Each test runs at level 6
// (the old rule, which must stay as it was for replay) and at level 7.

// stalePrint applies a print of feed at midQ8 whose observation time is
// just after the feed's last print, after log time moved on by gapMs: the
// print is already older than the market's staleness bound when it lands.
func (w *tradeWorld) stalePrint(feed string, midQ8, gapMs int64) *Result {
	w.t.Helper()
	var lastTs int64
	w.m.Read(func(st *State, _ uint64) {
		p, _ := st.Market.FeedLast(feed)
		lastTs = p.TsMs
	})
	w.tickTo(w.ts + gapMs)
	return w.at(mustCommand(w.t, CmdOraclePrint, 0, OraclePrintPayload{FeedID: feed, MidQ8: midQ8, ConfQ9: 300_000, TsMs: lastTs + 1}))
}

// TestStalePrintFillsNothing: a print that is already stale when it lands
// (a feed that lags log time by more than oracleStalenessMs) is one at
// which a market order is refused (oracle_stale) and no liquidation runs.
// Below the level it still executed armed triggers and filled resting
// limit orders at that old price, a price the venue itself refuses to
// trade at. From the level the book is not checked against a stale print:
// nothing fills, nothing is blocked, and the next fresh print checks what
// the price crossed since the last fresh one.
func TestStalePrintFillsNothing(t *testing.T) {
	for _, level := range []uint32{trade.LevelStalePrintWaits - 1, trade.LevelStalePrintWaits} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, k := w.account(btcBTC)
			open := mktOrder("open", "BTC-PERP", "buy", 1_000)
			open.Leverage = 10
			created(t, w.order(a, k, open), trade.StatusFilled)
			stop := stopOrder("sl", "BTC-PERP", "sell", 1_000, usdQ8(97_000))
			stop.ReduceOnly = true
			created(t, w.order(a, k, stop), trade.StatusWorking)
			b, kb := w.account(btcBTC)
			created(t, w.order(b, kb, limitOrder("bid", "BTC-PERP", "buy", 1_000, usdQ8(96_000))), trade.StatusResting)

			wantOK(t, w.stalePrint("BTCUSD", usdQ8(95_000), 60_000))
			// The venue itself refuses to trade at this print.
			res := w.order(b, kb, mktOrder("probe", "BTC-PERP", "buy", 1))
			if res.OK() || res.Code != "oracle_stale" {
				t.Fatalf("market order at a stale print: %d %s", res.Status, res.Body)
			}
			if level < trade.LevelStalePrintWaits {
				w.wantTrigger(a, "sl", trade.TrigExecuted, "")
				if o := w.orderOf(b, "bid"); o.Status != trade.StatusFilled {
					t.Fatalf("below the level the stale print filled the bid: %+v", o)
				}
				return
			}
			w.wantTrigger(a, "sl", trade.TrigArmed, "")
			if o := w.orderOf(b, "bid"); o.Status != trade.StatusAccepted {
				t.Fatalf("bid after a stale print: %s %q", o.Status, o.Reason)
			}
			if p := w.position(a, "BTC-PERP"); p.Contracts != 1_000 {
				t.Fatalf("position after a stale print: %+v", p)
			}
			// A fresh print back above both levels crosses nothing since
			// the last fresh print: both still wait.
			wantOK(t, w.print("BTCUSD", usdQ8(99_000)))
			w.wantTrigger(a, "sl", trade.TrigArmed, "")
			if o := w.orderOf(b, "bid"); o.Status != trade.StatusAccepted {
				t.Fatalf("bid after a fresh print above it: %s", o.Status)
			}
			// A fresh print through both levels executes and fills them.
			wantOK(t, w.print("BTCUSD", usdQ8(95_000)))
			w.wantTrigger(a, "sl", trade.TrigExecuted, "")
			if o := w.orderOf(b, "bid"); o.Status != trade.StatusFilled {
				t.Fatalf("bid after a fresh print through it: %s %q", o.Status, o.Reason)
			}
		})
	}
}
