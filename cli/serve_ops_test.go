package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/node"
)

// TestServeChecksItsOperationsFlags: among them, --backup-every or
// --backup-keep without --backup-dir was ignored, and the node ran without
// backups its operator had scheduled; the defaults alone are not refused.
func TestServeChecksItsOperationsFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown log format", []string{"--log-format", "xml"}, "--log-format"},
		{"backups too often", []string{"--backup-dir", t.TempDir(), "--backup-every", "10s"}, "--backup-every"},
		{"no backup kept", []string{"--backup-dir", t.TempDir(), "--backup-keep", "0"}, "--backup-keep"},
		{"a backup interval without a backup dir", []string{"--backup-every", "5m"}, "--backup-every needs --backup-dir"},
		{"the default backup interval given without a backup dir", []string{"--backup-every", "1h"}, "--backup-every needs --backup-dir"},
		{"backups kept without a backup dir", []string{"--backup-keep", "3"}, "--backup-keep needs --backup-dir"},
		{"a collector pace below 10", []string{"--gc-percent", "5"}, "--gc-percent"},
		{"a negative memory limit", []string{"--memory-limit-mb", "-2"}, "--memory-limit-mb"},
		{"a replica check more often than every 10s", []string{"--replica-check-interval", "9s"}, "--replica-check-interval 9s: at least 10s"},
		{"a negative replica check interval", []string{"--replica-check-interval", "-1m"}, "--replica-check-interval -1m0s: at least 10s"},
		{"a missing metrics token file", []string{"--metrics-token-file", filepath.Join(t.TempDir(), "none")}, "--metrics-token-file"},
	}
	world := filepath.Join(t.TempDir(), "world-readable")
	if err := os.WriteFile(world, []byte("tok"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name string
		args []string
		want string
	}{"a world-readable metrics token", []string{"--metrics-token-file", world}, "chmod 600"})
	for _, tc := range cases {
		if err := serveWith(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	tok := filepath.Join(t.TempDir(), "metrics-token")
	if err := os.WriteFile(tok, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := serveWith(t, "--log-format", "json", "--metrics-token-file", tok, "--backup-dir", t.TempDir(),
		"--backup-every", "1m", "--backup-keep", "3", "--replica-check-interval", "10s"); err != nil {
		t.Fatalf("valid operations flags: %v", err)
	}
	if err := serveWith(t, "--replica-check-interval", "0"); err != nil {
		t.Fatalf("the replica check switched off: %v", err)
	}
}

// TestJSONLogFormat: --log-format json writes one JSON object per line with
// the node id and the pairs as fields.
func TestJSONLogFormat(t *testing.T) {
	var buf strings.Builder
	f := opsFlags{logFormat: "json"}
	f.logger("info", "node7", &buf).Info("hello", "request_id", "abc")
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &m); err != nil {
		t.Fatalf("not one JSON object: %v: %q", err, buf.String())
	}
	if m["@message"] != "hello" || m["node"] != "node7" || m["request_id"] != "abc" || m["@level"] != "info" {
		t.Fatalf("JSON log line %v", m)
	}
	buf.Reset()
	f.logFormat = "text"
	f.logger("info", "node7", &buf).Info("hello")
	if strings.HasPrefix(buf.String(), "{") || !strings.Contains(buf.String(), "hello: node=node7") {
		t.Fatalf("text log line %q", buf.String())
	}
}

// TestServeRefusesSilentlyDefaultedFlags: a negative genesis budget was
// taken as "the default" by the state machine, fixed for the cluster's
// life (on bench, --signups-per-hour -1 became 3000, not bench's cap),
// an unknown --log-level ("warning", a typo) logged at info, and
// --snapshot-threshold 0 ran with the default 16384.
func TestServeRefusesSilentlyDefaultedFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a negative signup cap", []string{"--signups-per-hour", "-1"}, "--signups-per-hour"},
		{"a negative signup cap on bench", []string{"--deployment", "bench", "--signups-per-hour", "-5"}, "--signups-per-hour"},
		{"negative faucet grants", []string{"--faucet-grants-per-hour", "-3"}, "--faucet-grants-per-hour"},
		{"an unknown log level", []string{"--log-level", "warning"}, "--log-level"},
		{"a zero snapshot threshold", []string{"--snapshot-threshold", "0"}, "--snapshot-threshold 0: must be at least 1"},
		{"a zero PoR threshold", []string{"--por-beside-apply-from", "0"}, "--por-beside-apply-from 0: must be at least 1"},
	}
	for _, tc := range cases {
		if err := serveWith(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	if err := serveWith(t, "--log-level", "WARN", "--signups-per-hour", "10", "--faucet-grants-per-hour", "1"); err != nil {
		t.Fatalf("valid flags: %v", err)
	}
}

// TestServeRefusesABackupDirItCannotWrite: --backup-dir was first used
// by the first scheduled backup, an hour (--backup-every) after the
// start, so a node started on a file or an unwritable directory ran
// without backups until then, with nothing said at start-up.
func TestServeRefusesABackupDirItCannotWrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := serveWith(t, "--backup-dir", file); err == nil || !strings.Contains(err.Error(), "--backup-dir") {
		t.Errorf("a file as --backup-dir: %v, want an error naming --backup-dir", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(ro, 0o700)
		if err := serveWith(t, "--backup-dir", ro); err == nil || !strings.Contains(err.Error(), "--backup-dir") {
			t.Errorf("a read-only --backup-dir: %v, want an error naming --backup-dir", err)
		}
	}
	fresh := filepath.Join(t.TempDir(), "backups", "node1")
	if err := serveWith(t, "--backup-dir", fresh); err != nil {
		t.Fatalf("a --backup-dir still to be made: %v", err)
	}
}

// TestServePassesTrailingLogsZeroToRaft: --trailing-logs 0 (raft's "keep no
// entries after a snapshot", legal there) reached node.Config as its zero
// value and ran with the default 10240. Raft now gets 0, and other values
// as given.
func TestServePassesTrailingLogsZeroToRaft(t *testing.T) {
	defer func(f func(node.Config) (*node.Node, error)) { newNode = f }(newNode)
	var got raft.ReloadableConfig
	newNode = func(cfg node.Config) (*node.Node, error) {
		n, err := node.New(cfg)
		if err == nil {
			got = n.Raft.ReloadableConfig()
		}
		return n, err
	}
	for _, tc := range []struct{ threshold, trailing uint64 }{{1, 0}, {256, 64}} {
		if err := serveWith(t, "--snapshot-threshold", fmt.Sprint(tc.threshold), "--trailing-logs", fmt.Sprint(tc.trailing)); err != nil {
			t.Fatalf("--snapshot-threshold %d --trailing-logs %d: %v", tc.threshold, tc.trailing, err)
		}
		if got.SnapshotThreshold != tc.threshold || got.TrailingLogs != tc.trailing {
			t.Errorf("--snapshot-threshold %d --trailing-logs %d: raft runs with %d and %d",
				tc.threshold, tc.trailing, got.SnapshotThreshold, got.TrailingLogs)
		}
	}
}
