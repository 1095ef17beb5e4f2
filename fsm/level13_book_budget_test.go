package fsm

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
)

// Feature level 13 (trade.LevelBookBudget, usdx.LevelQueueDrainBudget):
// one act on a book does at most trade.BookActBudget, and the next entries
// continue what it left; one print pays at most usdx.QueueDrainBudget
// queued redemptions.

func countKind(evs []Event, kind string) (n int) {
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

func (w *tradeWorld) booksBehind() (ids []string) {
	w.m.Read(func(st *State, _ uint64) { ids = slices.Clone(st.Trade.BooksBehind) })
	return ids
}

// restingBuys places n one-contract BTC-PERP buy limits at limitQ8, a full
// account's worth at a time, and returns the accounts. The per-entry
// invariant check is off while they go in (it is O(state)).
func (w *tradeWorld) restingBuys(n int, limitQ8 int64) []string {
	w.t.Helper()
	per := trade.RestingOrdersPerAccountMax
	var accts []string
	for placed := 0; placed < n; {
		wantOK(w.t, w.print("BTCUSD", usdQ8(100_000))) // keep the oracle fresh
		a, k := w.account(btcBTC)
		for j := 0; j < per && placed < n; j++ {
			created(w.t.(*testing.T), w.order(a, k, limitOrder(fmt.Sprintf("r%d", j), "BTC-PERP", "buy", 1, limitQ8)), trade.StatusResting)
			placed++
		}
		accts = append(accts, a)
	}
	return accts
}

// TestAPrintFillsAtMostABudgetOfCrossedOrders: a print crossing more
// resting orders than the budget fills the budget, the book is left
// behind, and the next entry (a tick) fills the rest at its own print.
// Below the level one print fills them all. A restored replica goes on
// exactly as the one it came from.
func TestAPrintFillsAtMostABudgetOfCrossedOrders(t *testing.T) {
	n := trade.BookActBudget + 300
	for _, level := range []uint32{trade.LevelBookBudget - 1, trade.LevelBookBudget} {
		w := newTradeWorldAt(t, level)
		w.unchecked, w.m.opts.CheckInvariants = true, false
		w.restingBuys(n, usdQ8(99_000))
		// Checked after each entry from here: a book behind is consistent.
		w.unchecked, w.m.opts.CheckInvariants = false, true
		from := len(w.events)
		wantOK(t, w.print("BTCUSD", usdQ8(98_000)))
		first := countKind(w.events[from:], "fill")
		if level < trade.LevelBookBudget {
			if first != n || len(w.booksBehind()) != 0 {
				t.Fatalf("level %d: %d fills at the print (behind %v), want all %d", level, first, w.booksBehind(), n)
			}
			continue
		}
		if first != trade.BookActBudget {
			t.Fatalf("level %d: %d fills at the print, want the budget %d", level, first, trade.BookActBudget)
		}
		if got := w.booksBehind(); !slices.Equal(got, []string{"BTC-PERP"}) {
			t.Fatalf("books behind %v after a print past the budget", got)
		}
		// A snapshot taken now carries the book's place in line.
		dst := w.restored()
		w.mirror = dst
		rest := countKind(w.tickTo(w.ts+1_000), "fill")
		if first+rest != n || len(w.booksBehind()) != 0 {
			t.Fatalf("the next entry filled %d (behind %v), want the other %d", rest, w.booksBehind(), n-first)
		}
		if w.hashNow() != dst.hash() {
			t.Fatal("a replica restored while the book was behind hashes differently after the continuation")
		}
		w.mirror = nil
	}
}

// TestACrossedOrderTheBudgetLeftWaitsForThePrice: what a print crossed but
// the budget left is checked at the next entries against the print of
// their time. The entry of the print that brings the price back first
// continues at the old price (its timers run before its command), then the
// new print finds the rest on the near side of its mid: they rest,
// unfilled and still indexed, and the next fall fills them.
func TestACrossedOrderTheBudgetLeftWaitsForThePrice(t *testing.T) {
	left := 200
	n := 2*trade.BookActBudget + left
	w := newTradeWorldAt(t, trade.LevelBookBudget)
	w.unchecked, w.m.opts.CheckInvariants = true, false
	accts := w.restingBuys(n, usdQ8(99_000))
	from := len(w.events)
	wantOK(t, w.print("BTCUSD", usdQ8(98_000)))
	wantOK(t, w.print("BTCUSD", usdQ8(100_000))) // back before the rest was met
	if got := countKind(w.events[from:], "fill"); got != 2*trade.BookActBudget {
		t.Fatalf("%d fills, want two budgets %d", got, 2*trade.BookActBudget)
	}
	if got := w.booksBehind(); len(got) != 0 {
		t.Fatalf("books behind %v once nothing is left on the far side of the mid", got)
	}
	last := accts[len(accts)-1]
	if o := w.orderOf(last, fmt.Sprintf("r%d", (n-1)%trade.RestingOrdersPerAccountMax)); o.Status != trade.StatusAccepted {
		t.Fatalf("the newest order %s, want still resting", o.Status)
	}
	w.unchecked, w.m.opts.CheckInvariants = false, true
	wantOK(t, w.print("BTCUSD", usdQ8(99_500))) // checked: every left order still indexed
	from = len(w.events)
	wantOK(t, w.print("BTCUSD", usdQ8(98_500)))
	if got := countKind(w.events[from:], "fill"); got != left {
		t.Fatalf("the next fall filled %d, want the %d left", got, left)
	}
}

// liquidationBacklog opens longs 50x BTC-PERP longs (10 contracts each),
// each account with 199 far-away resting buys, at a fresh print of
// 100,000: a print at 97,000 makes them all due.
func (w *tradeWorld) liquidationBacklog(longs int) {
	w.t.Helper()
	t := w.t.(*testing.T)
	for range longs {
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		a, k := w.account(btcBTC / 1000)
		r := mktOrder("m", "BTC-PERP", "buy", 10)
		r.Leverage = 50
		created(t, w.order(a, k, r), trade.StatusFilled)
		for j := range trade.RestingOrdersPerAccountMax - 1 {
			created(t, w.order(a, k, limitOrder(fmt.Sprintf("r%d", j), "BTC-PERP", "buy", 1, usdQ8(50_000))), trade.StatusResting)
		}
	}
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
}

// A liquidation costs one unit and one per order it cancels: 200 here.
const liquidationsPerBudget = trade.BookActBudget / trade.RestingOrdersPerAccountMax

// TestALiquidationSweepStopsAtTheBudgetAndTheBookWaitsForIt: liquidations
// count with the orders they cancel. A print that makes more due than one
// budget liquidates part; the rest, and a resting order the same print
// crossed, wait for the next entry: risk first, as within one print. The
// state in between passes the invariants (positions due are expected
// while their book is behind).
func TestALiquidationSweepStopsAtTheBudgetAndTheBookWaitsForIt(t *testing.T) {
	longs := liquidationsPerBudget + 5
	for _, level := range []uint32{trade.LevelBookBudget - 1, trade.LevelBookBudget} {
		w := newTradeWorldAt(t, level)
		w.unchecked, w.m.opts.CheckInvariants = true, false
		w.liquidationBacklog(longs)
		h, hk := w.account(btcBTC)
		created(t, w.order(h, hk, limitOrder("mine", "BTC-PERP", "buy", 1, usdQ8(98_000))), trade.StatusResting)
		w.unchecked, w.m.opts.CheckInvariants = false, true // after each entry from here
		from := len(w.events)
		wantOK(t, w.print("BTCUSD", usdQ8(97_000)))
		liqs := countKind(w.events[from:], "liquidation")
		if level < trade.LevelBookBudget {
			if liqs != longs || w.orderOf(h, "mine").Status != trade.StatusFilled {
				t.Fatalf("level %d: %d liquidations, mine %s; want all %d and filled", level, liqs, w.orderOf(h, "mine").Status, longs)
			}
			continue
		}
		if liqs != liquidationsPerBudget {
			t.Fatalf("%d liquidations at the print, want the budget's %d", liqs, liquidationsPerBudget)
		}
		if o := w.orderOf(h, "mine"); o.Status != trade.StatusAccepted {
			t.Fatalf("a crossed order filled (%s) while liquidations were left due", o.Status)
		}
		next := w.tickTo(w.ts + 1_000)
		if got := countKind(next, "liquidation"); liqs+got != longs {
			t.Fatalf("the next entry liquidated %d, want the other %d", got, longs-liqs)
		}
		if o := w.orderOf(h, "mine"); o.Status != trade.StatusFilled {
			t.Fatalf("the crossed order is %s after the sweep finished, want filled", o.Status)
		}
		if got := w.booksBehind(); len(got) != 0 {
			t.Fatalf("books behind %v after the continuation", got)
		}
	}
}

// TestACrossedOrderPaysForTheLegsItCancels: a crossed limit order whose
// fill closes its account's position cancels the account's armed bracket
// legs (198 here); they count against the budget, so one print ends at
// most a budget of orders and one account's more, not 80 accounts' worth
// for 80 units (found by a review of the change).
func TestACrossedOrderPaysForTheLegsItCancels(t *testing.T) {
	const brackets = 99 // 198 armed legs and a closing limit: 199 live orders
	accounts := 80
	w := newTradeWorldAt(t, trade.LevelBookBudget)
	w.unchecked, w.m.opts.CheckInvariants = true, false
	for range accounts {
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		a, k := w.account(btcBTC)
		for j := range brackets {
			created(t, w.order(a, k, bracket(fmt.Sprintf("b%d", j), "buy", 1, 0, usdQ8(50_000+int64(j)*10), usdQ8(150_000+int64(j)*10))), trade.StatusFilled)
		}
		created(t, w.order(a, k, limitOrder("close", "BTC-PERP", "sell", brackets, usdQ8(101_000))), trade.StatusResting)
	}
	from := len(w.events)
	wantOK(t, w.print("BTCUSD", usdQ8(102_000)))
	legs := countKind(w.events[from:], "trigger")
	if legs > trade.BookActBudget+trade.RestingOrdersPerAccountMax {
		t.Fatalf("one print cancelled %d legs, past the budget by more than one account's orders", legs)
	}
	if got := w.booksBehind(); !slices.Equal(got, []string{"BTC-PERP"}) {
		t.Fatalf("books behind %v after a print past the budget", got)
	}
	w.tickTo(w.ts + 1_000)
	if got := countKind(w.events[from:], "fill"); got != accounts {
		t.Fatalf("%d closing fills after the continuation, want %d", got, accounts)
	}
}

// TestQueuedRedemptionsDoNotSweepPastTheBudget: each queued redemption a
// print pays trades the hedge with a market order, and an order's sweep
// does not start a budget of its own while its book is behind; else one
// print's drain liquidated every due position of the hedge market (found
// by a review of the change).
func TestQueuedRedemptionsDoNotSweepPastTheBudget(t *testing.T) {
	w := &usdxWorld{tradeWorld: newTradeWorldAt(t, trade.LevelBookBudget)}
	w.unchecked, w.m.opts.CheckInvariants = true, false
	r, rk := w.account(btcBTC)
	w.mintN(r, rk, 10)
	longs := liquidationsPerBudget + 5
	w.liquidationBacklog(longs)
	w.ts += 120_000 // stale: redemptions queue
	for j := range 3 {
		res := w.cmd(r, rk, CmdUSDxRedeem, USDxAmountPayload{ID: fmt.Sprintf("redq-%d", j), Amount: 2}, "")
		if res.Status != http.StatusCreated {
			t.Fatalf("redeem: %d %s", res.Status, res.Body)
		}
	}
	from := len(w.events)
	wantOK(t, w.print("BTCUSD", usdQ8(97_000)))
	if liqs := countKind(w.events[from:], "liquidation"); liqs != liquidationsPerBudget {
		t.Fatalf("one print entry liquidated %d, want one budget's %d", liqs, liquidationsPerBudget)
	}
	if left := len(w.st().u.Queue); left != 0 {
		t.Fatalf("%d redemptions still queued", left)
	}
}

// TestABookBehindWaitsForAHaltedMarket: a halted market's book does not
// act, not even to finish what a budget left; resumed, it finishes. (The
// halting entry's timers continue once before its command halts it.)
func TestABookBehindWaitsForAHaltedMarket(t *testing.T) {
	left := 100
	n := 2*trade.BookActBudget + left
	w := newTradeWorldAt(t, trade.LevelBookBudget)
	w.unchecked, w.m.opts.CheckInvariants = true, false
	w.restingBuys(n, usdQ8(99_000))
	wantOK(t, w.print("BTCUSD", usdQ8(98_000)))
	halted, live := market.StatusHalted, market.StatusLive
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
	if got := countKind(w.tickTo(w.ts+1_000), "fill"); got != 0 {
		t.Fatalf("a halted market's book filled %d", got)
	}
	if got := w.booksBehind(); !slices.Equal(got, []string{"BTC-PERP"}) {
		t.Fatalf("books behind %v while halted", got)
	}
	wantOK(t, w.print("BTCUSD", usdQ8(98_000))) // fresh again when it resumes
	from := len(w.events)
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live})
	if got := countKind(w.events[from:], "fill"); got != left {
		t.Fatalf("resuming filled %d, want the %d left", got, left)
	}
	if got := w.booksBehind(); len(got) != 0 {
		t.Fatalf("books behind %v after resuming", got)
	}
	w.unchecked, w.m.opts.CheckInvariants = false, true
	w.tickTo(w.ts + 1_000)
}

