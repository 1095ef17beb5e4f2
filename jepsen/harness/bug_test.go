//go:build jepsen_bug

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/jepsen/report"
)

// These tests run a real 3-node cluster with a planted bug and assert the
// harness fails the run for the right reason. Run them with
//
//	go test -tags jepsen_bug -count=1 -parallel 8 ./jepsen/harness
//
// (make jepsen-short does). They need no root: no partitions except in the
// node bug's test, which skips without iptables.
//
// They run at once, each cluster on its own loopback addresses (and so
// ports and uids): a run mostly waits, on the clients' rate and the
// settling phases, so a few clusters share two cores. clusterBases, not
// -parallel, bounds how many: -parallel 8 lets the node bug's test start
// at once beside three others instead of queueing behind them (go test's
// default -parallel is the number of cores).

// clusterBases are the address ranges (Options.IPBase) the client-bug
// tests take turns on: at most three of their clusters run at once, none
// on the default range (a `make jepsen` may hold it) or on 30 (the
// iptables test cuts 127.0.0.31-32).
var clusterBases = func() chan int {
	c := make(chan int, 3)
	for _, b := range []int{40, 50, 60} {
		c <- b
	}
	return c
}()

// nodeBugIPBase is the partition test's own range: it runs beside the
// others, and its cuts and uids (iptables.Setup) name only these addresses.
const nodeBugIPBase = 90

// clockBugIPBase and clockControlIPBase are the clock tests' own ranges:
// the planted clock bug's run and its control run go at once, beside the
// others.
const (
	clockBugIPBase     = 70
	clockControlIPBase = 80
)

// perpdBuilds build perpd once per tag set for every test (concurrent
// callers wait for the one build), unless JEPSEN_PERPD_BIN
// (JEPSEN_PERPD_BUG_BIN for the node bug) names a prebuilt one.
var (
	perpdBuilds = map[string]func() (string, error){
		"":           sync.OnceValues(func() (string, error) { return buildShared("") }),
		"jepsen_bug": sync.OnceValues(func() (string, error) { return buildShared("jepsen_bug") }),
	}
	binEnv = map[string]string{"": "JEPSEN_PERPD_BIN", "jepsen_bug": "JEPSEN_PERPD_BUG_BIN"}

	buildDirsMu sync.Mutex
	buildDirs   []string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	buildDirsMu.Lock()
	for _, d := range buildDirs {
		_ = os.RemoveAll(d)
	}
	buildDirsMu.Unlock()
	os.Exit(code)
}

func buildShared(tags string) (string, error) {
	mod, err := findModule()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "perpd-jepsen-bug-test-")
	if err != nil {
		return "", err
	}
	buildDirsMu.Lock()
	buildDirs = append(buildDirs, dir)
	buildDirsMu.Unlock()
	return buildPerpd(context.Background(), mod, dir, tags)
}

// sharedPerpd is the perpd binary built with tags, for Options.Bin.
func sharedPerpd(t *testing.T, tags string) string {
	t.Helper()
	if bin := os.Getenv(binEnv[tags]); bin != "" {
		return bin
	}
	bin, err := perpdBuilds[tags]()
	if err != nil {
		t.Fatalf("build perpd (tags %q): %v", tags, err)
	}
	return bin
}

func runWithBug(t *testing.T, o Options) *report.Summary {
	t.Helper()
	planted := o.Bug + o.BuildTags
	sum := runCluster(t, o)
	if !sum.Failed() {
		t.Fatalf("the harness passed a run with the %q bug planted", planted)
	}
	return sum
}

