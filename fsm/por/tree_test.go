package por

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func testLeaves(n int) []Leaf {
	ls := make([]Leaf, n)
	for i := range ls {
		ls[i] = Leaf{Tag: AccountTag([]byte(fmt.Sprintf("secret-%d", i)), AssetMsat, fmt.Sprintf("acc_%d", i), 60_000),
			Amount: int64(i*7919%100_003) * 1000}
	}
	return ls
}

// naiveRoot is an independent recursive definition of the root.
func naiveRoot(salt Hash, ls []Leaf) Node {
	w := Width(len(ls))
	var rec func(lo, hi int) Node
	rec = func(lo, hi int) Node {
		if hi-lo == 1 {
			if lo >= len(ls) {
				return Node{}
			}
			b := append(append([]byte{}, salt[:]...), ls[lo].Tag[:]...)
			return Node{Hash: sha256.Sum256(b), Sum: uint64(ls[lo].Amount)}
		}
		mid := (lo + hi) / 2
		l, r := rec(lo, mid), rec(mid, hi)
		var buf []byte
		buf = append(buf, l.Hash[:]...)
		buf = binary.BigEndian.AppendUint64(buf, l.Sum)
		buf = append(buf, r.Hash[:]...)
		buf = binary.BigEndian.AppendUint64(buf, r.Sum)
		return Node{Hash: sha256.Sum256(buf), Sum: l.Sum + r.Sum}
	}
	return rec(0, w)
}

