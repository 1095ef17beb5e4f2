package httpapi

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Refusals nothing meters (a write without a key, a POST to no route, a
// malformed body) each logged an info line: about 190 bytes of log for
// a 60-byte request, as fast as a client sends them (one client on
// loopback: 10,000 a second, 1.9 MB of log a second; load review of
// 2026-11-27), on the disk the raft log shares. Now each client address
// logs at most LogRefusalsBurst such lines at once (LogRefusalsPerMin a
// minute); the next line logged says how many were left out.
func TestRefusalLinesAreBoundedPerAddress(t *testing.T) {
	a := newTestAPI(t)
	var buf syncBuffer
	a.srv.log = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &buf})
	const n = 3 * LogRefusalsBurst
	for i := 0; i < n; i++ {
		if r := a.do(req{method: "POST", path: "/v1/orders"}); r.status != 401 {
			t.Fatalf("keyless order: %d", r.status)
		}
	}
	lines := strings.Count(buf.String(), "status=401")
	if lines > LogRefusalsBurst+1 {
		t.Fatalf("%d keyless writes from one address logged %d lines, want at most %d", n, lines, LogRefusalsBurst+1)
	}
	// The refusals still reach the log at the client's pace: a refusal
	// logged later says how many lines were left out.
	a.srv.meter = newMeter()
	a.do(req{method: "POST", path: "/v1/orders"})
	if !strings.Contains(buf.String(), "suppressed=") {
		t.Fatalf("no count of the lines left out:\n%s", buf.String())
	}
}
