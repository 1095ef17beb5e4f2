package httpapi

import (
	"strings"
	"testing"
)

// A request's path is bounded only by the header limit (1 MiB), and an
// unmatched route has no guard: no key, no budget. Its access line (a
// write logs at info) and its 404 must not carry the whole path, or one
// anonymous connection writes the node's log as fast as it can send
// (an attacks review, 2026-11-27: 50 POSTs of a 1 MB path wrote 50 MB to
// a devnet node's log in 1.8 seconds).
func TestAnOverlongPathIsLoggedAndEchoedBounded(t *testing.T) {
	a, logs, _ := newLoggedAPI(t)
	key, _ := a.signup()
	before := len(logs.String())
	long := strings.Repeat("c", 100_000)
	for _, r := range []req{
		{method: "POST", path: "/x" + long},
		{method: "DELETE", path: "/v1/orders/" + long, key: key, idem: nextIdem()},
		// A multi-byte character across the cut stays whole.
		{method: "POST", path: "/" + strings.Repeat("é", 50_000)},
	} {
		res := a.do(r)
		if res.status != 404 {
			t.Fatalf("%s %.40s...: %d %.200s", r.method, r.path, res.status, res.body)
		}
		if len(res.body) > 2*maxLoggedPathBytes {
			t.Errorf("%s %.40s...: the 404 is %d bytes", r.method, r.path, len(res.body))
		}
	}
	out := logs.String()[before:]
	if len(out) > 3*(2*maxLoggedPathBytes+400) {
		t.Fatalf("three requests logged %d bytes", len(out))
	}
	if !strings.Contains(out, "(100002 bytes)") || !strings.Contains(out, "(100011 bytes)") {
		t.Fatalf("the access lines do not say how long the path was:\n%s", out)
	}
	if strings.Contains(out, "\\x") || strings.Contains(out, "\ufffd") {
		t.Fatalf("a character was cut in two:\n%s", out)
	}
}

// The method is the client's too: any token, bounded only by the header
// limit. An unknown method of 60 KB was logged whole (1.2 MB for 20
// requests on a devnet node) and echoed in the 405.
func TestAnOverlongMethodIsLoggedAndEchoedBounded(t *testing.T) {
	a, logs, _ := newLoggedAPI(t)
	before := len(logs.String())
	method := strings.Repeat("M", 10_000)
	for _, path := range []string{"/v1/orders", "/v1/" + strings.Repeat("p", 10_000)} {
		res := a.do(req{method: method, path: path})
		if res.status != 405 && res.status != 404 {
			t.Fatalf("%.40s: %d %.200s", path, res.status, res.body)
		}
		if len(res.body) > 2*maxLoggedPathBytes {
			t.Errorf("%.40s: the refusal is %d bytes", path, len(res.body))
		}
	}
	out := logs.String()[before:]
	if len(out) > 2*(3*maxLoggedPathBytes+400) {
		t.Fatalf("two requests logged %d bytes", len(out))
	}
	if !strings.Contains(out, "(10000 bytes)") {
		t.Fatalf("the access lines do not say how long the method was:\n%.1000s", out)
	}
}
