package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/por"
)

func runPor(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := porCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetIn(bytes.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// testProof is leaf 2 of a three-leaf sats tree, as the API serves it.
func testProof(t *testing.T) ([]byte, string) {
	t.Helper()
	salt := por.RootSalt(por.AssetMsat, 120_000, 7)
	var leaves []por.Leaf
	for i, amt := range []int64{5_000, 0, 1_234_000} {
		leaves = append(leaves, por.Leaf{Tag: por.AccountTag([]byte{byte(i)}, por.AssetMsat, "acc", 120_000), Amount: amt})
	}
	tr, err := por.Build(salt, leaves)
	if err != nil {
		t.Fatal(err)
	}
	d, err := por.NewProofDoc(por.AssetMsat, tr, salt, leaves[2].Tag, 2, 120_000)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(d, "", "  ")
	root := tr.Root().Hash
	return b, hex.EncodeToString(root[:])
}

func TestPorVerify(t *testing.T) {
	proof, root := testProof(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "proof.json")
	if err := os.WriteFile(file, proof, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runPor(t, nil, "verify", "--proof", file, "--root", root)
	if err != nil || !strings.HasPrefix(out, "VALID") || !strings.Contains(out, "balance 1234000 msat") || !strings.Contains(out, "expected one") {
		t.Fatalf("valid proof: %v\n%s", err, out)
	}
	out, err = runPor(t, proof, "verify", "--proof", "-")
	if err != nil || !strings.HasPrefix(out, "VALID") || !strings.Contains(out, "own root") {
		t.Fatalf("from stdin: %v\n%s", err, out)
	}
	other := strings.Repeat("0", 64)
	if out, err = runPor(t, nil, "verify", "--proof", file, "--root", other); !errors.Is(err, errProofInvalid) || !strings.HasPrefix(out, "INVALID") {
		t.Fatalf("another root: %v\n%s", err, out)
	}
	// A claimed balance raised by one msat no longer leads to the root.
	var d map[string]any
	_ = json.Unmarshal(proof, &d)
	d["leaf"].(map[string]any)["balanceMsat"] = "1234001"
	bad, _ := json.Marshal(d)
	if out, err = runPor(t, bad, "verify", "--proof", "-"); !errors.Is(err, errProofInvalid) || !strings.Contains(out, "INVALID") {
		t.Fatalf("tampered balance: %v\n%s", err, out)
	}
	// A negative sibling sum is refused as such.
	d["leaf"].(map[string]any)["balanceMsat"] = "1234000"
	d["path"].([]any)[0].(map[string]any)["siblingSumMsat"] = "-5"
	bad, _ = json.Marshal(d)
	if out, err = runPor(t, bad, "verify", "--proof", "-"); err == nil || !strings.Contains(out, "non-negative") {
		t.Fatalf("negative sum: %v\n%s", err, out)
	}
	if _, err = runPor(t, []byte("not json"), "verify", "--proof", "-"); err == nil {
		t.Fatal("garbage verified")
	}
	if _, err = runPor(t, nil, "verify"); err == nil {
		t.Fatal("no --proof accepted")
	}
}

// TestPorVerifyChecksTheLeafOwner: with --account the verifier recomputes
// the leaf's tag from the key (read from the environment) and refuses a
// leaf of another account, which a path alone cannot tell apart.
func TestPorVerifyChecksTheLeafOwner(t *testing.T) {
	const ts = 240_000
	keyA, keyB := sha256.Sum256([]byte("key-A")), sha256.Sum256([]byte("key-B"))
	salt := por.RootSalt(por.AssetMsat, ts, 9)
	leaves := []por.Leaf{{Tag: por.AccountTag(keyA[:], por.AssetMsat, "acc_A", ts), Amount: 7_000},
		{Tag: por.AccountTag(keyB[:], por.AssetMsat, "acc_B", ts), Amount: 7_000}}
	tr, _ := por.Build(salt, leaves)
	d, _ := por.NewProofDoc(por.AssetMsat, tr, salt, leaves[0].Tag, 0, ts)
	proof, _ := json.Marshal(d)

	t.Setenv("PERPD_API_KEY", "key-A")
	out, err := runPor(t, proof, "verify", "--proof", "-", "--account", "acc_A")
	if err != nil || !strings.Contains(out, "the leaf is account acc_A's") {
		t.Fatalf("own leaf: %v\n%s", err, out)
	}
	t.Setenv("PERPD_API_KEY", "key-B")
	if out, err = runPor(t, proof, "verify", "--proof", "-", "--account", "acc_B"); !errors.Is(err, errProofInvalid) || !strings.Contains(out, "accountTag") {
		t.Fatalf("A's leaf shown to B: %v\n%s", err, out)
	}
	if out, err = runPor(t, proof, "verify", "--proof", "-"); err != nil || !strings.Contains(out, "not checked") {
		t.Fatalf("without --account: %v\n%s", err, out)
	}
	t.Setenv("PERPD_API_KEY", "")
	if _, err = runPor(t, proof, "verify", "--proof", "-", "--account", "acc_A"); err == nil || errors.Is(err, errProofInvalid) {
		t.Fatalf("--account without a key: %v", err)
	}
}

// TestPorVerifyNamesTheTagKey: a proof carries leaf.tagKeyId (not in
// SPEC), the id of the key whose hash keys its tag. The strict decoder
// takes it; a check under another key is refused naming that id, so a
// user who rotated keys knows which one to use.
func TestPorVerifyNamesTheTagKey(t *testing.T) {
	const ts = 300_000
	keyNew := sha256.Sum256([]byte("key-new"))
	salt := por.RootSalt(por.AssetMsat, ts, 9)
	leaves := []por.Leaf{{Tag: por.AccountTag(keyNew[:], por.AssetMsat, "acc_A", ts), Amount: 7_000}}
	tr, _ := por.BuildWidth(salt, leaves, por.MinWidth)
	d, _ := por.NewProofDoc(por.AssetMsat, tr, salt, leaves[0].Tag, 0, ts)
	d.Leaf.TagKeyID = "key_new_id"
	proof, _ := json.Marshal(d)
	if !strings.Contains(string(proof), `"tagKeyId":"key_new_id"`) {
		t.Fatalf("no tagKeyId in %s", proof)
	}
	t.Setenv("PERPD_API_KEY", "key-old")
	out, err := runPor(t, proof, "verify", "--proof", "-", "--account", "acc_A")
	if !errors.Is(err, errProofInvalid) || !strings.Contains(out, "key_new_id") {
		t.Fatalf("the old key: %v\n%s", err, out)
	}
	t.Setenv("PERPD_API_KEY", "key-new")
	if out, err = runPor(t, proof, "verify", "--proof", "-", "--account", "acc_A"); err != nil || !strings.Contains(out, "the leaf is account acc_A's") {
		t.Fatalf("the new key: %v\n%s", err, out)
	}
}

// The root does not bind treeTsMs, only the leaf's tag does: a venue can
// put A's leaf tagged for an older tree (1_000 msat, A's balance then)
// into the current tree while A holds 7_000 now. With the current root and
// --account the proof passes as "the tree of" the older time; --ts, the
// tsMs GET /por publishes beside the root, catches it.
func TestPorVerifyChecksTheTreeTime(t *testing.T) {
	const old, now = 180_000, 240_000
	key := sha256.Sum256([]byte("key-A"))
	salt := por.RootSalt(por.AssetMsat, now, 9)
	leaves := []por.Leaf{{Tag: por.AccountTag(key[:], por.AssetMsat, "acc_A", old), Amount: 1_000},
		{Tag: por.AccountTag([]byte("b"), por.AssetMsat, "acc_B", now), Amount: 3_000}}
	tr, _ := por.Build(salt, leaves)
	root := tr.Root().Hash
	d, _ := por.NewProofDoc(por.AssetMsat, tr, salt, leaves[0].Tag, 0, old)
	proof, _ := json.Marshal(d)
	t.Setenv("PERPD_API_KEY", "key-A")
	out, err := runPor(t, proof, "verify", "--proof", "-", "--root", hex.EncodeToString(root[:]), "--ts", "240000", "--account", "acc_A")
	if !errors.Is(err, errProofInvalid) || !strings.Contains(out, "not the expected tree of 240000") {
		t.Fatalf("an older tree's leaf in the current root passed: %v\n%s", err, out)
	}
	good, _ := por.NewProofDoc(por.AssetMsat, tr, salt, leaves[1].Tag, 1, now)
	proof, _ = json.Marshal(good)
	if out, err = runPor(t, proof, "verify", "--proof", "-", "--root", hex.EncodeToString(root[:]), "--ts", "240000"); err != nil {
		t.Fatalf("the current tree's leaf: %v\n%s", err, out)
	}
}
