package growth

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// rankedWorld has n traders who pass every gate, so each holds a rank on
// every board of the windows they pass.
func rankedWorld(t *testing.T, n int) *lbWorld {
	w := newLBWorld(t)
	for i := range n {
		acct := fmt.Sprintf("acc_%06d", i)
		for k := range 3 {
			w.event(d0+int64(i*3+k), acct, 1_000_000+int64(i%89)*100, Event{PnlMsat: int64(i%97) * 100, Volume: 50, Trade: true, Close: true, Win: i%2 == 0})
		}
	}
	w.s.OnClockBoards(w.env())
	return w
}

// unrankBySortedIDs is unrank as it was: every trader's id sorted, then
// walked for the decrement and again for the refill.
func unrankBySortedIDs(b *Boards, accountID string) {
	t := b.Traders[accountID]
	for k, rank := range t.Snap.Ranks {
		if rank == 0 {
			continue
		}
		ids := sortedKeys(b.Traders)
		t.Snap.Ranks[k] = 0
		key := boardKey(k/3, k%3)
		for _, id := range ids {
			if o := b.Traders[id]; o.Snap != nil && o.Snap.Ranks[k] > rank {
				o.Snap.Ranks[k]--
			}
		}
		rows := slices.DeleteFunc(b.Rows[key], func(id string) bool { return id == accountID })
		if len(rows) < BoardRowsMax {
			for _, id := range ids {
				if o := b.Traders[id]; o.Snap != nil && o.Snap.Ranks[k] == int64(len(rows)+1) {
					rows = append(rows, id)
					break
				}
			}
		}
		b.Rows[key] = rows
	}
}

// A ranked trader's opt-out walks the traders once without sorting them:
// it sorted every id first, then walked them twice per board, 1.6 MB and
// 60-75 ms of apply per opt-out with 100,000 ranked traders (about 28 ms
// now; each trader may opt out once a recompute). Measured in bytes
// allocated, which do not depend on the machine.
func TestOptOutOfABoardDoesNotSortTheTraders(t *testing.T) {
	const traders = 100_000
	w := rankedWorld(t, traders)
	optOut := func(acct string) {
		on := true
		if ref := w.s.Settings(w.env(), acct, SettingsRequest{OptedOut: &on}); ref != nil {
			t.Fatal(ref)
		}
	}
	if w.s.Board.Traders["acc_000050"].Snap.Ranks[0] == 0 {
		t.Fatal("the trader holds no rank, so the test tests nothing")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	optOut("acc_000050")
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("a ranked trader's opt-out allocated %d bytes with %d traders", got, traders)
	}
	if err := w.s.Board.check(); err != nil {
		t.Fatal(err)
	}
}

// The ranks and rows an opt-out leaves are the sorted walk's, for traders
// on the rows, below them and on no board.
func TestOptOutLeavesTheSortedWalksBoards(t *testing.T) {
	a, b := rankedWorld(t, 400), rankedWorld(t, 400)
	on := true
	for _, acct := range []string{"acc_000003", "acc_000396", "acc_000150", "acc_000201", "acc_000003"} {
		if a.s.Board.Traders[acct].OptedOut {
			continue
		}
		if ref := a.s.Settings(a.env(), acct, SettingsRequest{OptedOut: &on}); ref != nil {
			t.Fatal(ref)
		}
		b.s.Board.Traders[acct].OptedOut = true
		unrankBySortedIDs(b.s.Board, acct)
		for id, ta := range a.s.Board.Traders {
			if !slices.Equal(ta.Snap.Ranks, b.s.Board.Traders[id].Snap.Ranks) {
				t.Fatalf("after %s opted out, %s ranks %v, the sorted walk %v", acct, id, ta.Snap.Ranks, b.s.Board.Traders[id].Snap.Ranks)
			}
		}
		for key, rows := range b.s.Board.Rows {
			if !slices.Equal(a.s.Board.Rows[key], rows) {
				t.Fatalf("after %s opted out, board %s rows differ", acct, key)
			}
		}
	}
}

