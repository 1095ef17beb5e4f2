package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	mbig "math/big"
	"sort"
	"strings"
	"sync"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/internal/par"
)

// porTagGrain is the least number of accounts worth a core of their own
// when BuildPoR tags them (an HMAC and a few map reads each, about 1 µs).
const porTagGrain = 2048

// Proof of Reserves (issue 14): a timer builds both liability trees every
// por.CadenceMs of FSM time. It is registered from this file, whose name
// sorts after every apply_*.go, so it runs after the other domains' timers
// of the same entry (funding boundaries and the USDx waterfall settled).
func init() {
	registerTimer(func(c *Ctx) {
		p := c.St.PoR
		if p == nil {
			return // below LevelDomains
		}
		if c.St.FeatureLevel < LevelPoRBesideApply {
			if p.Due(c.Now()) {
				p.Record(BuildPoR(c.St))
			}
			return
		}
		if pd := p.Pending; pd != nil && pd.Publishable(c.Now()) {
			snap := pd.Snap
			if snap == nil {
				snap = c.awaitPoR(pd)
			}
			p.Pending = nil
			p.Record(snap)
		}
		if p.Due(c.Now()) {
			pd := &por.Pending{TsMs: c.Now(), Index: c.Index}
			if c.porBuilds == nil || !c.porBuilds.Want(pd.Index, pd.TsMs, len(c.St.Access.Accounts)) {
				pd.Snap = BuildPoR(c.St)
				if c.porBuilt != nil {
					c.porBuilt(pd.Index, pd.Snap)
				}
			}
			p.Pending = pd
		}
	})
}

// LevelPoRBesideApply is the feature level from which a Proof of Reserves
// snapshot is published por.PublishDelayMs after the entry whose time made
// it due, rather than at that entry. Below it every replica built both
// trees inside apply: 0.2-0.7 s at 100,000 accounts, every minute, during
// which no entry applied. The snapshot is still of the state at that
// point of that entry (por.Pending), so every replica publishes the same
// bytes at the same entry; what moves is where the work runs. A live
// node's machine records the entry and its time (Options.PoRBuilds), and
// its snapshot shadow, which replays the same log beside apply, builds
// the trees when it passes that entry (node/porbuild.go); any other
// machine (the shadow itself, tools, tests) builds them inline as before.
const LevelPoRBesideApply uint32 = 10

// PoRBuilds takes Proof of Reserves builds off a machine's apply path
// (LevelPoRBesideApply). The snapshot it returns for an entry must be the
// one BuildPoR gives on the state at that point of that entry: another
// machine that replays the same log builds it.
type PoRBuilds interface {
	// Want is told, inside apply, that the snapshot of the entry at index
	// is due at log time tsMs, on a state of that many accounts, and
	// reports whether it takes the build; if not, the machine builds
	// inline (for a small state the hand-off costs more than the build).
	// It must not block. Either way the bytes are the same.
	Want(index uint64, tsMs int64, accounts int) bool
	// Await returns that snapshot, waiting for it to be built; an error
	// means it cannot be, and the replica halts rather than publish
	// something else.
	Await(index uint64, tsMs int64) (*por.Snapshot, error)
}

// awaitPoR returns the pending snapshot's trees from the machine's
// PoRBuilds; without them, or when they fail, the replica halts (a
// panic inside apply): publishing anything else would diverge.
func (c *Ctx) awaitPoR(pd *por.Pending) *por.Snapshot {
	if c.porBuilds == nil {
		panic(fmt.Sprintf("proof of reserves: the snapshot pending since entry %d has no trees and this machine builds none beside apply", pd.Index))
	}
	snap, err := c.porBuilds.Await(pd.Index, pd.TsMs)
	if err == nil && (snap == nil || snap.TsMs != pd.TsMs) {
		err = fmt.Errorf("the build answered a snapshot of another time")
	}
	if err != nil {
		panic(fmt.Sprintf("proof of reserves: the snapshot pending since entry %d could not be built beside apply: %v", pd.Index, err))
	}
	return snap
}

