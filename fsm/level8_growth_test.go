package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/growth"
)

// Feature level 8, growth review (2026-11-27). Each test runs at level 7
// (the old rule, which must stay as it was for replay) and at level 8.

// deposit credits msat to acct through the rail's settled-deposit command.
func (w *tradeWorld) deposit(acct string, msat int64, ref string) {
	w.t.Helper()
	wantOK(w.t, w.at(mustCommand(w.t, CmdDepositSettled, 0, funds.Settlement{AccountID: acct, AmountMsat: msat,
		RailRef: ref, Path: funds.PathSpark})))
}

// recompute walks log time to the next leaderboard recompute.
func (w *tradeWorld) recompute() {
	w.t.Helper()
	cadence := int64(growth.CadenceMinutes * 60_000)
	w.walkTo((w.ts/cadence + 1) * cadence)
}

// TestRoiCountsCapitalDepositedDuringTheDay: a day's return was its PnL
// over the equity before the day's first event, so capital deposited
// after that event earned PnL that counted against the small opening
// equity. The review's case: 0.01 BTC at the day's first fill (a 100
// contract buy), then a 1 BTC deposit and a 500,000 contract round trip
// through a 1% move: about 0.042 BTC of PnL on 1.01 BTC of capital showed
// as an ROI of +424%, and one of two accounts taking opposite sides
// tops the roi board by it. From the level the day's base grows by what
// was deposited before each later event: the ROI is about +4.2%.
func TestRoiCountsCapitalDepositedDuringTheDay(t *testing.T) {
	for _, level := range []uint32{growth.LevelRoiCountsDeposits - 1, growth.LevelRoiCountsDeposits} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, ak := w.account(btcBTC / 100)
			wantOK(t, w.order(a, ak, levered(mktOrder("small", "BTC-PERP", "buy", 100), 10)))
			w.deposit(a, btcBTC, "spark-in-big")
			before := w.equity(a)
			wantOK(t, w.order(a, ak, levered(mktOrder("big", "BTC-PERP", "buy", 500_000), 10)))
			wantOK(t, w.print("BTCUSD", usdQ8(101_000)))
			wantOK(t, w.order(a, ak, levered(mktOrder("close", "BTC-PERP", "sell", 500_100), 10)))
			pnl := w.equity(a) - before
			if pnl <= 0 {
				t.Fatalf("the round trip lost %d msat", pnl)
			}
			w.recompute()
			roi := w.trader(a).Snap.Windows[0].RoiQ9 // 7d
			capital := btcBTC/100 + btcBTC
			if level < growth.LevelRoiCountsDeposits {
				if roi < 4*growth.Q9 {
					t.Fatalf("below the level the ROI is the PnL over the opening 0.01 BTC: %d", roi)
				}
				return
			}
			// The base is the opening equity plus the deposit: the ROI is
			// the day's PnL (the first fill's fee included) over 1.01 BTC,
			// rounded down.
			dayPnl := w.equity(a) - capital
			if want := dayPnl * growth.Q9 / capital; roi != want {
				t.Fatalf("roi %d, want %d (pnl %d over %d)", roi, want, dayPnl, capital)
			}
		})
	}
}

// TestRecomputeOnTheHourCountsItsFunding: the boards recompute every 15
// minutes of log time, so every full hour one entry reaches both a
// recompute and a funding boundary. The recompute ran in the growth
// timer, before the markets' timer settled the boundary: the boards
// computed "as of" that entry left out the funding every open position
// had just paid or received (seen on a devnet, 2026-11-27: the 21:00
// boards lacked the 21:00 funding until 21:15). From the level the
// recompute runs after it, and the snapshot's PnL is the equity change.
func TestRecomputeOnTheHourCountsItsFunding(t *testing.T) {
	for _, level := range []uint32{growth.LevelBoardsAfterFunding - 1, growth.LevelBoardsAfterFunding} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			long, lk := w.account(btcBTC)
			short, sk := w.account(btcBTC)
			before := w.equity(long)
			wantOK(t, w.order(long, lk, mktOrder("l1", "BTC-PERP", "buy", 200_000)))
			wantOK(t, w.order(short, sk, mktOrder("s1", "BTC-PERP", "sell", 10_000)))
			hour := int64(3_600_000)
			boundary := (w.ts/hour + 1) * hour
			w.walkTo(boundary - 2_000)
			w.tickTo(boundary + 10) // one entry: the recompute and the boundary
			var paid int64
			for _, f := range w.fundingFlows(long).Funding {
				if int64(f.BoundaryTsMs) == boundary {
					paid += int64(f.PaidMsat)
				}
			}
			tr := w.trader(long)
			if paid >= 0 || tr.Snap == nil {
				t.Fatalf("the long paid %d at the boundary; snapshot %+v", paid, tr.Snap)
			}
			var computed int64
			w.m.Read(func(st *State, _ uint64) { computed = st.Growth.Board.ComputedTsMs })
			if computed != boundary+10 {
				t.Fatalf("recomputed at %d, want the boundary's entry %d", computed, boundary+10)
			}
			change := w.equity(long) - before
			got := tr.Snap.Windows[2].PnlMsat // all
			if level < growth.LevelBoardsAfterFunding {
				if got != change-paid {
					t.Fatalf("below the level: snapshot PnL %d, want %d (the change %d without the funding %d)", got, change-paid, change, paid)
				}
				return
			}
			if got != change {
				t.Fatalf("snapshot PnL %d, want the equity change %d (funding %d)", got, change, paid)
			}
		})
	}
}
