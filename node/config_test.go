package node_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

// TestNoTrailingLogsReachesRaft: a zero TrailingLogs is the default, so
// raft's own 0 (keep no entries after a snapshot) could not be asked for;
// NoTrailingLogs asks for it, and set beside a count it is refused.
func TestNoTrailingLogsReachesRaft(t *testing.T) {
	base := node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: loopbackAddr(t), Bootstrap: true,
		AdminToken: "t", ClusterSecret: "s", Logger: hclog.NewNullLogger()}
	for _, tc := range []struct {
		name string
		none bool
		want uint64
	}{{"zero", false, node.DefaultTrailingLogs}, {"none", true, 0}} {
		cfg := base
		cfg.DataDir, cfg.RaftAddr, cfg.NoTrailingLogs = t.TempDir(), loopbackAddr(t), tc.none
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := n.Raft.ReloadableConfig().TrailingLogs
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: raft keeps %d trailing entries, want %d", tc.name, got, tc.want)
		}
	}
	both := base
	both.NoTrailingLogs, both.TrailingLogs = true, 5
	if n, err := node.New(both); err == nil || !strings.Contains(err.Error(), "NoTrailingLogs") {
		if n != nil {
			_ = n.Shutdown()
		}
		t.Fatalf("NoTrailingLogs with TrailingLogs 5: %v, want a refusal", err)
	}
}
