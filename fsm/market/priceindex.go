package market

import (
	"errors"
	"fmt"

	"github.com/tidwall/btree"
)

// PriceIndexEntriesMax bounds one index (one market's resting triggers and
// liquidation levels); the trading engine refuses new entries beyond it.
const PriceIndexEntriesMax = 1_000_000

// Direction says which way the price must move to reach an entry.
type Direction int8

const (
	// Rising entries fire when the price rises to >= their level
	// (a buy stop, a short's liquidation price, a long's take-profit).
	Rising Direction = 1
	// Falling entries fire when the price falls to <= their level
	// (a sell stop, a long's liquidation price, a short's take-profit).
	Falling Direction = -1
)

// Errors of PriceIndex.Insert.
var (
	ErrIndexFull  = errors.New("price index full")
	ErrIndexEntry = errors.New("invalid price index entry")
)

// IndexEntry is one resting level.
type IndexEntry struct {
	LevelQ8 int64
	Dir     Direction
}

// PriceIndex holds the price levels of one market in two ordered sets, so
// that a print finds what it crossed in O(log n + k) instead of scanning
// every order and position.
//
// Entries is the canonical content and the only field a snapshot encodes;
// the two B-trees are derived from it, built on first use after a decode (or
// by Rebuild), and never serialised. Like State, it is used from apply only
// and is not safe for concurrent use.
type PriceIndex struct {
	Entries map[string]IndexEntry

	rising  *btree.BTreeG[indexItem] // ascending level, then id
	falling *btree.BTreeG[indexItem] // descending level, then id
}

type indexItem struct {
	level int64
	id    string
}

func risingLess(a, b indexItem) bool {
	if a.level != b.level {
		return a.level < b.level
	}
	return a.id < b.id
}

// fallingLess orders by descending level so that a falling price meets the
// entries in ascending order of the tree, ids still ascending within a level.
func fallingLess(a, b indexItem) bool {
	if a.level != b.level {
		return a.level > b.level
	}
	return a.id < b.id
}

// NewPriceIndex returns an empty index.
func NewPriceIndex() *PriceIndex {
	x := &PriceIndex{Entries: map[string]IndexEntry{}}
	x.Rebuild()
	return x
}

// Rebuild derives the trees from Entries. The core calls it after decoding a
// snapshot; the other methods also call it when the trees are missing.
// Insertion order does not matter: a B-tree's content is its sorted set.
func (x *PriceIndex) Rebuild() {
	opts := btree.Options{NoLocks: true}
	x.rising = btree.NewBTreeGOptions(risingLess, opts)
	x.falling = btree.NewBTreeGOptions(fallingLess, opts)
	for id, e := range x.Entries {
		x.tree(e.Dir).Set(indexItem{level: e.LevelQ8, id: id})
	}
}

func (x *PriceIndex) ensure() {
	if x.Entries == nil {
		x.Entries = map[string]IndexEntry{}
	}
	if x.rising == nil || x.falling == nil {
		x.Rebuild()
	}
}

func (x *PriceIndex) tree(d Direction) *btree.BTreeG[indexItem] {
	if d == Rising {
		return x.rising
	}
	return x.falling
}

// Insert adds id at levelQ8, or moves it there if it is already present.
// A new id is refused once the index holds PriceIndexEntriesMax.
func (x *PriceIndex) Insert(id string, levelQ8 int64, dir Direction) error {
	return x.insert(id, levelQ8, dir, true)
}

// InsertPast is Insert without the bound on new ids, for an entry whose
// owner already exists and must be indexed (a position that became
// liquidatable): the bound is kept where things are opened, and such
// owners are bounded themselves (one position per account and market).
func (x *PriceIndex) InsertPast(id string, levelQ8 int64, dir Direction) error {
	return x.insert(id, levelQ8, dir, false)
}

