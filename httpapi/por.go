package httpapi

import (
	_ "embed"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/wire"
)

// Proof of Reserves (SPEC sections 2 and 4, issue 14). The state machine
// builds the trees (fsm/por.go); these handlers render the latest
// snapshot, build a tree's levels on read to answer a proof (cached per
// tree), and serve the dashboard.

func init() { routeSets = append(routeSets, (*Server).porRoutes) }

// PorHistoryLen is how many snapshots GET /por lists (newest first); the
// state keeps por.HistoryMax.
const PorHistoryLen = 100

// PorLiabilityView is the sats tree's root (SPEC: liability).
type PorLiabilityView struct {
	RootHash    string   `json:"rootHash"`
	TotalMsat   wire.Int `json:"totalMsat" unit:"msat"`
	LeafCount   int      `json:"leafCount"`
	RootSaltHex string   `json:"rootSaltHex"`
	TsMs        wire.Int `json:"tsMs" unit:"ms"`
}

// PorLiabilityUsdxView is the USDx tree's root (SPEC: liabilityUsdx).
type PorLiabilityUsdxView struct {
	RootHash    string   `json:"rootHash"`
	TotalMicro  wire.Int `json:"totalMicro" unit:"int" doc:"micro-USDx (1 USDx = 1000000)"`
	LeafCount   int      `json:"leafCount"`
	RootSaltHex string   `json:"rootSaltHex"`
	TsMs        wire.Int `json:"tsMs" unit:"ms"`
}

// PorHistoryView is one past snapshot.
type PorHistoryView struct {
	TsMs      wire.Int `json:"tsMs" unit:"ms"`
	Status    string   `json:"status" enum:"clean,warn,page"`
	DriftMsat wire.Int `json:"driftMsat" unit:"msat"`
	// The two roots of that snapshot, so an older proof can be checked.
	RootHash     string `json:"rootHash"`
	UsdxRootHash string `json:"usdxRootHash"`
}

// PorVaultView is the USDx hedge's exposure (SPEC: vaultExposure).
type PorVaultView struct {
	NetPctOfEquityQ9      *wire.Int `json:"netPctOfEquityQ9" unit:"q9" doc:"(hedge short contracts - USDx supply) / supply; null while no USDx exists"`
	QuantumQ9             wire.Int  `json:"quantumQ9" unit:"q9" doc:"the smallest step of netPctOfEquityQ9: one contract of the supply"`
	TsMs                  wire.Int  `json:"tsMs" unit:"ms"`
	ConsolidationVerified bool      `json:"consolidationVerified" doc:"USDx supply equals the hedge's short contracts"`
}

// PorDetailView is the snapshot's inner figures (SPEC: snapshot, not shown).
type PorDetailView struct {
	ReservesMsat     wire.Int `json:"reservesMsat" unit:"msat"`
	ReservesSource   string   `json:"reservesSource"`
	LiabilitiesMsat  wire.Int `json:"liabilitiesMsat" unit:"msat"`
	HedgeBackingMsat wire.Int `json:"hedgeBackingMsat" unit:"msat"`
	// Open positions at the mark, which the drift takes off.
	PositionsAtMarkMsat wire.Int `json:"positionsAtMarkMsat" unit:"msat" doc:"what the traders' open positions add to what the venue owes at their markets' last mids (each loss counted down to its margin only); driftMsat = reservesMsat - liabilitiesMsat - positionsAtMarkMsat"`
	CadenceMs           wire.Int `json:"cadenceMs" unit:"ms"`
	WarnBandQ9          wire.Int `json:"warnBandQ9" unit:"q9"`
	Problems            []string `json:"problems"`
}

