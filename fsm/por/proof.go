package por

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
)

// Assets of the two liability trees.
const (
	AssetMsat = "msat" // sats liabilities, balances in msat
	AssetUsdx = "usdx" // USDx liabilities, balances in micro-USDx
)

// ProofDoc is an inclusion proof as served by GET /v1/por/proof and read by
// perpd por verify. Amounts are decimal strings (SPEC's wire encoding). The
// sats proof carries the Msat fields (SPEC section 2); the USDx proof the
// same shape with Micro fields.
type ProofDoc struct {
	Asset       string    `json:"asset" enum:"msat,usdx" doc:"absent in SPEC's sats proof: a proof without it is a sats proof"`
	RootHash    string    `json:"rootHash"`
	TotalMsat   string    `json:"totalMsat,omitempty" unit:"msat" doc:"sats tree: the root's sum"`
	TotalMicro  string    `json:"totalMicro,omitempty" unit:"int" doc:"USDx tree: the root's sum in micro-USDx"`
	RootSaltHex string    `json:"rootSaltHex"`
	TreeTsMs    string    `json:"treeTsMs" unit:"ms"`
	Leaf        LeafDoc   `json:"leaf"`
	Path        []StepDoc `json:"path" doc:"leaf level first. Verify: start from (SHA-256(rootSalt || accountTag), balance), hashing the raw 32-byte values (not their hex); at step k the sibling is on the left exactly when bit k of leaf.index is 1, and the next node is (SHA-256(left.hash || left.sum || right.hash || right.sum), left.sum + right.sum), each sum as 8 bytes big-endian, every sum non-negative within 2^63-1. The last node must be (rootHash, the total), and rootHash the root GET /por publishes for treeTsMs (liability, or liabilityUsdx for the USDx tree; an older tree's in GET /por history). The leaves are padded to a power of two, at least two, with zero leaves (32 zero bytes, sum 0), so the path has max(1, ceil(log2 leafCount)) steps; a tree without accounts is two zero leaves, whose root is SHA-256 of 80 zero bytes"`
}

// LeafDoc is the account's leaf.
type LeafDoc struct {
	AccountTag   string `json:"accountTag" doc:"HMAC-SHA256 keyed with SHA-256(api key) of the message \"perpd/por/tag/v1\" 0x00 asset 0x00 accountId 0x00 treeTsMs (8 bytes big-endian), with the API key leaf.tagKeyId names: the account's oldest live key holding the read scope (the oldest API key still on record in trees before feature level 8, or when the account has no live read key): recompute it to check that the leaf is yours; new for every tree"`
	TagKeyID     string `json:"tagKeyId,omitempty" doc:"not in SPEC: the id (as GET /v1/sessions lists it, never the key) of the account's key whose SHA-256 keys accountTag; absent when no key still on record does. Informational and covered by no hash: the check is recomputing accountTag with that key"`
	BalanceMsat  string `json:"balanceMsat,omitempty" unit:"msat" doc:"sats tree: what the venue owes the account in the state of treeTsMs: every ledger balance it holds (free, reserved, each open position's margin; not the positions' unrealized PnL, which GET /por's driftMsat counts at the mark), plus its unpaid referral and promoter earnings and the amounts and fees of its withdrawals not yet paid or returned; 0 if that nets below 0"`
	BalanceMicro string `json:"balanceMicro,omitempty" unit:"int" doc:"USDx tree, in micro-USDx: (usdx + usdxPending + USDx being withdrawn) x 1000000, plus the sUSDx held or cooling at the share price, floor(sUSDx x staked x 1000000 / sUSDx supply)"`
	Index        uint64 `json:"index"`
}

// StepDoc is one path element.
type StepDoc struct {
	SiblingHash     string `json:"siblingHash"`
	SiblingSumMsat  string `json:"siblingSumMsat,omitempty" unit:"msat"`
	SiblingSumMicro string `json:"siblingSumMicro,omitempty" unit:"int"`
	SiblingOnLeft   bool   `json:"siblingOnLeft"`
}

// NewProofDoc renders leaf index i of t as a proof document.
func NewProofDoc(asset string, t *Tree, salt, tag Hash, i int, treeTsMs int64) (ProofDoc, error) {
	path, err := t.Proof(i)
	if err != nil {
		return ProofDoc{}, err
	}
	root := t.Root()
	leafSum := t.Levels[0][i].Sum
	d := ProofDoc{Asset: asset, RootHash: hex.EncodeToString(root.Hash[:]), RootSaltHex: hex.EncodeToString(salt[:]),
		TreeTsMs: strconv.FormatInt(treeTsMs, 10), Leaf: LeafDoc{AccountTag: hex.EncodeToString(tag[:]), Index: uint64(i)},
		Path: make([]StepDoc, len(path))}
	micro := asset == AssetUsdx
	setAmount(micro, &d.TotalMsat, &d.TotalMicro, root.Sum)
	setAmount(micro, &d.Leaf.BalanceMsat, &d.Leaf.BalanceMicro, leafSum)
	for k, s := range path {
		d.Path[k] = StepDoc{SiblingHash: hex.EncodeToString(s.Sibling.Hash[:]), SiblingOnLeft: s.OnLeft}
		setAmount(micro, &d.Path[k].SiblingSumMsat, &d.Path[k].SiblingSumMicro, s.Sibling.Sum)
	}
	return d, nil
}

func setAmount(micro bool, msat, mic *string, v uint64) {
	s := strconv.FormatUint(v, 10)
	if micro {
		*mic = s
	} else {
		*msat = s
	}
}

