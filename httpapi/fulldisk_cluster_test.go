package httpapi_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/internal/testdisk"
	"github.com/perpd/perpd/node"
)

// A follower whose disk filled (docs/deploy.md, "When the disk fills"):
//   - /healthz said "behind the leader" with db true; it now says the log
//     store's disk is full, with db false (perpd_raft_store_failing 1);
//   - a write sent to it waited the whole read-your-writes bound (3 s) for
//     an apply that could not come; it answers when the leader has;
//   - a key minted since was refused 401 there, as if invalid; it is 503,
//     ask another node;
//   - once the disk has room it catches up without a restart.
func TestAFollowerWithAFullDisk(t *testing.T) {
	var dir3 string
	c := clustertest.Start(t, 3, clustertest.CheckInvariants(false), clustertest.Assemble(cli.Assemble),
		clustertest.PrepareData(func(id, dir string) {
			if id == "node3" {
				testdisk.MountTmpfs(t, dir, "16m")
				dir3 = dir
			}
		}))
	if c.Leader().ID == "node3" {
		if err := c.Leader().Node.Raft.LeadershipTransfer().Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitLeader(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	leader, f := c.HTTP(c.Leader().ID), c.HTTP("node3")
	filler := testdisk.Fill(t, dir3)

	var h map[string]any
	if !clustertest.Poll(15*time.Second, func() bool {
		// Writes give the follower entries to append.
		call(t, leader, "POST", "/v1/signup", "", "", "{}")
		var st int
		st, h = healthOf(t, f)
		return st == http.StatusServiceUnavailable && h["db"] == false
	}) {
		t.Fatalf("a follower with a full disk: healthz %v", h)
	}
	if reason, _ := h["reason"].(string); !strings.Contains(reason, "disk is full") || strings.Contains(reason, dir3) {
		t.Fatalf("healthz reason %q", reason)
	}

	start := time.Now()
	st, signed, body := call(t, f, "POST", "/v1/signup", "", "full-disk-signup", "{}")
	if st != 201 {
		t.Fatalf("a signup through the follower: %d %s", st, body)
	}
	if took := time.Since(start); took >= node.MaxReadWait {
		t.Fatalf("the write was answered after %v: it waited for an apply the follower cannot make", took)
	}
	var su struct{ APIKey string }
	_ = json.Unmarshal(body, &su)
	if st, _, body := call(t, f, "GET", "/v1/account", su.APIKey, "", ""); st != 503 || !strings.Contains(string(body), "cannot write its log") {
		t.Fatalf("a key minted since, on the follower: %d %s (want 503)", st, body)
	}
	if st, _, body := call(t, leader, "GET", "/v1/account", su.APIKey, "", ""); st != 200 {
		t.Fatalf("the same key on the leader: %d %s", st, body)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !clustertest.Poll(15*time.Second, func() bool { st, h = healthOf(t, f); return st == http.StatusOK }) {
		t.Fatalf("the follower with room again: healthz %d %v", st, h)
	}
	// Healthy again is not yet at the signup's index: the read asks for
	// it, as a client reading its own write does.
	if st, _, body := call(t, f, "GET", "/v1/account", su.APIKey, "", "", "X-Min-Index", signed.Get("X-Raft-Index")); st != 200 {
		t.Fatalf("the key on the follower caught up: %d %s", st, body)
	}
}