// PorSnapshotView is GET /por (SPEC section 2, Proof of Reserves).
type PorSnapshotView struct {
	TsMs                  wire.Int             `json:"tsMs" unit:"ms" doc:"log time of the state the trees are of: a snapshot is of the state at the first entry of each minute after that entry's timers (a funding boundary and its liquidations, cancel-all-after, the USDx waterfall) and before its command: a deposit, order or withdrawal that entry carries, stamped with this very tsMs, is not in it; it is published 10000 ms of log time later (from feature level 10), so ageMs is then at least 10000 once it shows"`
	AgeMs                 wire.Int             `json:"ageMs" unit:"ms"`
	StaleAfterMs          wire.Int             `json:"staleAfterMs" unit:"ms"`
	Stale                 bool                 `json:"stale"`
	Status                string               `json:"status" enum:"clean,warn,page"`
	DriftMsat             wire.Int             `json:"driftMsat" unit:"msat" doc:"reserves - liabilities - the traders' open positions at the mark (snapshot.positionsAtMarkMsat); negative is a shortfall. The liabilities (snapshot.liabilitiesMsat) are the sats tree's total (liability.totalMsat) plus the sats behind the USDx hedge and the stakers' yield escrow (snapshot.hedgeBackingMsat)"`
	ConsolidationVerified bool                 `json:"consolidationVerified"`
	Snapshot              any                  `json:"snapshot"`
	History               []PorHistoryView     `json:"history"`
	Liability             PorLiabilityView     `json:"liability"`
	LiabilityUsdx         PorLiabilityUsdxView `json:"liabilityUsdx"`
	VaultExposure         PorVaultView         `json:"vaultExposure"`
}

// PorProofQuery is the query of GET /v1/por/proof.
type PorProofQuery struct {
	Asset *string `json:"asset" enum:"msat,usdx" doc:"which tree; default msat"`
}

//go:embed por_dashboard.html
var porDashboardHTML []byte

func (s *Server) porRoutes() []*Route {
	return []*Route{
		{Method: http.MethodGet, Path: "/por", Summary: "Proof of Reserves: the latest snapshot (404 before the first tree)",
			Budget: "read", Responses: map[int]any{200: PorSnapshotView{}, 404: wire.ErrorBody{}}, Handler: s.porSnapshot},
		{Method: http.MethodGet, Path: "/por/dashboard", Summary: "Proof of Reserves dashboard and in-browser proof verifier (HTML)",
			Budget: "read", Content: "text/html", Responses: map[int]any{200: ""}, Handler: s.porDashboard},
		{Method: http.MethodGet, Path: "/v1/por/proof", Summary: "The caller's inclusion proof in the latest tree (404 when the account is not in it)",
			Auth: Keyed, Scope: fsm.PoRProofScope.String(), Budget: "read", Query: PorProofQuery{},
			Responses: map[int]any{200: por.ProofDoc{}, 404: wire.ErrorBody{}}, Handler: s.porProof},
	}
}

var errTreeMismatch = errors.New("the tree changed while the proof was built; ask again")

func hexOf(h por.Hash) string { return hex.EncodeToString(h[:]) }

