package httpapi

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/internal/testlog"
	"github.com/perpd/perpd/node"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer = testlog.Buffer

var ourID = regexp.MustCompile(`^[0-9a-f]{32}$`)

type observed struct {
	method, route string
	status        int
}

func newLoggedAPI(t *testing.T, opts ...Option) (*testAPI, *syncBuffer, *[]observed) {
	t.Helper()
	logs := &syncBuffer{}
	var mu sync.Mutex
	var seen []observed
	opts = append(opts, WithRequestObserver(func(method, route string, status int, _ time.Duration) {
		mu.Lock()
		seen = append(seen, observed{method, route, status})
		mu.Unlock()
	}))
	a := newTestAPIWith(t, opts, func(c *node.Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs})
	})
	return a, logs, &seen
}

// TestRequestIDOnEveryResponseAndItsLogLine: every answer, routed or not,
// carries a fresh id of the node's own; a client's id is never taken as
// ours (only logged beside it); the access line has the id, the route and
// the status, and never the query string.
func TestRequestIDOnEveryResponseAndItsLogLine(t *testing.T) {
	a, logs, seen := newLoggedAPI(t)
	r1 := a.do(req{method: "POST", path: "/v1/signup", idem: "rid-1", body: map[string]any{},
		header: map[string]string{"X-Request-Id": "client-chosen.id_1"}})
	if r1.status != 201 {
		t.Fatalf("signup: %d %s", r1.status, r1.body)
	}
	id1 := r1.header.Get("X-Request-Id")
	if !ourID.MatchString(id1) {
		t.Fatalf("X-Request-Id %q: want the node's own 32 hex digits, not the client's", id1)
	}
	r2 := a.do(req{method: "GET", path: "/v1/no-such-route?apiKey=sekrit-in-query"})
	id2 := r2.header.Get("X-Request-Id")
	if r2.status != 404 || !ourID.MatchString(id2) || id2 == id1 {
		t.Fatalf("unrouted: %d id %q (first %q)", r2.status, id2, id1)
	}
	r3 := a.do(req{method: "GET", path: "/v1/markets/NOPE-PERP"})
	log := logs.String()
	var line1, line2 string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "request_id="+id1) && strings.Contains(l, "request:") {
			line1 = l
		}
		if strings.Contains(l, "request_id="+id2) && strings.Contains(l, "request:") {
			line2 = l
		}
	}
	for _, want := range []string{"[INFO]", "method=POST", "path=/v1/signup", "route=/v1/signup", "status=201", "client_request_id=client-chosen.id_1"} {
		if !strings.Contains(line1, want) {
			t.Errorf("signup log line lacks %q: %s", want, line1)
		}
	}
	if !strings.Contains(line2, "[DEBUG]") || !strings.Contains(line2, "route=unmatched") || !strings.Contains(line2, "status=404") {
		t.Errorf("unrouted log line: %q", line2)
	}
	if strings.Contains(log, "sekrit") {
		t.Error("the query string reached the log")
	}
	got := map[observed]bool{}
	for _, o := range *seen {
		got[o] = true
	}
	for _, want := range []observed{{"POST", "/v1/signup", 201}, {"GET", "unmatched", 404}, {"GET", "/v1/markets/:id", r3.status}} {
		if !got[want] {
			t.Errorf("observer never saw %+v (saw %+v)", want, *seen)
		}
	}
}

// TestRequestIDFromATrustedProxyOnlyWhenWellFormed: behind a configured
// proxy its well-formed id is kept end to end; an overlong or oddly
// spelled one is replaced.
func TestRequestIDFromATrustedProxyOnlyWhenWellFormed(t *testing.T) {
	a, _, _ := newLoggedAPI(t, WithTrustedProxies([]string{"127.0.0.1"}))
	for _, tc := range []struct {
		in   string
		keep bool
	}{
		{"edge-7f3a:42", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"has space", false},
		{`quote"d`, false},
		{"semi;colon", false},
	} {
		r := a.do(req{method: "GET", path: "/v1/markets", header: map[string]string{"X-Request-Id": tc.in}})
		got := r.header.Get("X-Request-Id")
		if tc.keep && got != tc.in {
			t.Errorf("%q from a trusted proxy: answered %q, want it kept", tc.in, got)
		}
		if !tc.keep && (got == tc.in || !ourID.MatchString(got)) {
			t.Errorf("%q from a trusted proxy: answered %q, want a fresh id", tc.in, got)
		}
	}
}

