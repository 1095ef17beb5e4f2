package market

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/btree"
)

// items is a tree's content in its order.
func items(t *btree.BTreeG[indexItem]) []indexItem {
	var out []indexItem
	t.Scan(func(it indexItem) bool { out = append(out, it); return true })
	return out
}

// TestPriceIndexMovesAsRebuilt moves entries the way a funding boundary
// does (a little, often not at all, sometimes to the other direction),
// with fresh ids and removals between, and after every step compares both
// trees and what a print finds with an index rebuilt from Entries alone
// (the slow path). It fails if insert keeps an entry it should move (the
// unchanged-entry shortcut taking a changed direction or level for the
// same) or a path hint puts one out of order.
func TestPriceIndexMovesAsRebuilt(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		x := NewPriceIndex()
		const ids = 300
		for step := range 1_500 {
			id := fmt.Sprintf("acc_%04d", rng.IntN(ids))
			old, had := x.Entries[id]
			level := int64(1 + rng.IntN(500))
			dir := Rising
			if rng.IntN(2) == 0 {
				dir = Falling
			}
			switch r := rng.IntN(10); {
			case r < 4 && had: // unchanged
				level, dir = old.LevelQ8, old.Dir
			case r < 6 && had: // same level, other direction
				level, dir = old.LevelQ8, -old.Dir
			case r < 8 && had: // a small move
				level = max(old.LevelQ8+int64(rng.IntN(5))-2, 1)
				dir = old.Dir
			case r == 9:
				x.Remove(id)
				level = 0
			}
			if level > 0 {
				if err := x.InsertPast(id, level, dir); err != nil {
					t.Fatal(err)
				}
				if e := x.Entries[id]; e.LevelQ8 != level || e.Dir != dir {
					t.Fatalf("seed %d step %d: %s holds %+v, want %d/%d", seed, step, id, e, level, dir)
				}
			}
			slow := &PriceIndex{Entries: maps.Clone(x.Entries)}
			slow.Rebuild()
			if !slices.Equal(items(x.rising), items(slow.rising)) || !slices.Equal(items(x.falling), items(slow.falling)) {
				t.Fatalf("seed %d step %d: trees differ from the rebuilt ones", seed, step)
			}
			a, b := int64(rng.IntN(502)), int64(rng.IntN(502))
			if got, want := x.Crossed(a, b), slow.Crossed(a, b); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: crossed %d->%d %v, rebuilt %v", seed, step, a, b, got, want)
			}
		}
	}
}

// TestPriceIndexAsSortedSlice runs random inserts, moves (unchanged, a
// little, to the other direction) and removals against a naive model: a
// map of entries whose crossed set is found by filtering and sorting it.
// Few ids (down to one) empty the trees often, so a hint taken from a
// removal meets a tree that shrank to nothing or lost a level. It fails if
// an entry is kept where it should move, or lost, or met out of order.
func TestPriceIndexAsSortedSlice(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 13))
		ids := []int{1, 2, 5, 40, 600, 3000}[seed%6]
		x := NewPriceIndex()
		model := map[string]IndexEntry{}
		for step := range 4_000 {
			id := fmt.Sprintf("a%05d", rng.IntN(ids))
			old, had := model[id]
			e := IndexEntry{LevelQ8: int64(1 + rng.IntN(200)), Dir: Rising}
			if rng.IntN(2) == 0 {
				e.Dir = Falling
			}
			switch r := rng.IntN(10); {
			case r < 3 && had:
				e = old
			case r < 5 && had:
				e = IndexEntry{LevelQ8: old.LevelQ8, Dir: -old.Dir}
			case r < 7 && had:
				e = IndexEntry{LevelQ8: max(old.LevelQ8+int64(rng.IntN(3))-1, 1), Dir: old.Dir}
			case r >= 8:
				if got := x.Remove(id); got != had {
					t.Fatalf("seed %d step %d: remove %s reported %v, model %v", seed, step, id, got, had)
				}
				delete(model, id)
				e = IndexEntry{}
			}
			if e.LevelQ8 > 0 {
				if err := x.Insert(id, e.LevelQ8, e.Dir); err != nil {
					t.Fatal(err)
				}
				model[id] = e
			}
			if x.Len() != len(model) || x.rising.Len()+x.falling.Len() != len(model) {
				t.Fatalf("seed %d step %d: %d entries, trees %d+%d, model %d", seed, step, x.Len(), x.rising.Len(), x.falling.Len(), len(model))
			}
			a, b := int64(rng.IntN(202)), int64(rng.IntN(202))
			if got, want := x.Crossed(a, b), naiveCrossed(model, a, b); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: crossed %d->%d %v, model %v", seed, step, a, b, got, want)
			}
		}
	}
}

// naiveCrossed is Crossed by a scan and a sort of every entry.
func naiveCrossed(model map[string]IndexEntry, oldQ8, newQ8 int64) []string {
	type hit struct {
		level int64
		id    string
	}
	var hits []hit
	for id, e := range model {
		switch {
		case newQ8 > oldQ8 && e.Dir == Rising && e.LevelQ8 > oldQ8 && e.LevelQ8 <= newQ8,
			newQ8 < oldQ8 && e.Dir == Falling && e.LevelQ8 < oldQ8 && e.LevelQ8 >= newQ8:
			hits = append(hits, hit{e.LevelQ8, id})
		}
	}
	rising := newQ8 > oldQ8
	slices.SortFunc(hits, func(p, q hit) int {
		if p.level != q.level {
			if (p.level < q.level) == rising {
				return -1
			}
			return 1
		}
		return strings.Compare(p.id, q.id)
	})
	var out []string
	for _, h := range hits {
		out = append(out, h.id)
	}
	return out
}