// NewPorSnapshotView renders snap as of log time nowMs.
func NewPorSnapshotView(snap *por.Snapshot, hist []por.HistoryEntry, nowMs int64) PorSnapshotView {
	age := max(nowMs-snap.TsMs, 0)
	v := PorSnapshotView{TsMs: wire.Int(snap.TsMs), AgeMs: wire.Int(age), StaleAfterMs: por.StaleAfterMs,
		Stale: age > por.StaleAfterMs, Status: snap.Status, DriftMsat: wire.Int(snap.DriftMsat),
		ConsolidationVerified: snap.Consolidated,
		Snapshot: PorDetailView{ReservesMsat: wire.Int(snap.ReservesMsat), ReservesSource: "simulated rail custody: settled deposits and faucet grants less paid payouts",
			LiabilitiesMsat: wire.Int(snap.LiabilitiesMsat), HedgeBackingMsat: wire.Int(snap.HedgeBackingMsat),
			PositionsAtMarkMsat: wire.Int(snap.PositionsAtMarkMsat),
			CadenceMs:           por.CadenceMs, WarnBandQ9: por.WarnBandQ9, Problems: append([]string{}, snap.Problems...)},
		Liability: PorLiabilityView{RootHash: hexOf(snap.Msat.RootHash), TotalMsat: wire.Int(snap.Msat.Total),
			LeafCount: snap.Msat.LeafCount(), RootSaltHex: hexOf(snap.Msat.Salt), TsMs: wire.Int(snap.Msat.TsMs)},
		LiabilityUsdx: PorLiabilityUsdxView{RootHash: hexOf(snap.Usdx.RootHash), TotalMicro: wire.Int(snap.Usdx.Total),
			LeafCount: snap.Usdx.LeafCount(), RootSaltHex: hexOf(snap.Usdx.Salt), TsMs: wire.Int(snap.Usdx.TsMs)},
		VaultExposure: PorVaultView{QuantumQ9: wire.Int(snap.Vault.QuantumQ9), TsMs: wire.Int(snap.TsMs), ConsolidationVerified: snap.Vault.Verified},
		History:       []PorHistoryView{},
	}
	if snap.Vault.HasNet {
		v.VaultExposure.NetPctOfEquityQ9 = wire.Ptr(snap.Vault.NetPctQ9)
	}
	for i := len(hist) - 1; i >= 0 && len(v.History) < PorHistoryLen; i-- {
		h := hist[i]
		v.History = append(v.History, PorHistoryView{TsMs: wire.Int(h.TsMs), Status: h.Status, DriftMsat: wire.Int(h.DriftMsat),
			RootHash: hexOf(h.MsatRoot), UsdxRootHash: hexOf(h.UsdxRoot)})
	}
	return v
}