// TestOrderFlowSuccessLogsAtDebug: a filled order and an armed dead-man
// switch log at debug (they are on record in the history and the
// metrics); a refused order and a refused cancel at info.
func TestOrderFlowSuccessLogsAtDebug(t *testing.T) {
	a, logs, _ := newLoggedAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	ok := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "quiet-1", body: orderBody("BTC-PERP", "buy", "market", "1", nil)})
	bad := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "loud-1", body: orderBody("BTC-PERP", "buy", "market", "-1", nil)})
	gone := a.do(req{method: "DELETE", path: "/v1/orders/no-such-order", key: key, idem: nextIdem()})
	arm := a.do(req{method: "POST", path: "/v1/cancel-all-after", key: key, idem: nextIdem(), body: map[string]any{"timeoutMs": "60000"}})
	if ok.status != 201 || bad.status != 400 || gone.status != 404 || arm.status != 200 {
		t.Fatalf("statuses: order %d, bad order %d, cancel %d, dead-man switch %d", ok.status, bad.status, gone.status, arm.status)
	}
	lineOf := func(r resp) string {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "request_id="+r.header.Get("X-Request-Id")) && strings.Contains(l, "request:") {
				return l
			}
		}
		t.Fatalf("no access line for %s", r.header.Get("X-Request-Id"))
		return ""
	}
	for _, c := range []struct {
		name  string
		r     resp
		level string
	}{{"filled order", ok, "[DEBUG]"}, {"refused order", bad, "[INFO]"}, {"refused cancel", gone, "[INFO]"},
		{"dead-man switch", arm, "[DEBUG]"}} {
		if l := lineOf(c.r); !strings.Contains(l, c.level) {
			t.Errorf("%s: want %s: %s", c.name, c.level, l)
		}
	}
}

// TestKeyInThePathIsRefusedAndNeverLogged: a key pasted into a path (a
// client's mistake) is refused 401 before routing, on routed and unmatched
// paths alike, never echoed in the answer, and logged redacted. Before,
// DELETE /v1/orders/<key> answered 404 "order <key> not found" and the
// access line logged the path with the key in it at info.
func TestKeyInThePathIsRefusedAndNeverLogged(t *testing.T) {
	a, logs, _ := newLoggedAPI(t)
	key, _ := a.signup()
	hex := strings.TrimPrefix(key, keyPrefix)
	for _, r := range []req{
		{method: "DELETE", path: "/v1/orders/" + key, key: key, idem: nextIdem()},
		{method: "POST", path: "/v1/" + key, key: key},
		{method: "GET", path: "/v1/account?note=" + key, key: key},
		{method: "POST", path: "/v1/signup/" + strings.ToUpper(key[:4]) + key[4:]},
	} {
		res := a.do(r)
		if res.status != 401 || res.code() != "unauthorized" || strings.Contains(string(res.body), hex) {
			t.Fatalf("%s %s: %d %s", r.method, r.path, res.status, res.body)
		}
	}
	if strings.Contains(logs.String(), hex) {
		t.Fatalf("the key reached the log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "path=/v1/orders/pdk_[redacted]") {
		t.Fatalf("no redacted access line:\n%s", logs.String())
	}
	// Not a key: shorter, or not hex, passes on to routing.
	if r := a.do(req{method: "GET", path: "/v1/orders/pdk_" + hex[:40], key: key}); r.status != 404 {
		t.Fatalf("a shorter id: %d %s", r.status, r.body)
	}
}

func TestRedactKeys(t *testing.T) {
	k := "pdk_" + strings.Repeat("ab", 24)
	for in, want := range map[string]string{
		"/v1/orders/" + k:               "/v1/orders/pdk_[redacted]",
		"/x/" + k + "/y/" + k + "z":     "/x/pdk_[redacted]/y/pdk_[redacted]z",
		"/v1/pdk_pdk_" + k[4:]:          "/v1/pdk_pdk_[redacted]",
		"/v1/orders/pdk_" + k[4:50]:     "/v1/orders/pdk_" + k[4:50],
		"/v1/orders/pdk_" + k[5:] + "g": "/v1/orders/pdk_" + k[5:] + "g",
		"/v1/markets/BTC-PERP/candles":  "/v1/markets/BTC-PERP/candles",
	} {
		if got := redactKeys(in); got != want {
			t.Errorf("redactKeys(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPercentEncodedKeyInTheQueryIsRefused: a key in the query string with
// some of its characters percent-encoded (as a client's URL builder may
// write the "_") is the same leaked key: refused 401 like the plain one,
// never echoed back. Before, only the raw query was searched, so
// ?pdk%5F<hex>=1 on a history route answered 400 naming the parameter,
// the key included, and ?note=pdk%5F<hex> was served.
func TestPercentEncodedKeyInTheQueryIsRefused(t *testing.T) {
	a, logs, _ := newLoggedAPI(t)
	key, _ := a.signup()
	hex := strings.TrimPrefix(key, keyPrefix)
	for _, path := range []string{
		"/v1/deposits?pdk%5F" + hex + "=1",
		"/v1/account?note=pdk%5f" + hex,
		"/v1/account?note=%70dk_" + hex,
		"/v1/account?a=%zz&note=pdk%5F" + hex,
	} {
		res := a.do(req{method: "GET", path: path, key: key})
		if res.status != 401 || res.code() != "unauthorized" || strings.Contains(string(res.body), hex) {
			t.Fatalf("GET %s: %d %s", path, res.status, res.body)
		}
	}
	if strings.Contains(logs.String(), hex) {
		t.Fatalf("the key reached the log:\n%s", logs.String())
	}
}
