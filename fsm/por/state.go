package por

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// Cadence of the trees, in FSM time: a tree is built by the first entry at
// or past each multiple of CadenceMs (the state machine's timer), so every
// replica builds it at the same log position from the same state.
const CadenceMs = 60_000

// StaleAfterMs is when a snapshot counts as stale: three missed builds.
const StaleAfterMs = 3 * CadenceMs

// HistoryMax bounds the snapshot history (roots and statuses): 1440
// entries, a day at the cadence.
const HistoryMax = 1440

// WarnBandQ9 is the tolerance band of the status rule: a shortfall
// (reserves below liabilities) within this fraction of the liabilities is
// `warn`, beyond it `page`. 1e6 = 0.1%.
const WarnBandQ9 = 1_000_000

// Statuses.
const (
	StatusClean = "clean"
	StatusWarn  = "warn"
	StatusPage  = "page"
)

// MicroPerUsdx is the USDx tree's unit: balances are micro-USDx, so a
// staker's fractional share of the pool is not rounded to whole USDx.
const MicroPerUsdx = 1_000_000

// TreeState is one built tree, kept so that proofs are served from it:
// the root and every leaf (account, tag, amount) in leaf order. Leaves are
// ordered by tag, which is pseudo-random, so an index reveals nothing.
type TreeState struct {
	TsMs     int64    `cbor:"1,keyasint"`
	RootHash Hash     `cbor:"2,keyasint"`
	Total    int64    `cbor:"3,keyasint"`
	Salt     Hash     `cbor:"4,keyasint"`
	Accounts []string `cbor:"5,keyasint"`
	Tags     []Hash   `cbor:"6,keyasint"`
	Amounts  []int64  `cbor:"7,keyasint"`
	// MinWidth is the least number of leaf slots the tree was built with:
	// MinWidth from feature level 7, 0 (meaning 1) before.
	MinWidth int `cbor:"8,keyasint,omitempty"`
}

// Width is the least number of leaf slots of t's tree (Build's minWidth).
func (t *TreeState) Width() int { return max(t.MinWidth, 1) }

// LeafCount is the number of real leaves.
func (t *TreeState) LeafCount() int { return len(t.Accounts) }

// Index finds an account's leaf (-1 when it is not in the tree). Linear:
// reads are rare next to builds, and an index map would double the state.
func (t *TreeState) Index(accountID string) int {
	for i, a := range t.Accounts {
		if a == accountID {
			return i
		}
	}
	return -1
}

// Leaves returns the tree's leaves for Build.
func (t *TreeState) Leaves() []Leaf {
	ls := make([]Leaf, len(t.Accounts))
	for i := range ls {
		ls[i] = Leaf{Tag: t.Tags[i], Amount: t.Amounts[i]}
	}
	return ls
}

// Entry is one account's figures before the tree is built.
type Entry struct {
	Account string
	Tag     Hash
	Amount  int64
}

// NewTreeState orders entries by tag (then account, for equal tags, which
// SHA-256 makes impossible in practice) and computes the root of a tree of
// at least minWidth leaf slots (1, or MinWidth from feature level 7). It
// leaves entries in their order.
func NewTreeState(tsMs int64, salt Hash, entries []Entry, minWidth int) (*TreeState, error) {
	// A total order (accounts are unique), so any sort gives these bytes.
	// The sort moves 16-byte keys that compare a tag's first 8 bytes as
	// one integer (the same order as bytes.Compare on them), not 56-byte
	// entries through bytes.Compare: it was most of the build's serial
	// time after the tags. Equal prefixes fall back to the whole entry.
	keys := make([]sortKey, len(entries))
	for i := range entries {
		keys[i] = sortKey{prefix: binary.BigEndian.Uint64(entries[i].Tag[:8]), i: i}
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		x, y := &entries[a.i], &entries[b.i]
		if c := bytes.Compare(x.Tag[:], y.Tag[:]); c != 0 {
			return c
		}
		return strings.Compare(x.Account, y.Account)
	})
	t := &TreeState{TsMs: tsMs, Salt: salt, Accounts: make([]string, len(entries)),
		Tags: make([]Hash, len(entries)), Amounts: make([]int64, len(entries))}
	for i, k := range keys {
		e := &entries[k.i]
		t.Accounts[i], t.Tags[i], t.Amounts[i] = e.Account, e.Tag, e.Amount
	}
	if minWidth > 1 {
		t.MinWidth = minWidth
	}
	root, err := rootOf(salt, len(t.Tags), t.Width(), func(i int) Leaf { return Leaf{Tag: t.Tags[i], Amount: t.Amounts[i]} })
	if err != nil {
		return nil, err
	}
	t.RootHash, t.Total = root.Hash, int64(root.Sum)
	return t, nil
}

// sortKey is an entry's place in NewTreeState's sort.
type sortKey struct {
	prefix uint64 // the tag's first 8 bytes, big-endian
	i      int    // the entry's index
}

// HistoryEntry is one past snapshot's outcome.
type HistoryEntry struct {
	TsMs      int64  `cbor:"1,keyasint"`
	Status    string `cbor:"2,keyasint"`
	DriftMsat int64  `cbor:"3,keyasint"`
	// Roots of the two trees, so a client can check an older proof.
	MsatRoot Hash `cbor:"4,keyasint"`
	UsdxRoot Hash `cbor:"5,keyasint"`
}

