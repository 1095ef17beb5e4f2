package httpapi

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