// recomputeBySortedIDs is OnClockBoards's ranking as it was: every id
// sorted, whole candidates cloned and sorted per board.
func recomputeBySortedIDs(b *Boards, env *Env) {
	today := dayOf(env.NowMs)
	type cand struct {
		id, handle string
		m          Metrics
	}
	eligible := make([][]cand, len(WindowNames))
	for _, id := range sortedKeys(b.Traders) {
		t := b.Traders[id]
		snap := &Snap{Windows: make([]Metrics, len(WindowNames)), Ranks: make([]int64, len(BoardNames)*len(WindowNames)), Curve: t.curve(today)}
		equity := env.Host.Equity(id)
		for wi := range WindowNames {
			m := t.windowMetrics(wi, today)
			snap.Windows[wi] = m
			if !t.OptedOut && b.passes(m, equity) {
				eligible[wi] = append(eligible[wi], cand{id, t.Handle, m})
			}
		}
		t.Snap = snap
	}
	for bi := range BoardNames {
		for wi := range WindowNames {
			cs := slices.Clone(eligible[wi])
			slices.SortFunc(cs, func(x, y cand) int {
				a1, a2, b1, b2 := x.m.PnlMsat, x.m.RoiQ9, y.m.PnlMsat, y.m.RoiQ9
				if bi == 1 {
					a1, a2, b1, b2 = a2, a1, b2, b1
				}
				switch {
				case a1 != b1:
					return cmpDesc(a1, b1)
				case a2 != b2:
					return cmpDesc(a2, b2)
				}
				return strings.Compare(x.handle, y.handle)
			})
			rows := []string{}
			for i, c := range cs {
				b.Traders[c.id].Snap.Ranks[bi*3+wi] = int64(i + 1)
				if i < BoardRowsMax {
					rows = append(rows, c.id)
				}
			}
			b.Rows[boardKey(bi, wi)] = rows
		}
	}
}

// The recompute's snapshots, ranks and rows are the sorted walk's, with
// ties on PnL and ROI broken by handle, opted-out traders and traders
// below a gate in the mix.
func TestRecomputeRanksAsTheSortedWalk(t *testing.T) {
	a, b := rankedWorld(t, 600), rankedWorld(t, 600)
	for _, w := range []*lbWorld{a, b} {
		for i := range 600 {
			if i%7 == 0 {
				w.s.Board.Traders[fmt.Sprintf("acc_%06d", i)].OptedOut = true
			}
			if i%11 == 0 {
				w.equity[fmt.Sprintf("acc_%06d", i)] = 1 // below the equity gate
			}
		}
		w.now += int64(CadenceMinutes * 60_000)
	}
	a.s.OnClockBoards(a.env())
	recomputeBySortedIDs(b.s.Board, b.env())
	for id, ta := range a.s.Board.Traders {
		tb := b.s.Board.Traders[id]
		if !slices.Equal(ta.Snap.Ranks, tb.Snap.Ranks) || !slices.Equal(ta.Snap.Windows, tb.Snap.Windows) || !slices.Equal(ta.Snap.Curve, tb.Snap.Curve) {
			t.Fatalf("%s: snapshot %+v, the sorted walk's %+v", id, *ta.Snap, *tb.Snap)
		}
	}
	for key, rows := range b.s.Board.Rows {
		if !slices.Equal(a.s.Board.Rows[key], rows) {
			t.Fatalf("board %s rows differ", key)
		}
	}
	if len(a.s.Board.Rows["pnl/30d"]) != BoardRowsMax {
		t.Fatalf("%d rows on pnl/30d: the ranking is too thin to test", len(a.s.Board.Rows["pnl/30d"]))
	}
}

// A recompute allocates what the traders' new snapshots need, not a
// sorted copy of every id and six clones of every candidate's whole
// metrics: about 2,390 bytes a trader before, 1,250 now (100,000 traders:
// 239 MB and 0.71 s per recompute before, 125 MB and 0.50 s now, every
// CadenceMinutes on every replica). Measured in bytes, not time.
func TestRecomputeAllocatesTheSnapshotsNotCopies(t *testing.T) {
	const traders = 50_000
	w := rankedWorld(t, traders)
	w.now += int64(CadenceMinutes * 60_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w.s.OnClockBoards(w.env())
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / traders; per > 1_700 {
		t.Fatalf("a recompute allocated %d bytes a trader with %d traders", per, traders)
	}
}