// Verdict is what verifying a proof found.
type Verdict struct {
	Asset    string
	RootHash string
	Total    uint64
	Balance  uint64
	Index    uint64
	Depth    int
}

// Verify recomputes the root from the proof and checks it against the
// proof's own rootHash and total, and against wantRoot when that is not
// empty (the root the verifier got elsewhere, for example from GET /por).
// Every amount must be a non-negative decimal integer within 64 bits
// signed; every hash 32 bytes of hex.
func (d ProofDoc) Verify(wantRoot string) (Verdict, error) {
	d.Asset = d.asset()
	v := Verdict{Asset: d.Asset, RootHash: d.RootHash, Index: d.Leaf.Index, Depth: len(d.Path)}
	micro := d.Asset == AssetUsdx
	if d.Asset != AssetMsat && d.Asset != AssetUsdx {
		return v, fmt.Errorf("unknown asset %q", d.Asset)
	}
	pick := func(msat, mic string) string {
		if micro {
			return mic
		}
		return msat
	}
	salt, err := parseHash("rootSaltHex", d.RootSaltHex)
	if err != nil {
		return v, err
	}
	tag, err := parseHash("leaf.accountTag", d.Leaf.AccountTag)
	if err != nil {
		return v, err
	}
	root, err := parseHash("rootHash", d.RootHash)
	if err != nil {
		return v, err
	}
	if v.Total, err = parseAmount("total", pick(d.TotalMsat, d.TotalMicro)); err != nil {
		return v, err
	}
	if v.Balance, err = parseAmount("leaf balance", pick(d.Leaf.BalanceMsat, d.Leaf.BalanceMicro)); err != nil {
		return v, err
	}
	path := make([]Step, len(d.Path))
	for k, s := range d.Path {
		h, err := parseHash(fmt.Sprintf("path[%d].siblingHash", k), s.SiblingHash)
		if err != nil {
			return v, err
		}
		sum, err := parseAmount(fmt.Sprintf("path[%d] sibling sum", k), pick(s.SiblingSumMsat, s.SiblingSumMicro))
		if err != nil {
			return v, err
		}
		path[k] = Step{Sibling: Node{Hash: h, Sum: sum}, OnLeft: s.SiblingOnLeft}
	}
	got, err := Climb(Node{Hash: LeafHash(salt, tag), Sum: v.Balance}, d.Leaf.Index, path)
	if err != nil {
		return v, err
	}
	if got.Hash != root {
		return v, fmt.Errorf("the path leads to root %x, not the proof's rootHash %s", got.Hash, d.RootHash)
	}
	if got.Sum != v.Total {
		return v, fmt.Errorf("the path sums to %d, not the proof's total %d", got.Sum, v.Total)
	}
	if wantRoot != "" {
		want, err := parseHash("expected root", wantRoot)
		if err != nil {
			return v, err
		}
		if want != root {
			return v, fmt.Errorf("the proof's root %s is not the expected root %s", d.RootHash, wantRoot)
		}
	}
	return v, nil
}

// asset is the proof's tree: SPEC's sats proof has no asset field, and
// the sats tree is the default (GET /v1/por/proof without asset), so a
// proof without one is a sats proof.
func (d ProofDoc) asset() string {
	if d.Asset == "" {
		return AssetMsat
	}
	return d.Asset
}

func parseHash(what, s string) (Hash, error) {
	var h Hash
	if len(s) != 2*HashSize {
		return h, fmt.Errorf("%s: want %d hex digits, got %d", what, 2*HashSize, len(s))
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return h, fmt.Errorf("%s: %q is not lowercase hex", what, s)
		}
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err
}

// parseAmount accepts ^[0-9]+$ within the signed 64-bit range: a sum in
// a tree is never negative.
func parseAmount(what, s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: missing", what)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%s: %q is not a non-negative decimal integer", what, s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q out of range", what, s)
	}
	return uint64(v), nil
}

// CheckTag checks that the proof's leaf is accountID's: its accountTag
// must be AccountTag(SHA-256(apiKey), asset, accountID, treeTsMs). A path
// says nothing about whose leaf it is; without this check a venue could
// hand two accounts of equal balance the same leaf and both proofs would
// verify. The key is the one leaf.tagKeyId names: the account's oldest
// live key with the read scope (from feature level 8; before it, the
// oldest API key still on record); treeTsMs is bound by the tag.
func (d ProofDoc) CheckTag(apiKey, accountID string) error {
	tag, err := parseHash("leaf.accountTag", d.Leaf.AccountTag)
	if err != nil {
		return err
	}
	if d.Asset = d.asset(); d.Asset != AssetMsat && d.Asset != AssetUsdx {
		return fmt.Errorf("unknown asset %q", d.Asset)
	}
	ts, err := strconv.ParseInt(d.TreeTsMs, 10, 64)
	if err != nil {
		return fmt.Errorf("treeTsMs: %q is not a decimal integer", d.TreeTsMs)
	}
	secret := sha256.Sum256([]byte(apiKey))
	if AccountTag(secret[:], d.Asset, accountID, ts) != tag {
		if d.Leaf.TagKeyID != "" {
			return fmt.Errorf("the leaf's accountTag is not account %s's under this key (the proof says the tag uses key %s)", accountID, d.Leaf.TagKeyID)
		}
		return fmt.Errorf("the leaf's accountTag is not account %s's under this key (the tag uses the account's oldest live key with the read scope)", accountID)
	}
	return nil
}
