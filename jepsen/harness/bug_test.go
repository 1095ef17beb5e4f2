//go:build jepsen_bug

package harness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/report"
)

// These tests run a real 3-node cluster with a planted bug and assert the
// harness fails the run for the right reason. Run them with
//
//	go test -tags jepsen_bug -count=1 ./jepsen/harness
//
// (make jepsen-short does). They need no root: no partitions except in the
// node bug's test, which skips without iptables.

func runWithBug(t *testing.T, o Options) *report.Summary {
	t.Helper()
	if testing.Short() {
		t.Skip("real cluster")
	}
	o.Nodes, o.Accounts, o.Rate = 3, 4, 40
	if o.Duration == 0 {
		o.Duration = 15 * time.Second
	}
	if o.Nemesis == "" {
		o.Nemesis = "none"
	}
	// A prebuilt perpd (JEPSEN_PERPD_BIN, or JEPSEN_PERPD_BUG_BIN for the
	// node bug) skips the build.
	if o.BuildTags == "" {
		o.Bin = os.Getenv("JEPSEN_PERPD_BIN")
	} else if bin := os.Getenv("JEPSEN_PERPD_BUG_BIN"); bin != "" {
		o.Bin, o.BuildTags = bin, ""
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
	if !sum.Failed() {
		t.Fatalf("the harness passed a run with the %q bug planted", o.Bug+o.BuildTags)
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
	sum := runWithBug(t, Options{BuildTags: "jepsen_bug", Nemesis: "partition", Duration: 40 * time.Second})
	if sum.Linearizable != checker.Violation {
		t.Fatalf("stale linearizable reads not flagged: %s", sum.Line())
	}
}
