package market

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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
