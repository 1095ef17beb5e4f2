package node

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A heartbeat from a newer leader reaches raft through its main loop, never
// through the transport's fast-path callback, which would raise the term
// under a deposed leader's main loop (heartbeat.go). With the callback in
// place the network transport answers the heartbeat without the consumer
// ever seeing it.
func TestHeartbeatsGoThroughRaftsMainLoop(t *testing.T) {
	raw, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	g := newSnapshotGuard(raw, hclog.NewNullLogger())
	g.start(&fakeHeld{})
	t.Cleanup(func() { _ = g.Close() })
	var fastPath atomic.Bool
	g.SetHeartbeatHandler(func(rpc raft.RPC) {
		fastPath.Store(true)
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7}, nil)
	})

	leader, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Close() })
	heartbeat := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n3"), Addr: []byte(leader.LocalAddr())},
		Term:      7,
	}
	done := make(chan error, 1)
	var resp raft.AppendEntriesResponse
	go func() { done <- leader.AppendEntries("n1", g.LocalAddr(), heartbeat, &resp) }()

	select {
	case rpc := <-g.Consumer():
		if req, ok := rpc.Command.(*raft.AppendEntriesRequest); !ok || req.Term != 7 || len(req.Entries) != 0 {
			t.Fatalf("raft got %#v", rpc.Command)
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
	case err := <-done:
		t.Fatalf("the heartbeat was answered without raft's main loop (fast path %v): %v %+v", fastPath.Load(), err, resp)
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat never reached raft")
	}
	if err := <-done; err != nil || !resp.Success {
		t.Fatalf("heartbeat answer %+v, %v", resp, err)
	}
	if fastPath.Load() {
		t.Fatal("the fast-path callback ran")
	}
}