// runCluster runs o on a real 3-node cluster (the perpd built with
// o.BuildTags) and returns its summary, whatever the verdict.
func runCluster(t *testing.T, o Options) *report.Summary {
	t.Helper()
	if testing.Short() {
		t.Skip("real cluster")
	}
	t.Parallel()
	o.Nodes, o.Accounts, o.Rate = 3, 4, 40
	if o.Duration == 0 {
		o.Duration = 15 * time.Second
	}
	if o.Nemesis == "" {
		o.Nemesis = "none"
	}
	o.Bin, o.BuildTags = sharedPerpd(t, o.BuildTags), ""
	if o.IPBase == 0 {
		o.IPBase = <-clusterBases
		defer func() { clusterBases <- o.IPBase }()
	}
	o.ReportRoot = t.TempDir()
	o.Log = testLog{t}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sum, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(sum.Line())
	for _, r := range sum.Results {
		if r.Verdict != checker.Valid {
			t.Logf("%s: %s: %s", r.Name, r.Verdict, strings.Join(r.Details[:min(len(r.Details), 4)], " | "))
		}
	}
	return sum
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }

func verdict(sum *report.Summary, name string) checker.Verdict {
	for _, r := range sum.Results {
		if r.Name == name {
			return r.Verdict
		}
	}
	return ""
}

func TestHarnessCatchesPlantedStaleReads(t *testing.T) {
	sum := runWithBug(t, Options{Bug: "stale-read"})
	if sum.Linearizable != checker.Violation || len(sum.Visualizations) == 0 {
		t.Fatalf("stale reads not flagged as non-linearizable with a visualization: %s", sum.Line())
	}
}

func TestHarnessCatchesPlantedLostAcknowledgements(t *testing.T) {
	sum := runWithBug(t, Options{Bug: "lost-ack"})
	if sum.Lost == 0 || sum.DriftMsat <= 0 || verdict(sum, "money") != checker.Violation {
		t.Fatalf("lost acknowledged writes not flagged: %s", sum.Line())
	}
}

func TestHarnessCatchesPlantedDoubleApplies(t *testing.T) {
	sum := runWithBug(t, Options{Bug: "double-apply"})
	if sum.Duplicates == 0 || verdict(sum, "money") != checker.Violation {
		t.Fatalf("double applies not flagged: %s", sum.Line())
	}
}

// A replica that applies a fill twice, consistently with itself (its
// position and balance move with the second fill): the node's own sums
// hold, but the order has two fills and the settled trader's views differ
// between nodes.
func TestHarnessCatchesAReplicaApplyingAFillTwice(t *testing.T) {
	sum := runWithBug(t, Options{Bug: "replica-double-fill"})
	if sum.Duplicates == 0 || verdict(sum, "trading") != checker.Violation || !detail(sum, "trading", "settled, yet") {
		t.Fatalf("a fill applied twice on one replica not flagged: %s", sum.Line())
	}
}

// A client that resends a withdrawal under a fresh key: the venue cannot
// tell it from a new one and pays it too. The listing shows withdrawals
// no recorded invocation made.
func TestHarnessCatchesAWithdrawalSentTwice(t *testing.T) {
	sum := runWithBug(t, Options{Bug: "withdraw-twice"})
	if sum.Duplicates == 0 || verdict(sum, "withdrawals") != checker.Violation || !detail(sum, "withdrawals", "which no invocation of this run sent") {
		t.Fatalf("a withdrawal sent twice not flagged: %s", sum.Line())
	}
}

// A final read that leaves out an acknowledged withdrawal (balance moved
// to match): lost, the replicas differ, and the payout book holds a
// payout no listing shows.
func TestHarnessCatchesADroppedWithdrawal(t *testing.T) {
	sum := runWithBug(t, Options{Bug: "withdrawal-listing-dropped"})
	if sum.Lost == 0 || verdict(sum, "withdrawals") != checker.Violation || !detail(sum, "withdrawals", "is not listed") {
		t.Fatalf("a dropped withdrawal not flagged: %s", sum.Line())
	}
}

// A replica that records a returned withdrawal (the simulated rail
// returns every Lightning payout) without giving amount and fee back to
// free: its balance does not add up, and the settled replicas differ.
// Every withdrawal goes to Lightning, so a short run surely makes some.
func TestHarnessCatchesAReturnNotCreditedBack(t *testing.T) {
	sum := runWithBug(t, Options{Bug: "return-not-credited", LightningPercent: 100})
	if verdict(sum, "withdrawals") != checker.Violation || !detail(sum, "withdrawals", "withdrawals held or paid") {
		t.Fatalf("a returned withdrawal not credited back not flagged: %s", sum.Line())
	}
}