// Vault is the USDx hedge's exposure at the snapshot.
type Vault struct {
	// NetPctQ9 is (hedge short contracts - USDx supply) / supply in q9:
	// the dollars the hedge leaves unhedged (positive: over-hedged) per
	// dollar owed. Absent (HasNet false) while supply is 0.
	NetPctQ9 int64 `cbor:"1,keyasint"`
	HasNet   bool  `cbor:"2,keyasint,omitempty"`
	// QuantumQ9 is the smallest step NetPctQ9 can take: one contract of
	// the supply, rounded up (1e9 while supply is 0).
	QuantumQ9 int64 `cbor:"3,keyasint"`
	// Verified: supply == hedge contracts (the backing identity).
	Verified bool `cbor:"4,keyasint,omitempty"`
}

// Snapshot is the latest Proof of Reserves. Once built it is never
// changed: readers keep it outside the state's lock, and a node's live
// machine shares the one its snapshot shadow built (fsm.PoRBuilds).
type Snapshot struct {
	TsMs int64      `cbor:"1,keyasint"`
	Msat *TreeState `cbor:"2,keyasint"`
	Usdx *TreeState `cbor:"3,keyasint"`
	// ReservesMsat is the custody balance; LiabilitiesMsat what others
	// are owed in sats (the sats tree plus the USDx side's sats backing).
	ReservesMsat    int64 `cbor:"4,keyasint"`
	LiabilitiesMsat int64 `cbor:"5,keyasint"`
	// HedgeBackingMsat is the part of LiabilitiesMsat behind USDx.
	HedgeBackingMsat int64  `cbor:"6,keyasint"`
	DriftMsat        int64  `cbor:"7,keyasint"`
	Status           string `cbor:"8,keyasint"`
	// Consolidated: every ledger balance is accounted for by exactly one
	// side (a leaf, the USDx backing, the venue's own), the ledger
	// conserves money, the pending-withdrawal account equals the open
	// withdrawals and the USDx tree equals the USDx in custody.
	Consolidated bool `cbor:"9,keyasint,omitempty"`
	// Problems says what the consolidation found wrong (bounded).
	Problems []string `cbor:"10,keyasint,omitempty"`
	Vault    Vault    `cbor:"11,keyasint"`
	// PositionsAtMarkMsat is what the traders' open positions add to what
	// the venue owes at their markets' last mids, each loss counted down
	// to its margin only; DriftMsat subtracts it (from
	// fsm.LevelPoRDriftAtMark; 0 and omitted below it).
	PositionsAtMarkMsat int64 `cbor:"12,keyasint,omitempty"`
}

// State is Proof of Reserves' part of the replicated state: the latest
// snapshot with its two trees, and a bounded history of outcomes.
type State struct {
	Latest  *Snapshot      `cbor:"1,keyasint,omitempty"`
	History []HistoryEntry `cbor:"2,keyasint,omitempty"` // oldest first, at most HistoryMax
	// Pending is the snapshot built from the state at its entry, not yet
	// published (from fsm.LevelPoRBesideApply): at most one.
	Pending *Pending `cbor:"3,keyasint,omitempty"`
}

// PublishDelayMs is how long after its state's time a snapshot built
// beside apply is published (fsm.LevelPoRBesideApply): by the first entry
// at or past TsMs + PublishDelayMs. It is the time a replica has to build
// the trees off its apply path; a replica that has not built them by then
// waits at that entry.
const PublishDelayMs = 10_000

// Pending is a snapshot due at an entry and not yet published. It is a
// function of the state at that point of the entry alone, so every
// replica has the same one; Snap is that snapshot. A replica whose
// machine defers the build (fsm.Options.PoRBuilds) holds Snap nil until
// its build arrives, and never encodes it so.
type Pending struct {
	TsMs  int64     `cbor:"1,keyasint"`
	Index uint64    `cbor:"2,keyasint"`
	Snap  *Snapshot `cbor:"3,keyasint,omitempty"`
}

// Publishable reports whether the pending snapshot is published at nowMs.
func (p *Pending) Publishable(nowMs int64) bool { return nowMs-p.TsMs >= PublishDelayMs }

// NewState returns an empty state.
func NewState() *State { return &State{} }

// Due reports whether a tree is due at nowMs: none is pending, and none
// was published of nowMs's cadence period. A period that starts while a
// tree is pending (the first tree is due at once, not at a period's
// start) gets its tree at that one's publication.
func (s *State) Due(nowMs int64) bool {
	if s.Pending != nil {
		return false
	}
	return s.Latest == nil || nowMs/CadenceMs > s.Latest.TsMs/CadenceMs
}

// Record makes snap the latest and appends its outcome to the history.
func (s *State) Record(snap *Snapshot) {
	s.Latest = snap
	h := HistoryEntry{TsMs: snap.TsMs, Status: snap.Status, DriftMsat: snap.DriftMsat}
	if snap.Msat != nil {
		h.MsatRoot = snap.Msat.RootHash
	}
	if snap.Usdx != nil {
		h.UsdxRoot = snap.Usdx.RootHash
	}
	s.History = append(s.History, h)
	if n := len(s.History) - HistoryMax; n > 0 {
		s.History = append(s.History[:0:0], s.History[n:]...)
	}
}

// StatusOf applies the status rule: `page` when the consolidation failed
// or the shortfall (liabilities above reserves) is beyond WarnBandQ9 of
// the liabilities, `warn` for a shortfall within the band, `clean` when
// reserves cover liabilities.
func StatusOf(drift, liabilities int64, consolidated bool) string {
	if !consolidated {
		return StatusPage
	}
	if drift >= 0 {
		return StatusClean
	}
	// band = liabilities x WarnBandQ9 / 1e9 without overflow.
	band := liabilities/1_000_000_000*WarnBandQ9 + liabilities%1_000_000_000*WarnBandQ9/1_000_000_000
	if -drift <= band {
		return StatusWarn
	}
	return StatusPage
}
