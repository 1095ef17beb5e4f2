package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/internal/testlog"
)

// lockedBuffer is a log sink safe for the nodes' goroutines.
type lockedBuffer = testlog.Buffer

// TestForwardedWriteLoggedUnderOneIDOnBothNodes: a write sent to a
// follower is logged there (access line and forward) and on the leader
// (forwarded write applied) under the X-Request-Id the client got, with
// JSON logs (serve --log-format json), one object per line.
func TestForwardedWriteLoggedUnderOneIDOnBothNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	logs := &lockedBuffer{}
	c := clustertest.Start(t, 3, clustertest.LogOutput(logs), clustertest.LogLevel(hclog.Info), clustertest.LogJSON(),
		clustertest.Assemble(Assemble))
	f, leader := c.Followers()[0], c.Leader()
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.HTTPAddr+"/v1/signup", strings.NewReader(`{}`))
	req.Header.Set("idempotency-key", "one-id-two-nodes")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := res.Header.Get("X-Request-Id")
	if res.StatusCode != 201 || id == "" {
		t.Fatalf("signup through %s: %d, id %q", f.ID, res.StatusCode, id)
	}
	want := map[string]string{ // message -> node that must log it
		"request":                   f.ID,
		"write forwarded to leader": f.ID,
		"forwarded write applied":   leader.ID,
	}
	found := map[string]bool{}
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a JSON log line does not parse: %v: %s", err, line)
		}
		if m["request_id"] != id {
			continue
		}
		msg, _ := m["@message"].(string)
		if node, ok := want[msg]; ok && m["node"] == node {
			found[msg] = true
		}
	}
	for msg, node := range want {
		if !found[msg] {
			t.Errorf("no JSON line %q with request_id %s on %s\n%s", msg, id, node, logs.String())
		}
	}
}
