package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/perpd/perpd/cluster/clustertest"
)

// Without TLS a node keeps raft and admin on loopback, and its calls to
// other members carry the cluster's peer bearer in clear: a --join to
// another host would send it across the network (an attacks review,
// 2026-11-27). serve refuses such a --join before starting.
func TestServeWithoutTLSRefusesAJoinOffThisMachine(t *testing.T) {
	join := func(via string) error {
		cmd := serveCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"--data", t.TempDir(), "--http", clustertest.FreeAddr(t), "--raft", clustertest.FreeAddr(t),
			"--admin", clustertest.FreeAddr(t), "--log-level", "error", "--join", via})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return cmd.ExecuteContext(ctx)
	}
	err := join("192.0.2.1:9080")
	if err == nil || !strings.Contains(err.Error(), "loopback") || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("a --join to another host without TLS: %v", err)
	}
	if err := join(clustertest.FreeAddr(t)); err != nil && strings.Contains(err.Error(), "loopback") {
		t.Fatalf("a loopback --join: %v", err)
	}
}
