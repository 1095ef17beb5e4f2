package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
)

// TestRestoreDrillFromScheduledBackups is the operator's restore drill:
// scheduled backups run on a live 3-node cluster with traders in it (and
// prune to --backup-keep); then every node is stopped and its data
// directory wiped, a new cluster is formed on empty disks, and the newest
// backup is restored into it. The restored state hash equals the backup's,
// every replica converges on it, and every trader's balances and keys are
// back as they were.
func TestRestoreDrillFromScheduledBackups(t *testing.T) {
	if testing.Short() {
		t.Skip("two three-node clusters; skipped with -short")
	}
	opts := []clustertest.Option{clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50 * time.Millisecond)}
	c := clustertest.Start(t, 3, opts...)
	railMinIndex.Store(0)
	if !clustertest.Poll(15*time.Second, func() bool {
		return everyLiveMember(c, func(id string) bool { _, ok := feedLast(c, id, "ETHUSD"); return ok })
	}) {
		t.Fatal("no ETH print reached every member")
	}

	// Two traders, signed up and funded through different nodes; one rests
	// an order (reserved margin is part of what must come back).
	type trader struct{ key, acct string }
	var traders []trader
	for i, m := range c.Members() {
		if i == 2 {
			break
		}
		base := c.HTTP(m.ID)
		idem := "drill-" + m.ID
		st, r := railCall(t, base, "POST", "/v1/signup", "", idem+"-signup", map[string]any{})
		if st != 201 {
			t.Fatalf("signup: %d %v", st, r)
		}
		tr := trader{r["apiKey"].(string), r["accountId"].(string)}
		if st, r := railCall(t, base, "POST", "/v1/faucet", tr.key, idem+"-faucet", map[string]any{}); st != 201 {
			t.Fatalf("faucet: %d %v", st, r)
		}
		traders = append(traders, tr)
	}
	p, _ := feedLast(c, c.Leader().ID, "ETHUSD")
	var tick int64
	c.Leader().Node.Machine().Read(func(st *fsm.State, _ uint64) { tick = st.Market.MarketsByID["ETH-PERP"].Params.TickSizeQ8 })
	limit := p.MidQ8 / 2 / tick * tick
	if st, r := railCall(t, c.HTTP("node1"), "POST", "/v1/orders", traders[0].key, "drill-rest", map[string]any{
		"marketId": "ETH-PERP", "side": "buy", "type": "limit", "contracts": "5",
		"reduceOnly": false, "limitPriceQ8": strconv.FormatInt(limit, 10)}); st != 201 || r["status"] != "resting" {
		t.Fatalf("limit order: %d %v", st, r)
	}
	balances := func(c *clustertest.Cluster, id string) []string {
		t.Helper()
		var out []string
		for _, tr := range traders {
			st, r := railCall(t, c.HTTP(id), "GET", "/v1/account", tr.key, "", nil)
			if st != 200 {
				t.Fatalf("account on %s: %d %v", id, st, r)
			}
			out = append(out, r["accountId"].(string)+" free="+r["freeMsat"].(string)+" reserved="+r["reservedMsat"].(string))
		}
		return out
	}
	before := balances(c, "node3")
	if strings.Contains(before[0], "reserved=0") {
		t.Fatalf("the resting order reserved nothing: %v", before)
	}

	// Scheduled backups on a follower, every 150ms, keeping 2: wait until
	// the first one has been pruned.
	dir := t.TempDir()
	f := c.Followers()[0]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cluster.RunBackups(ctx, f.Node, cluster.BackupConfig{Dir: dir, Every: 150 * time.Millisecond, Keep: 2, Log: hclog.NewNullLogger()})
	}()
	var first string
	if !clustertest.Poll(30*time.Second, func() bool {
		list, err := cluster.ListBackups(dir, f.ID)
		if err != nil || len(list) == 0 {
			return false
		}
		if first == "" {
			first = list[len(list)-1].File
		}
		_, err = os.Stat(first)
		return len(list) == 2 && os.IsNotExist(err)
	}) {
		t.Fatalf("backups never rotated (first %s)", first)
	}
	cancel()
	<-done
	list, err := cluster.ListBackups(dir, f.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("after pruning: %d backups, %v", len(list), err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 6 {
		t.Fatalf("want 2 backups of 3 files each, have %v", files)
	}
	newest, err := cluster.NewestBackup(dir)
	if err != nil {
		t.Fatal(err)
	}
	sidecar, err := os.ReadFile(newest.File + ".sha256")
	if err != nil || string(sidecar) != newest.SHA256+"  "+filepath.Base(newest.File)+"\n" {
		t.Fatalf("sha256 sidecar %q, %v", sidecar, err)
	}
	data, err := os.ReadFile(newest.File)
	if err != nil {
		t.Fatal(err)
	}
	// A damaged copy fails verification.
	bad := *newest
	bad.File = filepath.Join(t.TempDir(), "damaged.snap")
	damaged := append([]byte(nil), data...)
	damaged[len(damaged)-10] ^= 0xff
	if err := os.WriteFile(bad.File, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cluster.VerifyBackup(&bad); err == nil {
		t.Fatal("a backup with a flipped byte verified")
	}

	// Disaster: every node stops and loses its disk.
	c.Stop()
	for _, m := range c.Members() {
		if err := os.RemoveAll(m.DataDir); err != nil {
			t.Fatal(err)
		}
	}

	// A new cluster on empty disks, restored from the newest backup through
	// a follower (relayed to the leader).
	c2 := clustertest.Start(t, 3, opts...)
	railMinIndex.Store(0)
	view, err := c2.Admin(c2.Followers()[0].ID).Restore(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	if view.RestoredStateHash != newest.StateHash {
		t.Fatalf("restored state hash %q, backup's %q", view.RestoredStateHash, newest.StateHash)
	}
	if err := c2.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range c2.Members() {
		after := balances(c2, m.ID)
		if strings.Join(after, "\n") != strings.Join(before, "\n") {
			t.Fatalf("balances on %s after the restore:\n%v\nbefore:\n%v", m.ID, after, before)
		}
	}
}

// A backup directory that cannot be written (a full or read-only backup
// disk) failed every scheduled backup while snapshots' ledger checks kept
// passing, and only the log said so. The schedule's status now counts the
// failures and keeps the time of the newest complete backup, which
// /metrics exports (perpd_backup_failures_total,
// perpd_backup_last_success_timestamp_seconds) for PerpdBackupsFailing.
func TestScheduledBackupsReportFailuresAndTheLastSuccess(t *testing.T) {
	c := clustertest.Start(t, 1)
	n := c.Leader().Node
	run := func(dir string, until func(*cluster.BackupStatus) bool) *cluster.BackupStatus {
		t.Helper()
		status := cluster.NewBackupStatus(dir, n.Config().ID)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			cluster.RunBackups(ctx, n, cluster.BackupConfig{Dir: dir, Every: 40 * time.Millisecond, Keep: 2,
				Log: hclog.NewNullLogger(), Status: status})
		}()
		ok := clustertest.Poll(20*time.Second, func() bool { return until(status) })
		cancel()
		<-done
		if !ok {
			t.Fatalf("backups into %s: failures %d, last success %v", dir, status.Failures(), status.LastSuccess())
		}
		return status
	}

	// A path below a regular file cannot be made a directory.
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	broken := run(filepath.Join(file, "backups"), func(s *cluster.BackupStatus) bool { return s.Failures() >= 2 })
	if last := broken.LastSuccess(); last.Before(began.Add(-time.Second)) || last.After(began.Add(time.Second)) {
		t.Fatalf("no backup ever succeeded: last success %v, want about %v (when scheduling began)", last, began)
	}

	dir := t.TempDir()
	good := run(dir, func(*cluster.BackupStatus) bool { return len(mustList(t, dir)) > 0 })
	list := mustList(t, dir)
	if len(list) == 0 || good.Failures() != 0 || good.LastSuccess().UnixMilli() != list[0].Created.UnixMilli() {
		t.Fatalf("a working schedule: failures %d, last success %v, backups %v", good.Failures(), good.LastSuccess(), list)
	}
	// A restarted node starts from the newest backup it finds.
	if again := cluster.NewBackupStatus(dir, n.Config().ID); again.LastSuccess().UnixMilli() != list[0].Created.UnixMilli() {
		t.Fatalf("status after a restart: %v, want the newest backup's %v", again.LastSuccess(), list[0].Created)
	}
}

func mustList(t *testing.T, dir string) []*cluster.Backup {
	t.Helper()
	list, err := cluster.ListBackups(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	return list
}
