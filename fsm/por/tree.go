// Package por builds and verifies the Merkle sum trees of Proof of
// Reserves. It is pure: no state, clock or I/O, so the state machine, the
// HTTP layer and the offline verifier (perpd por verify) share one
// definition of a leaf, a parent and a path.
//
// A node is a pair (hash, sum). A leaf is (SHA-256(rootSalt || accountTag),
// balance); a parent of L and R is
//
//	(SHA-256(L.hash || L.sum || R.hash || R.sum), L.sum + R.sum)
//
// with each sum written as 8 bytes big-endian (an unsigned 64-bit integer:
// every sum is non-negative, so a negative balance cannot hide a liability,
// the flaw of Maxwell's original scheme). The leaves are padded with zero
// leaves (32 zero bytes, sum 0) to a power of two, from feature level 7 at
// least two (MinWidth). The root is the pair (rootHash, total): a
// verifier checks both.
package por

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/perpd/perpd/internal/par"
)

// HashSize is the size of every hash in a tree.
const HashSize = sha256.Size

// SumBytes is the width of a sum inside a parent's preimage.
const SumBytes = 8

// MaxDepth bounds a path: 2^MaxDepth leaves is far beyond any venue.
const MaxDepth = 40

// Hash is a node hash.
type Hash [HashSize]byte

// Node is a tree node: its hash and the sum of the balances under it.
type Node struct {
	Hash Hash
	Sum  uint64
}

// Leaf is one account's entry before hashing.
type Leaf struct {
	Tag    Hash
	Amount int64
}

// ErrNegative is a negative balance: a tree never holds one.
var ErrNegative = errors.New("por: negative balance")

// ErrOverflow is a total beyond the signed 64-bit range.
var ErrOverflow = errors.New("por: total overflows")

// LeafHash is SHA-256(rootSalt || accountTag).
func LeafHash(salt, tag Hash) Hash {
	var buf [2 * HashSize]byte
	copy(buf[:HashSize], salt[:])
	copy(buf[HashSize:], tag[:])
	return sha256.Sum256(buf[:])
}

// Parent combines two children. The caller guarantees the sum fits (Build
// and Verify check it).
func Parent(l, r Node) Node {
	var buf [2 * (HashSize + SumBytes)]byte
	copy(buf[0:], l.Hash[:])
	binary.BigEndian.PutUint64(buf[HashSize:], l.Sum)
	copy(buf[HashSize+SumBytes:], r.Hash[:])
	binary.BigEndian.PutUint64(buf[2*HashSize+SumBytes:], r.Sum)
	return Node{Hash: sha256.Sum256(buf[:]), Sum: l.Sum + r.Sum}
}

// Width is the padded leaf count of a tree of n leaves: the smallest power
// of two at least n (1 for n <= 1).
func Width(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// MinWidth is the least width of a tree built from feature level 7
// (fsm.LevelPoRRootIsParent): two leaf slots, so the root is always a
// parent and its hash commits to the sums under it. A tree of width 1 is
// its one leaf, whose hash is SHA-256(rootSalt || accountTag) alone: it
// commits to neither the balance nor the total.
const MinWidth = 2

// widthAtLeast is Width(n), at least minWidth (a power of two).
func widthAtLeast(n, minWidth int) int { return max(Width(n), minWidth) }

// Tree keeps every level, so it answers proofs. Levels[0] are the padded
// leaves; the last level is the root alone.
type Tree struct {
	Levels [][]Node
	// Count is the number of real (unpadded) leaves.
	Count int
	// Salt is the salt the leaves were hashed with.
	Salt Hash
}

// Build hashes leaves (in the given order) into a tree. An empty tree is
// one zero leaf: root (zero hash, 0).
func Build(salt Hash, leaves []Leaf) (*Tree, error) { return BuildWidth(salt, leaves, 1) }

// BuildWidth is Build with at least minWidth leaf slots (1 or MinWidth).
func BuildWidth(salt Hash, leaves []Leaf, minWidth int) (*Tree, error) {
	level, err := leafNodes(salt, len(leaves), minWidth, func(i int) Leaf { return leaves[i] })
	if err != nil {
		return nil, err
	}
	t := &Tree{Count: len(leaves), Salt: salt, Levels: [][]Node{level}}
	for len(level) > 1 {
		next := make([]Node, len(level)/2)
		parents(next, level)
		t.Levels = append(t.Levels, next)
		level = next
	}
	return t, nil
}

// hashGrain is the least number of hashes worth a core of their own (a
// SHA-256 block is about 0.1-0.2 µs): levels below 2*hashGrain nodes are
// hashed on the caller's goroutine alone.
const hashGrain = 4096

// parents fills next (len(level)/2 nodes) with the parents of level's
// pairs, on several cores when the level is large. next and level must
// not overlap: a chunk would overwrite nodes another has yet to read.
func parents(next, level []Node) {
	par.For(len(next), hashGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			next[i] = Parent(level[2*i], level[2*i+1])
		}
	})
}

