package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// TestAdminVerifyBackupAndFeatureLevelCommands runs the two operator
// commands against a one-node cluster: verify-backup lists the verified
// backups and fails on a damaged one; feature-level shows the level and
// what the member's build implements, and --raise raises it.
func TestAdminVerifyBackupAndFeatureLevelCommands(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.GenesisAtLevelZero())
	n := c.Leader()
	dir := t.TempDir()
	var last *cluster.Backup
	for range 2 {
		b, err := cluster.WriteBackup(n.Node, dir)
		if err != nil {
			t.Fatal(err)
		}
		last = b
	}
	out, err := runAdmin(t, "verify-backup", "--dir", dir, "--all")
	if err != nil {
		t.Fatal(err)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 2 || listed[0]["stateHash"] != last.StateHash {
		t.Fatalf("verify-backup --all: %v %s", err, out)
	}
	data, err := os.ReadFile(last.File)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(last.File, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runAdmin(t, "verify-backup", "--dir", dir); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("a damaged newest backup verified: %v", err)
	}

	args := []string{"feature-level", "--addr", n.AdminAddr, "--admin-token-file", tokenFile(t, c.Token)}
	var v cluster.FeatureLevelView
	out, err = runAdmin(t, args...)
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.FeatureLevel != 0 || len(v.Members) != 1 || v.Raisable == nil || *v.Raisable != fsm.FeatureLevel {
		t.Fatalf("feature-level: %v %s", err, out)
	}
	out, err = runAdmin(t, append(args, "--raise", "1")...)
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.FeatureLevel != 1 {
		t.Fatalf("feature-level --raise 1: %v %s", err, out)
	}
	if _, err := runAdmin(t, append(args, "--raise", "1")...); err == nil || !strings.Contains(err.Error(), "levels only rise") {
		t.Fatalf("raising to the same level again: %v", err)
	}
}

// TestAdminSnapshotFileIsPrivate: `perpd admin snapshot --out F` wrote F
// (every account, balance and key hash of the venue) with mode 0644, for
// every user of the machine to read, while its .sha256 and manifest beside
// it, and every scheduled backup, are 0600.
func TestAdminSnapshotFileIsPrivate(t *testing.T) {
	c := clustertest.Start(t, 1)
	n := c.Leader()
	out := filepath.Join(t.TempDir(), "b.snap")
	if _, err := runAdmin(t, "snapshot", "--addr", n.AdminAddr, "--admin-token-file", tokenFile(t, c.Token), "--out", out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{out, out + ".sha256", cluster.ManifestPath(out)} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %o, want 600", filepath.Base(f), m)
		}
	}
}

// --timeout bounds the whole call: the admin client's own 30 s default
// used to cut `admin replicas --timeout 55s` short at 30 s.
func TestAdminClientHonoursTimeoutFlag(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, 55 * time.Second} {
		f := adminFlags{addr: "127.0.0.1:1", token: "t", timeout: d}
		c, err := f.client()
		if err != nil {
			t.Fatal(err)
		}
		if c.HTTP.Timeout != d {
			t.Fatalf("--timeout %v: the client gives up after %v", d, c.HTTP.Timeout)
		}
	}
}

// TestAdminSnapshotIsSyncedBeforeItIsNamed: the downloaded snapshot was
// renamed to --out unsynced, so a power loss could leave its name (and the
// synced manifest beside it) over missing data. A sync that fails now
// fails the command and leaves no --out file.
func TestAdminSnapshotIsSyncedBeforeItIsNamed(t *testing.T) {
	c := clustertest.Start(t, 1)
	n := c.Leader()
	out := filepath.Join(t.TempDir(), "b.snap")
	synced := 0
	defer func(f func(*os.File) error) { syncFile = f }(syncFile)
	syncFile = func(f *os.File) error {
		if f.Name() == out+".partial" {
			synced++
		}
		return errors.New("disk gone")
	}
	_, err := runAdmin(t, "snapshot", "--addr", n.AdminAddr, "--admin-token-file", tokenFile(t, c.Token), "--out", out)
	if err == nil || synced != 1 {
		t.Fatalf("a snapshot whose sync failed: error %v, %d syncs of the download", err, synced)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--out exists after a failed sync: %v", err)
	}
}

