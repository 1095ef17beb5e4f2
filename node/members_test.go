package node_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

func freeRaftAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestInConfigurationTellsJoinedFromFresh: `serve --join` joins whenever
// the node is not in the configuration, so a failed first join is retried
// on the next start.
func TestInConfigurationTellsJoinedFromFresh(t *testing.T) {
	log := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	fresh, err := node.New(node.Config{ID: "fresh", DataDir: t.TempDir(), RaftAddr: freeRaftAddr(t), AdminToken: "t", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Shutdown()
	if fresh.InConfiguration() {
		t.Fatal("a node that never bootstrapped or joined is not in a configuration")
	}
	boot, err := node.New(node.Config{ID: "boot", DataDir: t.TempDir(), RaftAddr: freeRaftAddr(t), AdminToken: "t", Bootstrap: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer boot.Shutdown()
	deadline := time.Now().Add(5 * time.Second)
	for !boot.InConfiguration() {
		if time.Now().After(deadline) {
			t.Fatal("a bootstrapped node is in its own configuration")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