// LevelPoRRootIsParent is the feature level from which every tree has at
// least por.MinWidth leaf slots. Below it a tree of one account was that
// account's leaf alone, whose hash commits to neither the balance nor the
// total: a proof with any balance verified against its published root.
const LevelPoRRootIsParent uint32 = 7

// LevelPoRSumExact is the feature level from which the consolidation's
// ledger sum is checked for overflow on its exact (128-bit) value. Below
// it a running int64 sum was checked at each step of a map walk, so
// balances whose partial sums overflowed in one order and not in another
// (the house book far negative, traders far positive) gave replicas
// different problems, statuses and state hashes.
const LevelPoRSumExact uint32 = 7

// LevelPoRDriftAtMark is the feature level from which the drift (and so
// the status) counts what the traders' open positions are worth at their
// markets' last mids: reserves - liabilities - Σ max(PnL at the mid,
// -margin). Below it the drift left unrealised PnL out, so a venue whose
// house book owed winners more than its own equity showed clean until
// they closed (a review's case: clean at +0.5 mBTC, then 1.65 BTC short
// after a close that moved no money in or out).
const LevelPoRDriftAtMark uint32 = 8

// BuildPoR builds the Proof of Reserves snapshot of st at st.NowMs. It
// reads st only. What a leaf holds (docs/decisions.md, Proof of Reserves):
//
//   - sats tree, one leaf per account (zero balances included), in msat:
//     free + reserved (resting orders' margin and fees) + the margin of
//     every position + the account's withdrawals requested or queued and
//     not yet paid (amount + fee). Unrealised PnL is not in the leaf: it
//     is the house book's until a position closes.
//   - USDx tree, one leaf per USDx holder, in micro-USDx: (usdx held +
//     usdx in queued redemptions + usdx in requested withdrawals) x 1e6 +
//     floor((sUSDx + cooling sUSDx) x staked x 1e6 / sUSDx supply).
func BuildPoR(st *State) *por.Snapshot {
	now := st.NowMs
	var seed uint64
	if st.Genesis != nil {
		seed = st.Genesis.Seed
	}
	snap := &por.Snapshot{TsMs: now}
	minWidth := 1
	if st.FeatureLevel >= LevelPoRRootIsParent {
		minWidth = por.MinWidth
	}
	var problems []string
	problem := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	// Classify every ledger balance: an account's part, the USDx side's
	// backing, or the venue's own (on every core: por_scan.go).
	exact := st.FeatureLevel >= LevelPoRSumExact
	lg := scanPoRLedger(st, exact)
	perAccount := lg.perAccount
	hedgeBacking, venueOwn, ledgerSum, payables, overflow := lg.hedgeBacking, lg.venueOwn, lg.sum, lg.payables, lg.overflow
	problems = append(problems, lg.problems...)
	var owedSum int64
	if st.Growth != nil {
		for id, amt := range st.Growth.OwedByAccount() {
			perAccount[st.Access.Accounts[id]] += amt
			owedSum += amt
		}
	}
	if owedSum != payables {
		problem("the referral and promoter payables hold %d msat, their earners are owed %d", payables, owedSum)
	}
	var pendingSum int64
	for _, seq := range st.Funds.Open {
		w := st.Funds.Withdrawals[seq]
		if w == nil {
			problem("open withdrawal %d has no record", seq)
			continue
		}
		perAccount[st.Access.Accounts[w.AccountID]] += w.AmountMsat + w.FeeMsat
		pendingSum += w.AmountMsat + w.FeeMsat
	}
	if b := st.Ledger.Balance(ledger.PendingWithdrawals); b != pendingSum {
		problem("pending withdrawals hold %d msat, the open withdrawals %d", b, pendingSum)
	}
	// The ledger's conservation check, without its sorted walk.
	if overflow || ledgerSum != st.Ledger.CreditedMsat-st.Ledger.PaidMsat {
		problem("ledger: balances sum to %d, credited - paid is %d", ledgerSum, st.Ledger.CreditedMsat-st.Ledger.PaidMsat)
	}

	entries := make([]por.Entry, 0, len(st.Access.Accounts))
	accounts := make([]*access.Account, 0, len(st.Access.Accounts))
	for id, a := range st.Access.Accounts {
		entries = append(entries, por.Entry{Account: id})
		accounts = append(accounts, a)
	}
	// Each account's leaf depends on that account alone: the tags (two
	// SHA-256 each) are computed on every core, each chunk summing and
	// reporting its own; the sum is exact and the problems are sorted
	// below, so neither depends on how the chunks fall.
	var mu sync.Mutex
	var leafSum int64
	par.For(len(entries), porTagGrain, func(lo, hi int) {
		var sum int64
		var negative []int64
		var secret [32]byte
		for i := lo; i < hi; i++ {
			e, a := &entries[i], accounts[i]
			amt := perAccount[a]
			if amt < 0 {
				negative = append(negative, amt)
				amt = 0
			}
			sum += amt
			e.Amount = amt
			e.Tag = por.AccountTag(tagSecret(st, a.ID, a.KeyIDs, seed, &secret), por.AssetMsat, e.Account, now)
		}
		mu.Lock()
		defer mu.Unlock()
		leafSum += sum
		for _, amt := range negative {
			problem("an account nets %d msat", amt)
		}
	})
	msatSalt := por.RootSalt(por.AssetMsat, now, seed)
	t, err := por.NewTreeState(now, msatSalt, entries, minWidth)
	if err != nil {
		problem("sats tree: %v", err)
		t, _ = por.NewTreeState(now, msatSalt, nil, minWidth)
	}
	snap.Msat = t
	if t.Total != leafSum {
		problem("sats tree total %d != the accounts' %d", t.Total, leafSum)
	}

	snap.Usdx = buildUsdxTree(st, now, seed, minWidth, problem)

	snap.ReservesMsat = st.Ledger.CreditedMsat - st.Ledger.PaidMsat
	snap.HedgeBackingMsat = hedgeBacking
	snap.LiabilitiesMsat = snap.Msat.Total + hedgeBacking
	snap.DriftMsat = snap.ReservesMsat - snap.LiabilitiesMsat
	if st.FeatureLevel >= LevelPoRDriftAtMark {
		pnl, ok := tradersPnLAtMark(st)
		drift := snap.DriftMsat - pnl
		// Signed subtraction overflowed when the operands' signs differ
		// and the result's sign is not the minuend's.
		if !ok || ((snap.DriftMsat^pnl) < 0 && (snap.DriftMsat^drift) < 0) {
			problem("the traders' positions at the mark do not fit 64 bits")
		} else {
			snap.PositionsAtMarkMsat, snap.DriftMsat = pnl, drift
		}
	}
	if got := snap.LiabilitiesMsat + venueOwn; got != snap.ReservesMsat {
		problem("liabilities %d + the venue's own %d != reserves %d", snap.LiabilitiesMsat, venueOwn, snap.ReservesMsat)
	}
	snap.Vault = vaultExposure(st)
	snap.Consolidated = len(problems) == 0 && snap.Vault.Verified
	// Map walks found the problems: sort them so every replica stores the
	// same list, then keep the first ten.
	sort.Strings(problems)
	if len(problems) > 10 {
		problems = problems[:10]
	}
	snap.Problems = problems
	snap.Status = por.StatusOf(snap.DriftMsat, snap.LiabilitiesMsat, snap.Consolidated)
	return snap
}

