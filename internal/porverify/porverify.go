// Package porverify is an independent verifier of Proof of Reserves
// proofs, for tests: written from the description alone (DESIGN's domain
// primer, docs/decisions.md "Proof of Reserves" and SPEC's proof shape),
// sharing no code with fsm/por, so a fault in fsm/por cannot hide itself
// by being on both sides of a check.
//
// A leaf is (SHA-256(rootSalt || accountTag), balance); a parent is
// (SHA-256(L.hash || L.sum || R.hash || R.sum), L.sum + R.sum), sums as 8
// bytes big-endian; leaves are padded with (32 zero bytes, 0) to a power
// of two, at least two; accountTag = HMAC-SHA256(SHA-256(apiKey),
// "perpd/por/tag/v1" 0 asset 0 accountId 0 be64(treeTsMs)).
package porverify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
)

type node struct {
	hash [32]byte
	sum  *big.Int // unbounded, so an overflow shows instead of wrapping
}

func parent(l, r node) node {
	var pre []byte
	pre = append(pre, l.hash[:]...)
	pre = binary.BigEndian.AppendUint64(pre, l.sum.Uint64())
	pre = append(pre, r.hash[:]...)
	pre = binary.BigEndian.AppendUint64(pre, r.sum.Uint64())
	return node{hash: sha256.Sum256(pre), sum: new(big.Int).Add(l.sum, r.sum)}
}

func leaf(salt, tag []byte, bal *big.Int) node {
	return node{hash: sha256.Sum256(append(append([]byte{}, salt...), tag...)), sum: bal}
}

// Tag is the account's tag in the tree of asset at treeTsMs, from the key.
func Tag(apiKey, asset, account string, treeTsMs int64) []byte {
	k := sha256.Sum256([]byte(apiKey))
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte("perpd/por/tag/v1\x00" + asset + "\x00" + account + "\x00"))
	_ = binary.Write(m, binary.BigEndian, treeTsMs)
	return m.Sum(nil)
}

// Root is the root (hash hex, total) of leaves given in leaf order.
func Root(salt []byte, tags [][]byte, bals []int64) (string, *big.Int) {
	width := 2
	for width < len(tags) {
		width *= 2
	}
	level := make([]node, width)
	for i := range level {
		level[i] = node{sum: new(big.Int)}
		if i < len(tags) {
			level[i] = leaf(salt, tags[i], big.NewInt(bals[i]))
		}
	}
	for len(level) > 1 {
		next := make([]node, len(level)/2)
		for i := range next {
			next[i] = parent(level[2*i], level[2*i+1])
		}
		level = next
	}
	return hex.EncodeToString(level[0].hash[:]), level[0].sum
}

// amount reads a SPEC amount: a JSON string of decimal digits, canonical,
// within a non-negative int64.
func amount(what string, v any) (*big.Int, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s: %v is not a JSON string", what, v)
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() < 0 || !n.IsInt64() || strconv.FormatInt(n.Int64(), 10) != s {
		return nil, fmt.Errorf("%s: %q is not a canonical non-negative int64", what, s)
	}
	return n, nil
}

func hash32(what string, v any) ([]byte, error) {
	s, _ := v.(string)
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 || hex.EncodeToString(b) != s {
		return nil, fmt.Errorf("%s: %v is not 32 bytes of lowercase hex", what, v)
	}
	return b, nil
}

// Published is what GET /por says of the sats tree (SPEC: liability).
type Published struct {
	RootHash    string
	TotalMsat   int64
	LeafCount   int
	RootSaltHex string
	TsMs        int64
}

// Check verifies a sats proof as served (the JSON bytes of GET
// /v1/por/proof) against the published tree and the holder's key and
// account id, and returns the leaf's balance in msat.
func Check(body []byte, pub Published, apiKey, account string) (int64, error) {
	var p struct {
		RootHash    any `json:"rootHash"`
		TotalMsat   any `json:"totalMsat"`
		RootSaltHex any `json:"rootSaltHex"`
		TreeTsMs    any `json:"treeTsMs"`
		Leaf        struct {
			AccountTag  any `json:"accountTag"`
			BalanceMsat any `json:"balanceMsat"`
			Index       any `json:"index"`
		} `json:"leaf"`
		Path []struct {
			SiblingHash    any `json:"siblingHash"`
			SiblingSumMsat any `json:"siblingSumMsat"`
			SiblingOnLeft  any `json:"siblingOnLeft"`
		} `json:"path"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return 0, err
	}
	if p.RootHash != pub.RootHash || p.RootSaltHex != pub.RootSaltHex || p.TreeTsMs != strconv.FormatInt(pub.TsMs, 10) {
		return 0, fmt.Errorf("the proof names root %v salt %v time %v, GET /por published %s %s %d", p.RootHash, p.RootSaltHex, p.TreeTsMs, pub.RootHash, pub.RootSaltHex, pub.TsMs)
	}
	total, err := amount("totalMsat", p.TotalMsat)
	if err != nil {
		return 0, err
	}
	if total.Int64() != pub.TotalMsat {
		return 0, fmt.Errorf("totalMsat %s, published %d", total, pub.TotalMsat)
	}
	salt, err := hash32("rootSaltHex", p.RootSaltHex)
	if err != nil {
		return 0, err
	}
	tag, err := hash32("leaf.accountTag", p.Leaf.AccountTag)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(tag, Tag(apiKey, "msat", account, pub.TsMs)) {
		return 0, fmt.Errorf("the accountTag is not account %s's under its key", account)
	}
	num, ok := p.Leaf.Index.(json.Number)
	idx, err := strconv.ParseInt(string(num), 10, 64)
	if !ok || err != nil || idx < 0 {
		return 0, fmt.Errorf("leaf.index %v is not a non-negative JSON integer", p.Leaf.Index)
	}
	bal, err := amount("leaf.balanceMsat", p.Leaf.BalanceMsat)
	if err != nil {
		return 0, err
	}
	width := 2
	for width < pub.LeafCount {
		width *= 2
	}
	if 1<<len(p.Path) != width || idx >= int64(pub.LeafCount) {
		return 0, fmt.Errorf("a path of %d steps at index %d for %d leaves", len(p.Path), idx, pub.LeafCount)
	}
	cur := leaf(salt, tag, bal)
	for k, s := range p.Path {
		h, err := hash32(fmt.Sprintf("path[%d].siblingHash", k), s.SiblingHash)
		if err != nil {
			return 0, err
		}
		sum, err := amount(fmt.Sprintf("path[%d].siblingSumMsat", k), s.SiblingSumMsat)
		if err != nil {
			return 0, err
		}
		sib := node{sum: sum}
		copy(sib.hash[:], h)
		left, ok := s.SiblingOnLeft.(bool)
		if !ok || left != (idx>>k&1 == 1) {
			return 0, fmt.Errorf("path[%d].siblingOnLeft %v for index %d", k, s.SiblingOnLeft, idx)
		}
		if left {
			cur = parent(sib, cur)
		} else {
			cur = parent(cur, sib)
		}
		if !cur.sum.IsInt64() {
			return 0, fmt.Errorf("path[%d]: the sum overflows", k)
		}
	}
	if got := hex.EncodeToString(cur.hash[:]); got != pub.RootHash {
		return 0, fmt.Errorf("the path leads to %s, published %s", got, pub.RootHash)
	}
	if cur.sum.Int64() != pub.TotalMsat {
		return 0, fmt.Errorf("the path sums to %s, published %d", cur.sum, pub.TotalMsat)
	}
	return bal.Int64(), nil
}