func (x *PriceIndex) insert(id string, levelQ8 int64, dir Direction, bounded bool) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty id", ErrIndexEntry)
	case levelQ8 <= 0 || levelQ8 > PriceQ8Max:
		return fmt.Errorf("%w: level %d outside [1, %d]", ErrIndexEntry, levelQ8, PriceQ8Max)
	case dir != Rising && dir != Falling:
		return fmt.Errorf("%w: direction %d", ErrIndexEntry, dir)
	}
	x.ensure()
	e := IndexEntry{LevelQ8: levelQ8, Dir: dir}
	// The path the removal took is where a moved entry usually lands (a
	// funding flow moves a liquidation level a little): the hint spares
	// the second descent its searches. It changes no result.
	var hint btree.PathHint
	if old, ok := x.Entries[id]; ok {
		if old == e {
			return nil // already there: nothing moves
		}
		x.tree(old.Dir).DeleteHint(indexItem{level: old.LevelQ8, id: id}, &hint)
		if old.Dir != dir {
			hint = btree.PathHint{}
		}
	} else if bounded && len(x.Entries) >= PriceIndexEntriesMax {
		return fmt.Errorf("%w: %d entries", ErrIndexFull, PriceIndexEntriesMax)
	}
	x.Entries[id] = e
	x.tree(dir).SetHint(indexItem{level: levelQ8, id: id}, &hint)
	return nil
}

// Remove deletes id and reports whether it was present.
func (x *PriceIndex) Remove(id string) bool {
	x.ensure()
	old, ok := x.Entries[id]
	if !ok {
		return false
	}
	delete(x.Entries, id)
	x.tree(old.Dir).Delete(indexItem{level: old.LevelQ8, id: id})
	return true
}

// Len returns the number of entries.
func (x *PriceIndex) Len() int { return len(x.Entries) }

// Crossed returns the ids whose level the price passed moving from oldMidQ8
// to newMidQ8: on a rise, Rising entries with old < level <= new; on a fall,
// Falling entries with new <= level < old; nothing when the price is
// unchanged. A level equal to the old price is not crossed again: it fired
// (or was placed) when the price got there. Ids come in the order the price
// met them (rising: ascending level; falling: descending level), ties by id.
// It visits only the returned entries plus one tree descent, and leaves the
// index unchanged: the engine decides what to remove.
func (x *PriceIndex) Crossed(oldMidQ8, newMidQ8 int64) []string {
	out, _ := x.CrossedN(oldMidQ8, newMidQ8, -1)
	return out
}

// CrossedN is Crossed stopped after limit ids (no limit when negative);
// more reports that at least one more entry was crossed. It visits at
// most limit+1 entries, so a move across a million levels costs what the
// caller can act on, not the million.
func (x *PriceIndex) CrossedN(oldMidQ8, newMidQ8 int64, limit int) ([]string, bool) {
	x.ensure()
	c := collector{limit: limit}
	switch {
	case newMidQ8 > oldMidQ8:
		x.rising.Ascend(indexItem{level: oldMidQ8 + 1}, func(it indexItem) bool {
			return it.level <= newMidQ8 && c.take(it)
		})
	case newMidQ8 < oldMidQ8:
		x.falling.Ascend(indexItem{level: oldMidQ8 - 1}, func(it indexItem) bool {
			return it.level >= newMidQ8 && c.take(it)
		})
	}
	return c.out, c.more
}

// collector gathers ids up to a limit (none when negative) and notes
// whether one more was offered.
type collector struct {
	limit int
	out   []string
	more  bool
}

func (c *collector) take(it indexItem) bool {
	if c.limit >= 0 && len(c.out) == c.limit {
		c.more = true
		return false
	}
	c.out = append(c.out, it.id)
	return true
}

// Reached returns the ids whose level a price of midQ8 has reached, moving
// from anywhere: Rising entries with level <= midQ8 (ascending level), then
// Falling entries with level >= midQ8 (descending level), ties by id. Where
// Crossed answers "what did this move pass", Reached answers "what is due
// at this price", for entries that may have been placed beyond the price
// (a position whose margin funding just drained). It visits only the
// returned entries plus one descent per tree and changes nothing.
func (x *PriceIndex) Reached(midQ8 int64) []string {
	out, _ := x.ReachedN(midQ8, -1)
	return out
}

// ReachedN is Reached stopped after limit ids (no limit when negative);
// more reports that at least one more entry is reached. It visits at most
// limit+1 entries.
func (x *PriceIndex) ReachedN(midQ8 int64, limit int) ([]string, bool) {
	x.ensure()
	c := collector{limit: limit}
	x.rising.Scan(func(it indexItem) bool {
		return it.level <= midQ8 && c.take(it)
	})
	if !c.more {
		x.falling.Scan(func(it indexItem) bool {
			return it.level >= midQ8 && c.take(it)
		})
	}
	return c.out, c.more
}