// publicName names a ledger account in a problem GET /por publishes:
// venue accounts by name, a trader's without its account id.
func publicName(k string) string {
	if strings.HasPrefix(k, "acct:") {
		return "of a trader"
	}
	return k
}

// LevelPoRTagLiveKey is the feature level from which an account's tag is
// keyed by its oldest live key that can read the proof (porTagKey), not
// by its oldest key still on record. Below it a revoked key kept keying
// the tag: after the usual rotation (mint a new key, revoke the old one
// because it leaked) the old key's holder still recognised the account's
// leaf in every tree and followed its balance minute by minute, while a
// user who had discarded the old key could no longer compute their own
// tag; and once the account passed access.MaxKeysPerAccount its oldest
// revoked record was forgotten and the tag moved, unannounced, to the
// next oldest. Live keys are never forgotten, so from the level the tag
// key changes only when its holder's key is revoked.
const LevelPoRTagLiveKey uint32 = 8

// LevelPoRTagNoRevokedKey is the feature level from which an account
// with no live key that can read the proof (every read key revoked, or
// only trade and withdraw keys left) is tagged by the seed fallback, not
// by its oldest key on record. Below it that fallback handed the tag
// back to a revoked key, so a leaked key that had been revoked with the
// rest recognised the account's leaf again; nobody holding a live key of
// the account could fetch a proof for it anyway (PoRProofScope).
const LevelPoRTagNoRevokedKey uint32 = 8

