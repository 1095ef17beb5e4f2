package fsm

import (
	"testing"

	"github.com/perpd/perpd/fsm/growth"
)

func (w *tradeWorld) equity(acct string) (e int64) {
	w.m.Read(func(st *State, _ uint64) { e = AccountEquityMsat(st, acct) })
	return e
}

func (w *tradeWorld) trader(acct string) (t growth.Trader) {
	w.t.Helper()
	w.m.Read(func(st *State, _ uint64) {
		p := st.Growth.Board.Traders[acct]
		if p == nil {
			w.t.Fatalf("%s has no leaderboard record", acct)
		}
		t = *p
	})
	return t
}

// The leaderboards watch the machine's own events: a day's PnL is exactly
// the change of ledger equity that the account's fills, funding flows and
// liquidations made (here: a round trip through a price move, and a
// referee discount), its opening equity the equity before the first of
// them; a recompute on the cadence ranks the trader once the gates pass.
func TestLeaderboardFollowsLedgerEquity(t *testing.T) {
	w := newTradeWorld(t)
	ref, refKey := w.account(btcBTC)
	wantOK(t, w.createCode(ref, refKey, "LEADER"))
	a, ak := w.account(btcBTC)
	wantOK(t, w.bind(a, ak, "leader"))
	before := w.equity(a)
	wantOK(t, w.order(a, ak, levered(mktOrder("o1", "BTC-PERP", "buy", 30_000), 5)))
	wantOK(t, w.print("BTCUSD", usdQ8(101_000)))
	wantOK(t, w.order(a, ak, levered(mktOrder("o2", "BTC-PERP", "sell", 20_000), 5)))
	wantOK(t, w.print("BTCUSD", usdQ8(99_000)))
	wantOK(t, w.order(a, ak, levered(mktOrder("o3", "BTC-PERP", "sell", 10_000), 5)))
	after := w.equity(a)
	tr := w.trader(a)
	d := tr.Days[len(tr.Days)-1]
	if d.PnlMsat != after-before || d.OpenEquityMsat != before || d.Trades != 3 || d.Volume != 60_000 || d.Closes != 2 || after-before == 0 {
		t.Fatalf("day %+v, equity %d -> %d (change %d)", d, before, after, after-before)
	}
	if d.Wins != 1 { // the close at 101,000 won, the one at 99,000 lost
		t.Fatalf("wins %d", d.Wins)
	}
	if tr.Handle == "" || tr.SinceTsMs == 0 {
		t.Fatalf("trader %+v", tr)
	}
	// The next recompute (cadence 15 minutes of log time) ranks it.
	w.walkTo((w.ts/(growth.CadenceMinutes*60_000) + 1) * growth.CadenceMinutes * 60_000)
	var board growth.BoardView
	w.m.Read(func(st *State, _ uint64) { board = st.Growth.BoardOf(0, 0, 10, true) })
	if len(board.Rows) != 1 || board.Rows[0].Handle != tr.Handle || int64(board.Rows[0].PnlMsat) != after-before ||
		board.ComputedTsMs == nil || int64(*board.ComputedTsMs) != w.ts {
		t.Fatalf("board %+v (computed at %v, now %d)", board.Rows, board.ComputedTsMs, w.ts)
	}
	wantRoi := (after - before) * 1e9 / before
	if (after-before)*1e9%before != 0 && after < before {
		wantRoi-- // rounded down
	}
	if int64(board.Rows[0].RoiQ9) != wantRoi {
		t.Fatalf("roi %d, want %d", board.Rows[0].RoiQ9, wantRoi)
	}
}

// Funding flows and liquidations count too: a 100x long that pays funding
// across an hour boundary and is then liquidated has a day PnL equal to
// its equity change.
func TestLeaderboardCountsFundingAndLiquidations(t *testing.T) {
	w := newTradeWorld(t)
	long, lk := w.account(btcBTC)
	short, sk := w.account(btcBTC)
	before := w.equity(long)
	wantOK(t, w.order(long, lk, mktOrder("l1", "BTC-PERP", "buy", 200_000)))
	wantOK(t, w.order(short, sk, mktOrder("s1", "BTC-PERP", "sell", 10_000)))
	hour := int64(3_600_000)
	w.walkTo((w.ts/hour+1)*hour + 5_000)
	flows := w.fundingFlows(long).Funding
	if len(flows) == 0 {
		t.Fatal("no funding flow across the boundary")
	}
	wantOK(t, w.print("BTCUSD", usdQ8(98_000)))
	if len(w.liquidations(long).Liquidations) == 0 {
		t.Fatal("not liquidated")
	}
	tr := w.trader(long)
	var pnl int64
	var closes int64
	for _, d := range tr.Days {
		pnl += d.PnlMsat
		closes += d.Closes
	}
	if pnl != w.equity(long)-before || closes == 0 || pnl >= 0 {
		t.Fatalf("pnl %d, equity change %d, closes %d", pnl, w.equity(long)-before, closes)
	}
}
