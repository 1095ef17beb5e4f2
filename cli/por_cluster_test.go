package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm/por"
)

// TestPorAcrossACluster, as a new user would: fund an account through a
// follower, wait for the next tree (up to a minute of log time: the
// members' clock jumps to it), and find every member publishing the same
// roots; the proof fetched from the other follower verifies with `perpd
// por verify` against the leader's root.
func TestPorAcrossACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster and a clock jump to the next tree; skipped with -short")
	}
	bin := perpdBinary(t)
	clk := &shiftedClock{start: time.Now()}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50*time.Millisecond),
		clustertest.Clock(clk))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	fs := c.Followers()
	a, b := c.HTTP(fs[0].ID), c.HTTP(fs[1].ID)
	key := fundedAccount(t, a, "por")
	_, acc := railCall(t, a, "GET", "/v1/account", key, "", nil)
	var funded int64
	if st, m := railCall(t, a, "GET", "/por", "", "", nil); st == 200 {
		funded, _ = strconv.ParseInt(m["tsMs"].(string), 10, 64)
	}
	// Log time jumps just past the next minute, where the next tree is
	// built, instead of the test waiting up to a minute for it (less than
	// a minute: a leader takes such a step in one entry).
	now := clk.WallMs()
	clk.offsetMs.Add((now/por.CadenceMs+1)*por.CadenceMs - now + 200)
	var snap map[string]any
	if !clustertest.Poll(90*time.Second, func() bool {
		st, m := railCall(t, b, "GET", "/por", "", "", nil)
		if st != 200 {
			return false
		}
		ts, _ := strconv.ParseInt(m["tsMs"].(string), 10, 64)
		snap = m
		return ts > funded && m["liability"].(map[string]any)["totalMsat"] == acc["freeMsat"]
	}) {
		t.Fatalf("no tree with the funded account: %v (account %v)", snap, acc["freeMsat"])
	}
	liab := snap["liability"].(map[string]any)
	if snap["status"] != "clean" || snap["consolidationVerified"] != true || liab["leafCount"] != float64(1) {
		t.Fatalf("snapshot %v", snap)
	}
	// Every member built the same trees at the same entry.
	for _, m := range c.Live() {
		var got map[string]any
		if !clustertest.Poll(10*time.Second, func() bool {
			_, got = railCall(t, c.HTTP(m.ID), "GET", "/por", "", "", nil)
			return got != nil && got["tsMs"] == snap["tsMs"]
		}) {
			t.Fatalf("%s never showed tree %v: %v", m.ID, snap["tsMs"], got)
		}
		if g := got["liability"].(map[string]any); g["rootHash"] != liab["rootHash"] || g["rootSaltHex"] != liab["rootSaltHex"] ||
			got["liabilityUsdx"].(map[string]any)["rootHash"] != snap["liabilityUsdx"].(map[string]any)["rootHash"] {
			t.Fatalf("%s publishes other roots: %v / %v", m.ID, got, snap)
		}
	}
	st, proof := railCall(t, b, "GET", "/v1/por/proof", key, "", nil)
	if st != 200 || proof["treeTsMs"] != snap["tsMs"] {
		t.Fatalf("proof: %d %v", st, proof)
	}
	raw, _ := json.Marshal(proof)
	file := filepath.Join(t.TempDir(), "proof.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	_, leader := railCall(t, c.HTTP(c.Leader().ID), "GET", "/por", "", "", nil)
	root := leader["liability"].(map[string]any)["rootHash"].(string)
	out, err := exec.Command(bin, "por", "verify", "--proof", file, "--root", root).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "VALID") || !strings.Contains(string(out), "balance "+acc["freeMsat"].(string)+" msat") {
		t.Fatalf("perpd por verify: %v\n%s", err, out)
	}
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// shiftedClock is the system clock plus an offset the test moves forward
// (wall and monotonic alike), shared by every member of a test cluster.
type shiftedClock struct {
	start    time.Time
	offsetMs atomic.Int64
}

func (c *shiftedClock) WallMs() int64 { return time.Now().UnixMilli() + c.offsetMs.Load() }
func (c *shiftedClock) Mono() time.Duration {
	return time.Since(c.start) + time.Duration(c.offsetMs.Load())*time.Millisecond
}