// PoRProofScope is the scope GET /v1/por/proof needs (httpapi names its
// route's scope from it): only a key holding it can fetch the proof whose
// tag it would key, so only such a key may key the tag. A delegate
// minted without it (a trade-only bot key) never does.
const PoRProofScope = access.ScopeRead

// porTagKey is the key whose SHA-256 keys the account's tag in a tree
// built from LevelPoRTagLiveKey: the first of keyIDs (the account's keys
// in creation order, a replicated slice, so the choice is the same on
// every replica and no map order reaches it) that is live and holds
// PoRProofScope. Keys have no expiry: revocation is what ends one. nil
// when there is none (every key revoked, or none recorded).
func porTagKey(st *State, id string, keyIDs []string) *access.Key {
	for _, kid := range keyIDs {
		if k := st.Access.Keys[kid]; k != nil && k.AccountID == id && k.Live() && k.Scopes.Has(PoRProofScope) && len(k.HashHex) == 64 {
			return k
		}
	}
	return nil
}

// tagSecret is the key of an account's tag: from LevelPoRTagLiveKey the
// SHA-256 of porTagKey's key; below it, and (below
// LevelPoRTagNoRevokedKey) when the account has no such key, the SHA-256
// of its oldest API key still on record (the key's holder can recompute
// it); otherwise a hash of the genesis seed and the account id.
func tagSecret(st *State, id string, keyIDs []string, seed uint64, buf *[32]byte) []byte {
	if st.FeatureLevel >= LevelPoRTagLiveKey {
		if k := porTagKey(st, id, keyIDs); k != nil {
			if _, err := hex.Decode(buf[:], []byte(k.HashHex)); err == nil {
				return buf[:]
			}
		}
	}
	if st.FeatureLevel >= LevelPoRTagNoRevokedKey {
		keyIDs = nil // no live read key: the seed's tag, which no key computes
	}
	for _, kid := range keyIDs {
		if k := st.Access.Keys[kid]; k != nil && len(k.HashHex) == 64 {
			if _, err := hex.Decode(buf[:], []byte(k.HashHex)); err == nil {
				return buf[:]
			}
		}
	}
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seed)
	*buf = sha256.Sum256([]byte("perpd/por/fallback\x00" + string(s[:]) + id))
	return buf[:]
}

// PoRTagKeyID names the key of the account's tag in a tree of asset at
// treeTsMs: the id of the account's key still on record whose SHA-256
// keys tag, or "" when none does (the tag used the seed fallback, or its
// key was since forgotten). It recomputes rather than applying the rule
// of the tree's level, so it names the right key for a tree of any level
// and whatever happened to the keys since. GET /v1/por/proof serves it
// (leaf.tagKeyId) so a user knows which key verifies the leaf. At most
// access.MaxKeysPerAccount HMACs; reads st only.
func PoRTagKeyID(st *State, accountID, asset string, treeTsMs int64, tag por.Hash) string {
	a := st.Access.Accounts[accountID]
	if a == nil {
		return ""
	}
	var secret [32]byte
	for _, kid := range a.KeyIDs {
		k := st.Access.Keys[kid]
		if k == nil || len(k.HashHex) != 64 {
			continue
		}
		if _, err := hex.Decode(secret[:], []byte(k.HashHex)); err != nil {
			continue
		}
		if por.AccountTag(secret[:], asset, accountID, treeTsMs) == tag {
			return k.ID
		}
	}
	return ""
}

