package growth

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
)

// The memo never changes what a recompute gives: across recomputes with
// fills, funding-like flows, deposits (equity moves), opt-outs, gate
// changes, day roll-overs and memos dropped (as a restore drops them),
// every trader's windows, curve and ranks and every board's rows equal
// those of recomputeBySortedIDs, which folds every day from scratch on one
// goroutine. It holds with the recompute on one core and with its refolds
// and sorts split over several (the grains lowered to this state's size).
func TestRecomputeWithMemosAsFromScratch(t *testing.T) {
	t.Run("one core", func(t *testing.T) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		recomputeAsFromScratch(t)
	})
	t.Run("several cores", func(t *testing.T) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
		refold, sorts := boardsRefoldGrain, boardsSortParallelFrom
		defer func() { boardsRefoldGrain, boardsSortParallelFrom = refold, sorts }()
		boardsRefoldGrain, boardsSortParallelFrom = 16, 1
		recomputeAsFromScratch(t)
	})
}

func recomputeAsFromScratch(t *testing.T) {
	const traders = 400
	a, b := newLBWorld(t), newLBWorld(t)
	ids := make([]string, traders)
	for i := range ids {
		ids[i] = fmt.Sprintf("acc_%06d", i)
	}
	step := func(round int) {
		for _, w := range []*lbWorld{a, b} {
			for i, id := range ids {
				if (i+round)%3 != 0 {
					continue // most traders change; some do not
				}
				pnl := int64((i*7+round*13)%201-100) * 1_000
				w.event(w.now, id, 2_000_000+int64((i*31+round)%997)*1_000, Event{PnlMsat: pnl, Volume: 40, Trade: true, Close: round%2 == 0, Win: pnl > 0})
			}
			// A deposit moves equity across the gate with no event.
			w.equity[ids[round%traders]] = int64(round%2) * 50_000
			if tr := w.s.Board.Traders[ids[(round*5)%traders]]; tr != nil {
				tr.OptedOut = !tr.OptedOut
			}
			if round == 9 {
				w.s.Board.Gates.MinTrades = 4
			}
		}
	}
	for round := range 40 {
		// Every fourth round a new day starts (some traders quiet on it).
		adv := int64(CadenceMinutes * 60_000)
		if round%4 == 3 {
			adv = DayMs
		}
		a.now, b.now = d0+int64(round)*DayMs/4+adv, d0+int64(round)*DayMs/4+adv
		step(round)
		if round%7 == 6 {
			for _, tr := range a.s.Board.Traders {
				tr.memo = boardMemo{} // a restore's traders hold no memo
			}
		}
		a.s.Board.NextTsMs = 0
		a.s.OnClockBoards(a.env())
		recomputeBySortedIDs(b.s.Board, b.env())
		ranked := 0
		for id, ta := range a.s.Board.Traders {
			tb := b.s.Board.Traders[id]
			if !slices.Equal(ta.Snap.Ranks, tb.Snap.Ranks) || !slices.Equal(ta.Snap.Windows, tb.Snap.Windows) ||
				!slices.Equal(ta.Snap.Curve, tb.Snap.Curve) || (ta.Snap.Curve == nil) != (tb.Snap.Curve == nil) {
				t.Fatalf("round %d, %s: snapshot %+v, from scratch %+v", round, id, *ta.Snap, *tb.Snap)
			}
			if ta.Snap.Ranks[1] != 0 {
				ranked++
			}
		}
		for key, rows := range b.s.Board.Rows {
			if !slices.Equal(a.s.Board.Rows[key], rows) {
				t.Fatalf("round %d: board %s rows differ", round, key)
			}
		}
		if round >= 12 && ranked < traders/4 {
			t.Fatalf("round %d: %d ranked on pnl/30d: too thin to test", round, ranked)
		}
	}
}
