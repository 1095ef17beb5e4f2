package por

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/perpd/perpd/internal/porverify"
)

// TestEveryProofVerifiesIndependently: trees of every awkward size (empty,
// one leaf, powers of two and one either side) over balances that mix
// zero, one msat and amounts near the int64 total, each leaf's proof
// checked by internal/porverify (no code shared with this package); the
// independent root over the same leaves is the tree's, and the leaves
// add up to the root's total, so no padding slot adds or hides a sum.
func TestEveryProofVerifiesIndependently(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 257} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const ts = int64(1_800_000_000_000)
			salt := RootSalt(AssetMsat, ts, uint64(n))
			keys, accts := make([]string, n), make([]string, n)
			leaves := make([]Leaf, n)
			tags := make([][]byte, n)
			bals := make([]int64, n)
			var left int64 = math.MaxInt64
			for i := range leaves {
				keys[i], accts[i] = fmt.Sprintf("key-%d-%d", n, i), fmt.Sprintf("acc_%d", i)
				tags[i] = porverify.Tag(keys[i], AssetMsat, accts[i], ts)
				switch i % 4 {
				case 0:
					bals[i] = 0
				case 1:
					bals[i] = 1
				case 2:
					bals[i] = rng.Int63n(1_000_000_000_000) % (left + 1)
				default:
					bals[i] = left / 4 // large: the total stays within int64
				}
				left -= bals[i]
				copy(leaves[i].Tag[:], tags[i])
				leaves[i].Amount = bals[i]
			}
			tr, err := BuildWidth(salt, leaves, MinWidth)
			if err != nil {
				t.Fatal(err)
			}
			root := tr.Root()
			pub := porverify.Published{RootHash: hex.EncodeToString(root.Hash[:]), TotalMsat: int64(root.Sum), LeafCount: n,
				RootSaltHex: hex.EncodeToString(salt[:]), TsMs: ts}
			if h, sum := porverify.Root(salt[:], tags, bals); h != pub.RootHash || !sum.IsInt64() || sum.Int64() != pub.TotalMsat {
				t.Fatalf("independent root %s / %s, tree %s / %d", h, sum, pub.RootHash, pub.TotalMsat)
			}
			var total int64
			for i := range leaves {
				d, err := NewProofDoc(AssetMsat, tr, salt, leaves[i].Tag, i, ts)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(d)
				bal, err := porverify.Check(b, pub, keys[i], accts[i])
				if err != nil || bal != bals[i] {
					t.Fatalf("leaf %d: balance %d (want %d): %v", i, bal, bals[i], err)
				}
				total += bal
			}
			if total != pub.TotalMsat {
				t.Fatalf("leaves add to %d, total %d", total, pub.TotalMsat)
			}
			if _, err := tr.Proof(n); err == nil {
				t.Fatal("a proof of a padding slot")
			}
		})
	}
}