// TestAPrintPaysAtMostABudgetOfQueuedRedemptions: redemptions queued over
// an oracle outage are paid at the next fresh print, from level 13 at most
// usdx.QueueDrainBudget of them, oldest first; the next print pays the
// rest. Below it one print pays them all.
func TestAPrintPaysAtMostABudgetOfQueuedRedemptions(t *testing.T) {
	per := usdx.QueuedPerAccountMax
	accounts := usdx.QueueDrainBudget/per + 2
	for _, level := range []uint32{usdx.LevelQueueDrainBudget - 1, usdx.LevelQueueDrainBudget} {
		w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
		w.unchecked, w.m.opts.CheckInvariants = true, false
		type trader struct{ acct, key string }
		var ts []trader
		for range accounts {
			a, k := w.account(btcBTC)
			w.mintN(a, k, int64(2*per))
			ts = append(ts, trader{a, k})
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		}
		w.ts += 120_000 // the oracle goes stale: redemptions queue
		for i, tr := range ts {
			for j := range per {
				res := w.cmd(tr.acct, tr.key, CmdUSDxRedeem, USDxAmountPayload{ID: fmt.Sprintf("r%d-%d", i, j), Amount: 2}, "")
				if res.Status != http.StatusCreated {
					t.Fatalf("redeem: %d %s", res.Status, res.Body)
				}
			}
		}
		queued := accounts * per
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		left := len(w.st().u.Queue)
		if level < usdx.LevelQueueDrainBudget {
			if left != 0 {
				t.Fatalf("level %d: %d still queued after the print, want none", level, left)
			}
			continue
		}
		if queued-left != usdx.QueueDrainBudget {
			t.Fatalf("the print paid %d of %d queued, want the budget %d", queued-left, queued, usdx.QueueDrainBudget)
		}
		if h := w.holder(ts[len(ts)-1].acct); h.Pending != int64(2*per) {
			t.Fatalf("the newest redeemer was paid first: %+v", h)
		}
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
		if left := len(w.st().u.Queue); left != 0 {
			t.Fatalf("%d still queued after the second print", left)
		}
		if h := w.holder(ts[len(ts)-1].acct); h.Pending != 0 {
			t.Fatalf("the newest redeemer still waits: %+v", h)
		}
		w.unchecked, w.m.opts.CheckInvariants = false, true
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	}
}
