package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster"
)

// TestDevnetRefusesPortsOutOfRangeOrShared: the ports were only checked
// by the children, so --http-base 65000 (admin ports past 65535) or a
// --raft-base inside the HTTP range started node1, which bootstrapped
// its data directory, and then waited a minute for members that could
// never start ("no leader ... in time"). Both are refused before any
// directory is written or any child started.
func TestDevnetRefusesPortsOutOfRangeOrShared(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  cluster.DevnetConfig
		want string
	}{
		{"admin ports past 65535", cluster.DevnetConfig{Nodes: 3, HTTPBase: 65000}, "65535"},
		{"raft ports below 1", cluster.DevnetConfig{Nodes: 3, HTTPBase: 900}, "65535"},
		{"raft inside the HTTP range", cluster.DevnetConfig{Nodes: 3, HTTPBase: 8080, RaftBase: 8081}, "overlap"},
		{"admin equal to the raft base", cluster.DevnetConfig{Nodes: 2, HTTPBase: 8080, RaftBase: 7000, AdminBase: 7001}, "overlap"},
	} {
		tc.cfg.Dir = filepath.Join(t.TempDir(), "devnet")
		tc.cfg.Binary = "/bin/false"
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		d, err := cluster.StartDevnet(ctx, tc.cfg)
		cancel()
		if d != nil {
			d.Stop()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(tc.cfg.Dir); err == nil {
			t.Errorf("%s: refused after writing %s", tc.name, tc.cfg.Dir)
		}
	}
}

// A child that cannot start (here it says its port is taken and exits, as
// perpd serve does) ends the devnet's start at once with its reason. The
// devnet used to poll for a leader for a minute and then say only "no
// leader with 1 members in time".
func TestDevnetSaysWhyAChildEnded(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "perpd")
	script := "#!/bin/sh\necho 'error: listen 127.0.0.1:18080: bind: address already in use' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	d, err := cluster.StartDevnet(ctx, cluster.DevnetConfig{Binary: bin, Nodes: 3, Dir: filepath.Join(dir, "devnet"), HTTPBase: 18080})
	if d != nil {
		d.Stop()
	}
	if err == nil || !strings.Contains(err.Error(), "node1") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("StartDevnet: %v, want node1's own reason", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the reason came after %v", took)
	}
}