func TestTreeSmall(t *testing.T) {
	salt := RootSalt(AssetMsat, 60_000, 42)
	for _, n := range []int{1, 2, 3, 5} {
		ls := testLeaves(n)
		ls[0].Amount = 123_000
		tr, err := Build(salt, ls)
		if err != nil {
			t.Fatal(err)
		}
		var total uint64
		for _, l := range ls {
			total += uint64(l.Amount)
		}
		root := tr.Root()
		if root != naiveRoot(salt, ls) {
			t.Fatalf("n=%d: root differs from the recursive definition", n)
		}
		if root.Sum != total {
			t.Fatalf("n=%d: total %d, want %d", n, root.Sum, total)
		}
		if r2, _ := Root(salt, ls); r2 != root {
			t.Fatalf("n=%d: Root and Build disagree", n)
		}
		if want := len(Width1(n)); len(tr.Levels) != want {
			t.Fatalf("n=%d: %d levels, want %d", n, len(tr.Levels), want)
		}
		for i := range ls {
			d, err := NewProofDoc(AssetMsat, tr, salt, ls[i].Tag, i, 60_000)
			if err != nil {
				t.Fatal(err)
			}
			v, err := d.Verify(d.RootHash)
			if n == 1 { // below MinWidth: no step, nothing proved
				if !errors.Is(err, ErrNoPath) {
					t.Fatalf("n=1: a proof without a step: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("n=%d leaf %d: %v", n, i, err)
			}
			if v.Balance != uint64(ls[i].Amount) || v.Total != total {
				t.Fatalf("n=%d leaf %d: verdict %+v", n, i, v)
			}
		}
		if _, err := tr.Proof(n); err == nil {
			t.Fatalf("n=%d: proof of a padding leaf", n)
		}
	}
	// One leaf: the root is the leaf itself.
	one, _ := Build(salt, testLeaves(1)[:1])
	if one.Root().Hash != LeafHash(salt, testLeaves(1)[0].Tag) {
		t.Fatal("a one-leaf tree's root is not its leaf")
	}
}

// Width1 lists the level sizes of a tree of n leaves.
func Width1(n int) []int {
	var out []int
	for w := Width(n); ; w /= 2 {
		out = append(out, w)
		if w == 1 {
			return out
		}
	}
}

func TestTreeRefusesNegativeAndOverflow(t *testing.T) {
	ls := testLeaves(3)
	ls[1].Amount = -1
	if _, err := Build(Hash{}, ls); !errors.Is(err, ErrNegative) {
		t.Fatalf("negative leaf: %v", err)
	}
	ls[1].Amount = 1 << 62
	ls[2].Amount = 1 << 62
	if _, err := Build(Hash{}, ls); !errors.Is(err, ErrOverflow) {
		t.Fatalf("overflow: %v", err)
	}
}

func TestTree100k(t *testing.T) {
	if testing.Short() {
		t.Skip("100k leaves")
	}
	salt := RootSalt(AssetMsat, 1, 2)
	ls := testLeaves(100_000)
	tr, err := Build(salt, ls)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Levels) != 18 { // 2^17 = 131072
		t.Fatalf("%d levels", len(tr.Levels))
	}
	var total uint64
	for _, l := range ls {
		total += uint64(l.Amount)
	}
	if tr.Root().Sum != total {
		t.Fatal("total")
	}
	for _, i := range []int{0, 1, 65535, 65536, 99_998, 99_999, 31337} {
		d, _ := NewProofDoc(AssetMsat, tr, salt, ls[i].Tag, i, 1)
		if len(d.Path) != 17 {
			t.Fatalf("path of %d", len(d.Path))
		}
		if _, err := d.Verify(""); err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
	}
}

func proofBytes(t *testing.T, asset string) ([]byte, ProofDoc) {
	salt := RootSalt(asset, 60_000, 9)
	ls := testLeaves(3)
	tr, err := Build(salt, ls)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewProofDoc(asset, tr, salt, ls[2].Tag, 2, 60_000)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(d)
	return b, d
}

// Every single-byte change of a proof is caught: the document no longer
// decodes, or it fails verification. The exceptions are named: a change
// that decodes to the same document (JSON field names match without
// regard to case) and the informational treeTsMs, which the hashes do not
// cover (a verifier compares it with GET /por).
func TestTamperAnyByte(t *testing.T) {
	for _, asset := range []string{AssetMsat, AssetUsdx} {
		b, orig := proofBytes(t, asset)
		if _, err := orig.Verify(orig.RootHash); err != nil {
			t.Fatal(err)
		}
		caught, same := 0, 0
		tsStart := bytes.Index(b, []byte(`"treeTsMs":"`)) + len(`"treeTsMs":"`)
		tsEnd := tsStart + len(orig.TreeTsMs)
		for i := range b {
			for _, x := range []byte{1, 0x20, 0x5f} {
				m := bytes.Clone(b)
				m[i] ^= x
				d, err := DecodeProof(bytes.NewReader(m))
				if err == nil {
					_, err = d.Verify("")
				}
				switch {
				case err != nil:
					caught++
				case reflect.DeepEqual(d, orig):
					same++
				case i >= tsStart && i < tsEnd:
				default:
					t.Fatalf("%s: byte %d changed (%q) and the proof still verifies: %s", asset, i, m[i], m)
				}
			}
		}
		if caught < 2*len(b) {
			t.Fatalf("only %d of %d changes caught", caught, 3*len(b))
		}
		t.Logf("%s: %d bytes, %d changes caught, %d decode to the same proof", asset, len(b), caught, same)
	}
}

func TestVerifyAgainstExpectedRoot(t *testing.T) {
	_, d := proofBytes(t, AssetMsat)
	other := strings.Repeat("ab", 32)
	if _, err := d.Verify(other); err == nil {
		t.Fatal("a proof verified against another root")
	}
	// A negative sibling sum is refused outright.
	d.Path[0].SiblingSumMsat = "-" + d.Path[0].SiblingSumMsat
	if _, err := d.Verify(""); err == nil || !strings.Contains(err.Error(), "non-negative") {
		t.Fatalf("negative sum: %v", err)
	}
}

func BenchmarkRoot100k(b *testing.B) {
	salt := RootSalt(AssetMsat, 1, 2)
	ls := testLeaves(100_000)
	b.ResetTimer()
	for range b.N {
		if _, err := Root(salt, ls); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild100k(b *testing.B) {
	salt := RootSalt(AssetMsat, 1, 2)
	ls := testLeaves(100_000)
	b.ResetTimer()
	for range b.N {
		if _, err := Build(salt, ls); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTags100k(b *testing.B) {
	secret := sha256.Sum256([]byte("k"))
	for range b.N {
		for i := range 100_000 {
			AccountTag(secret[:], AssetMsat, "acc_0123456789abcdef", int64(i))
		}
	}
}

// AccountTag is HMAC-SHA256 exactly, for short and long keys.
func TestAccountTagIsHMAC(t *testing.T) {
	for _, key := range [][]byte{[]byte("k"), bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{9}, 64), bytes.Repeat([]byte{3}, 100)} {
		for _, id := range []string{"acc_1", strings.Repeat("x", 300)} {
			m := hmac.New(sha256.New, key)
			m.Write([]byte("perpd/por/tag/v1\x00usdx\x00" + id + "\x00"))
			m.Write(binary.BigEndian.AppendUint64(nil, 1234567))
			var want Hash
			m.Sum(want[:0])
			if got := AccountTag(key, AssetUsdx, id, 1234567); got != want {
				t.Fatalf("key %d bytes, id %d bytes: not HMAC-SHA256", len(key), len(id))
			}
		}
	}
}

// FuzzVerify: any input either fails to decode, fails to verify, or is a
// proof whose recomputed root and total are its own; nothing panics.
func FuzzVerify(f *testing.F) {
	for _, asset := range []string{AssetMsat, AssetUsdx} {
		salt := RootSalt(asset, 1, 1)
		ls := testLeaves(3)
		tr, _ := Build(salt, ls)
		d, _ := NewProofDoc(asset, tr, salt, ls[1].Tag, 1, 1)
		b, _ := json.Marshal(d)
		f.Add(b)
	}
	f.Add([]byte(`{"asset":"msat","path":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeProof(bytes.NewReader(b))
		if err != nil {
			return
		}
		v, err := d.Verify("")
		if err != nil {
			return
		}
		if v.Balance > v.Total || v.Depth != len(d.Path) {
			t.Fatalf("verified with balance %d > total %d", v.Balance, v.Total)
		}
	})
}

// TestOneLeafProofBindsItsBalance: in a tree of one leaf the root is the
// leaf, whose hash is SHA-256(rootSalt || accountTag) alone: it commits to
// neither the balance nor the total. A proof of that tree with any balance
// and the same total verified against the published root. Every sum is
// bound by the hash of the parent above it, so a verifier refuses a proof
// without a step, and from feature level 7 every tree has at least two
// leaf slots (MinWidth), so its root is a parent.
func TestOneLeafProofBindsItsBalance(t *testing.T) {
	salt := RootSalt(AssetMsat, 1, 2)
	ls := testLeaves(1)[:1]
	old, _ := Build(salt, ls)
	d, err := NewProofDoc(AssetMsat, old, salt, ls[0].Tag, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.Leaf.BalanceMsat, d.TotalMsat = "1", "1" // understated
	if _, err := d.Verify(d.RootHash); err == nil {
		t.Fatal("a proof without a step verified a balance its root does not commit to")
	}

	tr, err := BuildWidth(salt, ls, MinWidth)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := RootWidth(salt, ls, MinWidth); r != tr.Root() {
		t.Fatal("RootWidth and BuildWidth disagree")
	}
	d, err = NewProofDoc(AssetMsat, tr, salt, ls[0].Tag, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(d.RootHash); err != nil || len(d.Path) != 1 {
		t.Fatalf("padded one-leaf proof: %d steps, %v", len(d.Path), err)
	}
	d.Leaf.BalanceMsat, d.TotalMsat = "1", "1"
	if _, err := d.Verify(d.RootHash); err == nil {
		t.Fatal("a padded one-leaf proof verified a doctored balance")
	}
	// An empty tree padded is two zero leaves; wider trees are unchanged.
	if Width(0) != 1 || widthAtLeast(0, MinWidth) != 2 || widthAtLeast(5, MinWidth) != 8 {
		t.Fatal("widths")
	}
	three := testLeaves(3)
	a, _ := Root(salt, three)
	b, _ := RootWidth(salt, three, MinWidth)
	if a != b {
		t.Fatal("padding changed a tree of three leaves")
	}
}

// TestCheckTagBindsTheLeafToItsAccount: a proof's path says nothing about
// whose leaf it is. A venue could hand two accounts with equal balances
// the same leaf (one liability instead of two) and every path would
// verify; only the tag, which the key's holder can recompute, tells.
func TestCheckTagBindsTheLeafToItsAccount(t *testing.T) {
	const ts = 180_000
	keyA, keyB := sha256.Sum256([]byte("key-A")), sha256.Sum256([]byte("key-B"))
	salt := RootSalt(AssetMsat, ts, 3)
	ls := []Leaf{{Tag: AccountTag(keyA[:], AssetMsat, "acc_A", ts), Amount: 5_000}, {Tag: AccountTag(keyB[:], AssetMsat, "acc_B", ts), Amount: 5_000}}
	tr, _ := Build(salt, ls)
	d, err := NewProofDoc(AssetMsat, tr, salt, ls[0].Tag, 0, ts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckTag("key-A", "acc_A"); err != nil {
		t.Fatalf("own leaf: %v", err)
	}
	for _, c := range [][2]string{{"key-B", "acc_B"}, {"key-A", "acc_B"}, {"key-B", "acc_A"}} {
		if err := d.CheckTag(c[0], c[1]); err == nil {
			t.Fatalf("A's leaf passed as %v's", c)
		}
	}
	d.TreeTsMs = "180001" // another tree's time: another tag
	if err := d.CheckTag("key-A", "acc_A"); err == nil {
		t.Fatal("the tag of another tree time passed")
	}
	d.TreeTsMs = "x"
	if err := d.CheckTag("key-A", "acc_A"); err == nil {
		t.Fatal("a bad treeTsMs passed")
	}
}

// SPEC's sats proof is {rootHash; totalMsat; rootSaltHex; treeTsMs; leaf;
// path}, without asset: a document of exactly that shape (as a client
// keeping only the SPEC fields saves it) is a sats proof and verifies, its
// owner included.
func TestSpecShapedSatsProofVerifies(t *testing.T) {
	const ts = 240_000
	key := sha256.Sum256([]byte("key-A"))
	salt := RootSalt(AssetMsat, ts, 5)
	ls := []Leaf{{Tag: AccountTag(key[:], AssetMsat, "acc_A", ts), Amount: 7_000}, {Tag: AccountTag(key[:], AssetMsat, "acc_B", ts), Amount: 1_000}}
	tr, _ := Build(salt, ls)
	d, err := NewProofDoc(AssetMsat, tr, salt, ls[0].Tag, 0, ts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(d)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	delete(m, "asset")
	b, _ = json.Marshal(m)
	spec, err := DecodeProof(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	v, err := spec.Verify(hexString(tr.Root().Hash))
	if err != nil {
		t.Fatalf("SPEC-shaped sats proof refused: %v", err)
	}
	if v.Balance != 7_000 || v.Total != 8_000 {
		t.Fatalf("verdict %+v", v)
	}
	if err := spec.CheckTag("key-A", "acc_A"); err != nil {
		t.Fatalf("SPEC-shaped sats proof's owner: %v", err)
	}
	// The default is the sats tree: a USDx proof without asset does not
	// verify (its amounts are in the micro fields).
	du, _ := NewProofDoc(AssetUsdx, tr, salt, ls[0].Tag, 0, ts)
	du.Asset = ""
	if _, err := du.Verify(""); err == nil {
		t.Fatal("a USDx proof without asset verified as a sats proof")
	}
}

func hexString(h Hash) string { return fmt.Sprintf("%x", h[:]) }