// detail reports whether checker name gave a detail containing s.
func detail(sum *report.Summary, name, s string) bool {
	for _, r := range sum.Results {
		for _, d := range r.Details {
			if r.Name == name && strings.Contains(d, s) {
				return true
			}
		}
	}
	return false
}

// The node bug (node/bug_stale_read.go) makes X-Consistency: linearizable
// reads skip the read index; a follower cut off by a partition then serves
// stale balances.
func TestHarnessCatchesNodeServingStaleLinearizableReads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("partitions need root")
	}
	sum := runWithBug(t, Options{BuildTags: "jepsen_bug", Nemesis: "partition", Duration: 40 * time.Second, IPBase: nodeBugIPBase})
	if sum.Linearizable != checker.Violation {
		t.Fatalf("stale linearizable reads not flagged: %s", sum.Line())
	}
}

// The clock bug (node/bug_clock.go) makes a leader stamp entries from its
// calendar clock. Seed 1 makes the clock nemesis's first fault restart
// the leader three hours ahead (ClockSteps, its Perm and Intn on Seed+1)
// and hand it leadership back, unless it won it back itself; either way
// its calendar stamps the log and log time runs ahead a minute an entry,
// which only the log-time checker judges. No traders: no price feed
// to pin, whose 30 s wait the bug's clock would otherwise add.
var clockScenario = Options{Nemesis: "clock", Seed: 1, Duration: 16 * time.Second, Traders: -1}

func TestHarnessCatchesALeaderStampingFromItsSteppedClock(t *testing.T) {
	o := clockScenario
	o.BuildTags, o.IPBase = "jepsen_bug", clockBugIPBase
	sum := runWithBug(t, o)
	if verdict(sum, "log-time") != checker.Violation || !detail(sum, "log-time", "log time jumped") {
		t.Fatalf("a leader stamping from a clock three hours ahead not flagged by the log-time checker: %s", sum.Line())
	}
}

// The same scenario on the perpd without the bug must pass the log-time
// checker, whether the stepped node gets leadership by transfer
// (awaitCaughtUp first) or wins the election right after its restart ("it
// leads already", about one run in three). The second failed it until
// 2026-11-28: the new leader stamped before it had applied its log (raft
// applies it once the new term commits), saw no log time and took its
// calendar as a new cluster would, so log time ran three hours ahead at a
// minute an entry. A new leader now stamps nothing before a barrier of its
// term (node.awaitInheritedLog; TestNewLeaderStampsNothingBeforeApplyingItsLog).
func TestHarnessPassesTheClockScenarioWithoutTheBug(t *testing.T) {
	o := clockScenario
	o.IPBase = clockControlIPBase
	sum := runCluster(t, o)
	d := firstFault(t, sum, "clock-start")
	t.Logf("first clock fault: %s", d)
	if f := strings.Fields(d); len(f) < 2 || !strings.Contains(d, "(leader)") || !strings.Contains(d, "step 3h0m0s") ||
		!strings.Contains(d, "it leads already") && !strings.Contains(d, "-> "+f[1]) {
		t.Fatalf("the scenario's first clock fault is not the three-hour step on a leader it relies on: %q", d)
	}
	for _, r := range sum.Results {
		if r.Name == "log-time" && len(r.Details) > 0 {
			t.Log(r.Details[0])
		}
	}
	if v := verdict(sum, "log-time"); v != checker.Valid {
		t.Fatalf("the log-time checker judged the run without the bug %s: %s", v, sum.Line())
	}
}

// firstFault is the detail of the run's first nemesis event f, read from
// its history.
func firstFault(t *testing.T, sum *report.Summary, f string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sum.Dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var op history.Op
		if json.Unmarshal(line, &op) == nil && op.Process == history.NemesisProcess && op.F == f {
			return op.Detail
		}
	}
	return ""
}