// Root computes the root of leaves without keeping the levels (the state
// machine's path: it keeps the leaves and the root, and proofs are built
// on read). It reuses one buffer, so it allocates the leaf level once.
func Root(salt Hash, leaves []Leaf) (Node, error) { return RootWidth(salt, leaves, 1) }

// RootWidth is Root with at least minWidth leaf slots (1 or MinWidth).
func RootWidth(salt Hash, leaves []Leaf, minWidth int) (Node, error) {
	return rootOf(salt, len(leaves), minWidth, func(i int) Leaf { return leaves[i] })
}

// rootOf is RootWidth over n leaves that leaf(i) returns, so a caller
// that keeps tags and amounts apart (TreeState) need not copy them into
// a []Leaf first.
func rootOf(salt Hash, n, minWidth int, leaf func(i int) Leaf) (Node, error) {
	level, err := leafNodes(salt, n, minWidth, leaf)
	if err != nil {
		return Node{}, err
	}
	// Levels alternate between two buffers: hashing in place is safe on
	// one core only (a chunk would overwrite nodes another has yet to read).
	spare := make([]Node, len(level)/2)
	for len(level) > 1 {
		next := spare[:len(level)/2]
		parents(next, level)
		spare, level = level, next
	}
	return level[0], nil
}

func leafNodes(salt Hash, n, minWidth int, leaf func(i int) Leaf) ([]Node, error) {
	var total uint64
	for i := range n {
		l := leaf(i)
		if l.Amount < 0 {
			return nil, fmt.Errorf("%w at leaf %d (%d)", ErrNegative, i, l.Amount)
		}
		if total > math.MaxInt64-uint64(l.Amount) {
			return nil, ErrOverflow
		}
		total += uint64(l.Amount)
	}
	level := make([]Node, widthAtLeast(n, minWidth))
	par.For(n, hashGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			l := leaf(i)
			level[i] = Node{Hash: LeafHash(salt, l.Tag), Sum: uint64(l.Amount)}
		}
	})
	return level, nil
}

// Root is the tree's root.
func (t *Tree) Root() Node { return t.Levels[len(t.Levels)-1][0] }

// Step is one element of an inclusion path: the sibling at that level and
// whether it sits on the left (then the path's node is the right child).
type Step struct {
	Sibling Node
	OnLeft  bool
}

// Proof is the path from leaf i up to the root, leaf level first.
func (t *Tree) Proof(i int) ([]Step, error) {
	if i < 0 || i >= t.Count {
		return nil, fmt.Errorf("por: leaf %d outside the tree's %d leaves", i, t.Count)
	}
	path := make([]Step, 0, len(t.Levels)-1)
	for _, level := range t.Levels[:len(t.Levels)-1] {
		path = append(path, Step{Sibling: level[i^1], OnLeft: i&1 == 1})
		i >>= 1
	}
	return path, nil
}

// ErrNoPath is a proof without a step: its root is the leaf, whose hash
// does not commit to the balance, so the proof shows no amount.
var ErrNoPath = errors.New("por: a proof without a step proves no balance (its root hash commits only to the account tag)")

// Climb recomputes the root from a leaf and its path. It refuses an empty
// path (ErrNoPath), a path whose sides disagree with index, one deeper
// than MaxDepth, and any sum that leaves the non-negative signed 64-bit
// range.
func Climb(leaf Node, index uint64, path []Step) (Node, error) {
	if len(path) == 0 {
		return Node{}, ErrNoPath
	}
	if len(path) > MaxDepth {
		return Node{}, fmt.Errorf("por: path of %d steps is longer than %d", len(path), MaxDepth)
	}
	if index>>uint(len(path)) != 0 {
		return Node{}, fmt.Errorf("por: index %d does not fit a path of %d steps", index, len(path))
	}
	if leaf.Sum > math.MaxInt64 {
		return Node{}, ErrOverflow
	}
	cur := leaf
	for k, s := range path {
		if want := index>>uint(k)&1 == 1; s.OnLeft != want {
			return Node{}, fmt.Errorf("por: step %d puts the sibling on the wrong side for index %d", k, index)
		}
		if s.Sibling.Sum > math.MaxInt64 || cur.Sum > math.MaxInt64-s.Sibling.Sum {
			return Node{}, fmt.Errorf("%w at step %d", ErrOverflow, k)
		}
		if s.OnLeft {
			cur = Parent(s.Sibling, cur)
		} else {
			cur = Parent(cur, s.Sibling)
		}
	}
	return cur, nil
}