func (s *Server) porSnapshot(c *gin.Context) {
	now := s.Node.LogNowMs()
	var v *PorSnapshotView
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.PoR == nil || st.PoR.Latest == nil {
			return
		}
		view := NewPorSnapshotView(st.PoR.Latest, st.PoR.History, now)
		v = &view
	})
	if v == nil {
		fail(c, http.StatusNotFound, wire.CodeNotFound, "no Proof of Reserves snapshot yet: the first tree is built within a minute of log time")
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) porDashboard(c *gin.Context) {
	c.Header("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	c.Data(http.StatusOK, "text/html; charset=utf-8", porDashboardHTML)
}

// porTrees caches the levels of the latest tree of each asset: a proof
// needs them, the state keeps only leaves and root. Keyed by the root and
// salt, so a cached tree is right whichever server or state asks. building
// holds the builds in flight: requests that miss the cache together (as
// at every minute's boundary) share one build, so a burst of them costs
// one copy of the leaves and one tree (about 14 MB and 33 ms at 100,000
// accounts), not one each.
var porTrees = struct {
	sync.Mutex
	byAsset  map[string]*por.Tree
	building map[porTreeKey]*porBuild
}{byAsset: map[string]*por.Tree{}, building: map[porTreeKey]*porBuild{}}

type porTreeKey struct {
	asset      string
	salt, root por.Hash
}

// porBuild is one build in flight: done closes when t or err is set.
type porBuild struct {
	done chan struct{}
	t    *por.Tree
	err  error
}

// testHookPorProofRead, when a test sets it, runs between a proof's
// state read and its use of the tree, where another request may replace
// the cached tree.
var testHookPorProofRead func()

// testHookPorTreeBuild, when a test sets it, runs as a proof request
// starts building a tree's levels.
var testHookPorTreeBuild func()

// porTreeLookup finds the tree of asset with root and salt: the cached
// one (t), or a build in flight to wait for (b), or, when lead is true, a
// build registered for the caller, who must run it with runPorBuild. A
// caller that found t keeps the pointer: another request may replace the
// cache a moment later.
func porTreeLookup(asset string, salt, root por.Hash) (t *por.Tree, b *porBuild, lead bool) {
	porTrees.Lock()
	defer porTrees.Unlock()
	if c := porTrees.byAsset[asset]; c != nil && c.Root().Hash == root && c.Salt == salt {
		return c, nil, false
	}
	k := porTreeKey{asset: asset, salt: salt, root: root}
	if b := porTrees.building[k]; b != nil {
		return nil, b, false
	}
	b = &porBuild{done: make(chan struct{})}
	porTrees.building[k] = b
	return nil, b, true
}

// runPorBuild builds the levels of the tree whose leaves are ls and whose
// root is root, caches them and hands them to every request waiting on b.
func runPorBuild(b *porBuild, asset string, salt, root por.Hash, width int, ls []por.Leaf) {
	defer func() {
		porTrees.Lock()
		if b.err == nil && b.t == nil {
			b.err = errTreeMismatch // the build panicked
		}
		if b.err == nil {
			porTrees.byAsset[asset] = b.t
		}
		delete(porTrees.building, porTreeKey{asset: asset, salt: salt, root: root})
		porTrees.Unlock()
		close(b.done)
	}()
	if testHookPorTreeBuild != nil {
		testHookPorTreeBuild()
	}
	t, err := por.BuildWidth(salt, ls, width)
	if err == nil && t.Root().Hash != root {
		err = errTreeMismatch
	}
	b.t, b.err = t, err
}

func (s *Server) porProof(c *gin.Context) {
	var q PorProofQuery
	if err := decodeQuery(c, &q); err != nil {
		invalid(c, err.Error())
		return
	}
	asset := por.AssetMsat
	if q.Asset != nil {
		asset = *q.Asset
	}
	acct := callerOf(c).AccountID
	var (
		found      bool
		idx        int
		tagKeyID   string
		tag, salt  por.Hash
		root       por.Hash
		width      int
		tsMs       int64
		leaves     []por.Leaf
		hit        *por.Tree // the cached tree, when the read found it current
		build      *porBuild // else the build to wait for, or to run (lead)
		lead       bool
		treeExists bool
	)
	// A published snapshot is never changed (por.Snapshot), so only
	// taking it needs the state's lock: the leaf's linear search (about
	// 1 ms at 100,000 accounts) and the leaves' copy run outside it, where
	// they never hold apply back.
	var latest *por.Snapshot
	s.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.PoR != nil {
			latest = st.PoR.Latest
		}
	})
	if latest != nil {
		tr := latest.Msat
		if asset == por.AssetUsdx {
			tr = latest.Usdx
		}
		treeExists = true
		if idx = tr.Index(acct); idx >= 0 {
			found, tag, salt, root, tsMs, width = true, tr.Tags[idx], tr.Salt, tr.RootHash, tr.TsMs, tr.Width()
			s.Node.Machine().Read(func(st *fsm.State, _ uint64) { tagKeyID = fsm.PoRTagKeyID(st, acct, asset, tsMs, tag) })
			if hit, build, lead = porTreeLookup(asset, salt, root); lead {
				leaves = tr.Leaves() // built into levels below
			}
		}
	}
	if !treeExists {
		fail(c, http.StatusNotFound, wire.CodeNotFound, "no Proof of Reserves tree yet: the first is built within a minute of log time")
		return
	}
	if !found {
		fail(c, http.StatusNotFound, wire.CodeNotFound, "account not found in the latest "+asset+" tree: an account enters the next tree built after it was created or first held "+asset+" (one a minute of log time)")
		return
	}
	if testHookPorProofRead != nil {
		testHookPorProofRead()
	}
	t, err := hit, error(nil)
	if t == nil {
		if lead {
			runPorBuild(build, asset, salt, root, width, leaves)
		}
		select {
		case <-build.done:
			t, err = build.t, build.err
		case <-c.Request.Context().Done():
			unavailable(c, "proof unavailable: the request ended while the tree was being built")
			return
		}
	}
	if err == nil && t.Count <= idx {
		err = errTreeMismatch
	}
	if err != nil {
		unavailable(c, "proof unavailable: "+err.Error())
		return
	}
	d, err := por.NewProofDoc(asset, t, salt, tag, idx, tsMs)
	if err != nil {
		unavailable(c, "proof unavailable: "+err.Error())
		return
	}
	d.Leaf.TagKeyID = tagKeyID
	c.JSON(http.StatusOK, d)
}
