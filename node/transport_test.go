package node

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Replication is never pipelined (transportConfig: hashicorp/raft#612
// parks a pipelined follower's replication for good after one refused
// append). raft asks the transport for a pipeline and falls back to one
// append at a time when it is refused.
func TestReplicationIsNotPipelined(t *testing.T) {
	ks, err := deriveKeys(NewClusterSecret())
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := newTransport(Config{RaftAddr: "127.0.0.1:0", Logger: hclog.NewNullLogger()}, ks)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p, err := tr.AppendEntriesPipeline("node2", "127.0.0.1:1")
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("AppendEntriesPipeline: %v, want raft.ErrPipelineReplicationNotSupported", err)
	}
	// The guard every node wraps the transport in passes the refusal on.
	if _, err := newSnapshotGuard(tr, hclog.NewNullLogger()).AppendEntriesPipeline("node2", "127.0.0.1:1"); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("the guard's AppendEntriesPipeline: %v", err)
	}
	if c := transportConfig(hclog.NewNullLogger()); c.MaxRPCsInFlight != 1 || c.MaxPool != 3 {
		t.Fatalf("transportConfig = %+v", c)
	}
}
