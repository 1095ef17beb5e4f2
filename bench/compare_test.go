// Package bench holds the tests of the bench scripts' summaries.
package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perpd/perpd/cli/loadgen"
)

// writeResult writes a result as `perpd bench http --out` does.
func writeResult(t *testing.T, path string, okPerSec, p99Ms float64) {
	t.Helper()
	res := loadgen.HTTPResult{Label: filepath.Base(path), Config: loadgen.HTTPResultConfig{URLs: []string{"http://a/x", "http://b/x"}},
		Workers: 64, DurationMs: 20000, Requests: loadgen.OpResult{Count: 100, OK: 100, OKPerSec: okPerSec, P50Ms: 1, P99Ms: p99Ms,
			MaxMs: 2 * p99Ms, Errors: map[string]int64{}},
		Setup: map[string]loadgen.OpResult{loadgen.OpSignup: {Count: 64, OK: 64, OKPerSec: 99, P99Ms: 77, Errors: map[string]int64{}}}}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompareSummaryIsOneRound: the summary's rates, p99s and ratios are
// all the median round's (the round of the median rate ratio), so the
// printed perpd rate over the printed etcd rate is the printed ratio.
// Run 59's rates, whose per-column medians (etcd 3,436 from round 3,
// perpd 5,819 from round 2) make 1.69x beside the median round's 1.73x.
func TestCompareSummaryIsOneRound(t *testing.T) {
	dir := t.TempDir()
	rounds := []struct{ er, ep, pr, pp float64 }{
		{3555, 40, 6348, 20.8}, // rate 1.79x, p99 0.52x
		{3362, 50, 5819, 30},   // rate 1.73x, p99 0.60x: the median round
		{3436, 45, 5471, 25.2}, // rate 1.59x, p99 0.56x
	}
	for i, r := range rounds {
		writeResult(t, filepath.Join(dir, fmt.Sprintf("etcd-%d.json", i+1)), r.er, r.ep)
		writeResult(t, filepath.Join(dir, fmt.Sprintf("perpd-%d.json", i+1)), r.pr, r.pp)
	}
	out, err := exec.Command("bash", "-c", `. ./compare-lib.sh && median_round "$1" 3`, "-", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "2 3362 50 5819 30 1.73 0.60"; got != want {
		t.Fatalf("summary %q, want %q (round, etcd rate and p99, perpd rate and p99, rate and p99 ratios)", got, want)
	}
}
