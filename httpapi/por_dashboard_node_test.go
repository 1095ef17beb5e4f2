package httpapi

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/por"
)

// runDashboardJS runs the dashboard's script under Node with a stub page,
// then test, and returns what test printed. Without node on PATH it skips
// (the browser test covers the page as a whole).
func runDashboardJS(t *testing.T, test string) string {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	page := string(porDashboardHTML)
	i, j := strings.Index(page, "<script>"), strings.LastIndex(page, "</script>")
	if i < 0 || j < i {
		t.Fatal("the dashboard has no script")
	}
	stub := `var el = {hidden: false, textContent: "", className: "", value: "", style: {}, addEventListener: function () {}, appendChild: function () {}};
var document = {getElementById: function () { return el; }, createElement: function () { return el; }};
function fetch() { return new Promise(function () {}); }
function setInterval() {}
`
	f := filepath.Join(t.TempDir(), "dash.js")
	if err := os.WriteFile(f, []byte(stub+page[i+len("<script>"):j]+"\n"+test), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(nodeBin, f).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return string(out)
}

// TestPorDashboardRefusesALeafOfAnotherTree: the root does not bind a
// proof's treeTsMs, the leaf's accountTag does. A venue that put a user's
// leaf of an older tree (tagged for that time, with that time's balance)
// into the current tree handed out a proof whose path leads to the
// current root: with that root typed as the expected one the page said
// VALID, without saying of which tree. It now refuses a typed root that
// GET /por published for another time than the proof's, and names the
// tree in every verdict.
func TestPorDashboardRefusesALeafOfAnotherTree(t *testing.T) {
	const t1, t2 = int64(1_800_000_000_000), int64(1_800_000_060_000)
	secret := []byte("0123456789abcdef0123456789abcdef")
	oldTag := por.AccountTag(secret, por.AssetMsat, "acc_victim", t1)
	salt1, salt2 := por.RootSalt(por.AssetMsat, t1, 7), por.RootSalt(por.AssetMsat, t2, 7)
	tree1, err := por.BuildWidth(salt1, []por.Leaf{{Tag: oldTag, Amount: 5}, {Tag: por.Hash{9}, Amount: 40}}, por.MinWidth)
	if err != nil {
		t.Fatal(err)
	}
	// The current tree holds the victim's old leaf: 5 msat, not today's.
	tree2, err := por.BuildWidth(salt2, []por.Leaf{{Tag: oldTag, Amount: 5}, {Tag: por.Hash{8}, Amount: 70}}, por.MinWidth)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := por.NewProofDoc(por.AssetMsat, tree2, salt2, oldTag, 0, t1)
	if err != nil {
		t.Fatal(err)
	}
	honest, err := por.NewProofDoc(por.AssetMsat, tree2, salt2, por.Hash{8}, 1, t2)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := tree1.Root().Hash, tree2.Root().Hash
	snap := map[string]any{
		"liability":     map[string]any{"rootHash": hex.EncodeToString(r2[:]), "tsMs": "1800000060000"},
		"liabilityUsdx": map[string]any{"rootHash": strings.Repeat("0", 64), "tsMs": "1800000060000"},
		"history": []any{
			map[string]any{"tsMs": "1800000060000", "rootHash": hex.EncodeToString(r2[:]), "usdxRootHash": strings.Repeat("0", 64)},
			map[string]any{"tsMs": "1800000000000", "rootHash": hex.EncodeToString(r1[:]), "usdxRootHash": strings.Repeat("0", 64)},
		},
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	out := runDashboardJS(t, `
var s = `+js(snap)+`, forged = `+js(forged)+`, honest = `+js(honest)+`, root = "`+hex.EncodeToString(r2[:])+`";
(async function () {
  for (const [name, p] of [["forged", forged], ["honest", honest]]) {
    let v;
    try { await verifyProof(p, root); checkTreeTime(s, p, root); v = "ok"; } catch (e) { v = "refused: " + e.message; }
    console.log(name + ": " + v);
  }
  // A root GET /por does not list: the time cannot be checked, no refusal.
  try { checkTreeTime(s, forged, "ab".repeat(32)); console.log("unlisted: ok"); } catch (e) { console.log("unlisted: refused"); }
})();
`)
	if !strings.Contains(out, "forged: refused: GET /por published root") || !strings.Contains(out, "a leaf of another tree") ||
		!strings.Contains(out, "honest: ok") || !strings.Contains(out, "unlisted: ok") {
		t.Fatalf("dashboard verdicts:\n%s", out)
	}
}