func buildUsdxTree(st *State, now int64, seed uint64, minWidth int, problem func(string, ...any)) *por.TreeState {
	u := st.USDx
	salt := por.RootSalt(por.AssetUsdx, now, seed)
	if u == nil {
		t, _ := por.NewTreeState(now, salt, nil, minWidth)
		return t
	}
	entries := make([]por.Entry, 0, len(u.Holders))
	holders := make([]*usdx.Holder, 0, len(u.Holders))
	for id, h := range u.Holders {
		entries = append(entries, por.Entry{Account: id})
		holders = append(holders, h)
	}
	var wantMax mbig.Int
	wantMax.SetInt64(u.Supply - u.Outside)
	wantMax.Mul(&wantMax, mbig.NewInt(por.MicroPerUsdx))
	// As for the sats tree, each holder's leaf is computed on any core;
	// the exact sum and the count of overflows do not depend on the
	// chunks. An overflowing holder is left out of the tree.
	var mu sync.Mutex
	var sum mbig.Int
	overflows := 0
	skip := make([]bool, len(entries))
	par.For(len(entries), porTagGrain, func(lo, hi int) {
		var chunkSum mbig.Int
		var secret [32]byte
		n := 0
		for i := lo; i < hi; i++ {
			e, h := &entries[i], holders[i]
			v := mbig.NewInt(h.Usdx + h.Pending + h.Withdrawing)
			v.Mul(v, mbig.NewInt(por.MicroPerUsdx))
			shares := h.Susdx
			for _, un := range h.Unstakes {
				if !un.Released {
					shares += un.Susdx
				}
			}
			if shares > 0 && u.SusdxSupply > 0 {
				s := mbig.NewInt(shares)
				s.Mul(s, mbig.NewInt(u.Staked))
				s.Mul(s, mbig.NewInt(por.MicroPerUsdx))
				s.Quo(s, mbig.NewInt(u.SusdxSupply))
				v.Add(v, s)
			}
			if !v.IsInt64() {
				skip[i] = true
				n++
				continue
			}
			chunkSum.Add(&chunkSum, v)
			var keyIDs []string
			if a := st.Access.Accounts[e.Account]; a != nil {
				keyIDs = a.KeyIDs
			}
			e.Amount = v.Int64()
			e.Tag = por.AccountTag(tagSecret(st, e.Account, keyIDs, seed, &secret), por.AssetUsdx, e.Account, now)
		}
		mu.Lock()
		defer mu.Unlock()
		sum.Add(&sum, &chunkSum)
		overflows += n
	})
	for range overflows {
		problem("a USDx holder's balance overflows")
	}
	if overflows > 0 {
		kept := entries[:0]
		for i, e := range entries {
			if !skip[i] {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	// Staking shares round down, at most 1 micro per holder.
	slack := mbig.NewInt(int64(len(u.Holders)))
	var low mbig.Int
	low.Sub(&wantMax, slack)
	if sum.Cmp(&wantMax) > 0 || sum.Cmp(&low) < 0 {
		problem("USDx tree holds %s micro, custody %s", sum.String(), wantMax.String())
	}
	t, err := por.NewTreeState(now, salt, entries, minWidth)
	if err != nil {
		problem("USDx tree: %v", err)
		t, _ = por.NewTreeState(now, salt, nil, minWidth)
	}
	return t
}

// vaultExposure compares the USDx hedge with the supply it backs.
func vaultExposure(st *State) por.Vault {
	v := por.Vault{QuantumQ9: 1_000_000_000, Verified: true}
	if st.USDx == nil || st.Trade == nil {
		return v
	}
	supply := st.USDx.Supply
	pos := st.Trade.Position(usdx.HedgeAccount, usdx.HedgeMarket)
	short := int64(0)
	if pos.Contracts > 0 && pos.Side < 0 {
		short = pos.Contracts
	}
	v.Verified = short == supply
	if supply > 0 {
		v.HasNet = true
		diff := mbig.NewInt(short - supply)
		diff.Mul(diff, mbig.NewInt(1_000_000_000))
		diff.Quo(diff, mbig.NewInt(supply))
		v.NetPctQ9 = diff.Int64()
		v.QuantumQ9 = (1_000_000_000 + supply - 1) / supply
	}
	return v
}