// TestAdminRefusesANonPositiveTimeout: --timeout 0 (or below) made every
// admin command fail with a bare "context deadline exceeded" before it
// sent anything, which reads like a node that did not answer.
func TestAdminRefusesANonPositiveTimeout(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		f := adminFlags{addr: "127.0.0.1:1", token: "t", timeout: d}
		if _, err := f.client(); err == nil || !strings.Contains(err.Error(), "--timeout") {
			t.Errorf("--timeout %v: %v, want an error naming --timeout", d, err)
		}
	}
}

// TestAdminSnapshotRefusesAnExistingOut: `admin snapshot --out F` renamed
// the download over an existing F and rewrote F.sha256 and its manifest,
// so a typo or a repeated command replaced an earlier snapshot without a
// word. F is now refused before the node is asked, unless --force.
func TestAdminSnapshotRefusesAnExistingOut(t *testing.T) {
	asked := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "b.snap")
	old := []byte("an earlier snapshot")
	for _, f := range []string{out, out + ".sha256", cluster.ManifestPath(out)} {
		if err := os.WriteFile(f, old, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := runAdmin(t, "snapshot", "--addr", srv.Listener.Addr().String(), "--admin-token-file", tokenFile(t, "t"), "--out", out)
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("an existing --out: %v, want a refusal naming --force", err)
	}
	if got, _ := os.ReadFile(out); asked != 0 || string(got) != string(old) {
		t.Fatalf("the refusal asked the node %d times and left --out %q", asked, got)
	}
	// b (no .snap) would write b.json, the manifest of b.snap (operator
	// audit, 2026-11-29: b.snap then failed its own check).
	sibling := strings.TrimSuffix(out, ".snap")
	_, err = runAdmin(t, "snapshot", "--addr", srv.Listener.Addr().String(), "--admin-token-file", tokenFile(t, "t"), "--out", sibling)
	if err == nil || !strings.Contains(err.Error(), cluster.ManifestPath(out)) {
		t.Fatalf("--out %s beside %s: %v, want a refusal naming the shared manifest", sibling, out, err)
	}
	if got, _ := os.ReadFile(cluster.ManifestPath(out)); asked != 0 || string(got) != string(old) {
		t.Fatalf("the refusal asked the node %d times and left the manifest %q", asked, got)
	}

	c := clustertest.Start(t, 1)
	n := c.Leader()
	res, err := runAdmin(t, "snapshot", "--addr", n.AdminAddr, "--admin-token-file", tokenFile(t, c.Token), "--out", out, "--force")
	if err != nil {
		t.Fatalf("--force over an existing --out: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(res), &v); err != nil || v["file"] != out {
		t.Fatalf("--force: %v %s", err, res)
	}
	if fi, err := os.Stat(out); err != nil || v["bytes"] != fmt.Sprint(fi.Size()) {
		t.Fatalf("the answer's bytes %v, the file's %v (%v)", v["bytes"], fi.Size(), err)
	}
	b, err := cluster.ReadManifest(out)
	if err == nil {
		err = cluster.VerifyBackup(b)
	}
	if err != nil {
		t.Fatalf("--force left an --out that does not verify against its manifest: %v", err)
	}
}

// TestStatusTableSaysWhenTheNodeIsNoMember: `admin status --human` on a
// removed node printed "leader  raft= http=" and nothing else to notice
// (operator audit, 2026-11-29).
func TestStatusTableSaysWhenTheNodeIsNoMember(t *testing.T) {
	var b strings.Builder
	st := &node.Status{ID: "node3", State: "Follower", Members: []node.Member{{ID: "node1", Raft: "127.0.0.1:7001", Suffrage: "Voter"}}}
	if err := printStatusTable(&b, st); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "none known") || !strings.Contains(out, "node3 is not in the configuration") {
		t.Fatalf("a removed node's table:\n%s", out)
	}
	b.Reset()
	st.Members = append(st.Members, node.Member{ID: "node3", Raft: "127.0.0.1:7003", Suffrage: "Voter"})
	st.Leader.ID = "node1"
	if err := printStatusTable(&b, st); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "not in the configuration") || strings.Contains(out, "none known") {
		t.Fatalf("a member's table:\n%s", out)
	}
}
