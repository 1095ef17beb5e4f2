package httpapi

import (
	"bytes"
	"strconv"
	"testing"
)

// farAhead is a log index no test node reaches.
var farAhead = strconv.FormatUint(1<<40, 10)

// A wait for the log comes after authentication: an unknown caller is
// refused at once, not after waiting for an index that never comes.
func TestMinIndexWaitRunsAfterAuthentication(t *testing.T) {
	a := newTestAPI(t)
	for _, h := range []map[string]string{{"X-Min-Index": farAhead}, {"X-Consistency": "linearizable", "X-Min-Index": farAhead}} {
		r := a.do(req{method: "GET", path: "/v1/account", key: "pdk_unknown", header: h})
		if r.status != 401 || r.code() != "unauthorized" {
			t.Fatalf("unknown key with %v: %d %s (want an immediate 401)", h, r.status, r.body)
		}
		r = a.do(req{method: "GET", path: "/v1/account", header: h})
		if r.status != 401 {
			t.Fatalf("no key with %v: %d %s", h, r.status, r.body)
		}
	}
}

// A caller whose budget is empty gets 429 before any wait.
func TestMinIndexWaitRunsAfterTheMeter(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
	master, _ := a.signup()
	for i := 0; i < tinyRead()["read"].KeyBurst; i++ {
		if r := a.do(req{method: "GET", path: "/v1/account", key: master}); r.status != 200 {
			t.Fatalf("read %d: %d %s", i, r.status, r.body)
		}
	}
	r := a.do(req{method: "GET", path: "/v1/account", key: master, header: map[string]string{"X-Min-Index": farAhead}})
	if r.status != 429 || r.code() != "rate_limited" {
		t.Fatalf("over budget with X-Min-Index: %d %s (want an immediate 429)", r.status, r.body)
	}
}

// A public route without a budget draws a read token per client address
// before it waits; without the headers it stays unmetered.
func TestUnmeteredRouteDrawsReadBudgetBeforeWaiting(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
	burst := tinyRead()["read"].KeyBurst
	for i := 0; i < burst; i++ {
		r := a.do(req{method: "GET", path: "/deployment", header: map[string]string{"X-Min-Index": "1"}})
		if r.status != 200 || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(burst-1-i) {
			t.Fatalf("wait %d: %d %s remaining %q", i, r.status, r.body, r.header.Get("X-RateLimit-Remaining"))
		}
	}
	r := a.do(req{method: "GET", path: "/deployment", header: map[string]string{"X-Min-Index": farAhead}})
	if r.status != 429 {
		t.Fatalf("wait past the budget: %d %s", r.status, r.body)
	}
	r = a.do(req{method: "GET", path: "/deployment", header: map[string]string{"X-Consistency": "linearizable"}})
	if r.status != 429 {
		t.Fatalf("linearizable past the budget: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "GET", path: "/deployment"}); r.status != 200 || r.header.Get("X-Raft-Index") == "" {
		t.Fatalf("plain read: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "GET", path: "/deployment", header: map[string]string{"X-Min-Index": "x"}}); r.status != 400 {
		t.Fatalf("bad X-Min-Index: %d %s", r.status, r.body)
	}
}

func tinyRead() map[string]Budget {
	b := map[string]Budget{}
	for k, v := range Budgets {
		b[k] = v
	}
	b["read"] = Budget{Name: "read", PerKeyPerMin: 1, KeyBurst: 3, PerAccountPerMin: 1, AccountBurst: 3}
	return b
}

// The generated documents are built once per server and served as the
// same bytes, with an ETag that answers 304.
func TestDocumentsAreGeneratedOnce(t *testing.T) {
	a := newTestAPI(t)
	for _, p := range []string{"/openapi.json", "/llms.txt", "/llms-full.txt"} {
		first := a.do(req{method: "GET", path: p})
		if first.status != 200 || len(first.body) == 0 || first.header.Get("ETag") == "" {
			t.Fatalf("%s: %d etag %q", p, first.status, first.header.Get("ETag"))
		}
		for i := 0; i < 3; i++ {
			r := a.do(req{method: "GET", path: p})
			if !bytes.Equal(r.body, first.body) || r.header.Get("ETag") != first.header.Get("ETag") {
				t.Fatalf("%s differs between calls", p)
			}
		}
		if r := a.do(req{method: "GET", path: p, header: map[string]string{"If-None-Match": first.header.Get("ETag")}}); r.status != 304 || len(r.body) != 0 {
			t.Fatalf("%s with its ETag: %d", p, r.status)
		}
	}
	if n := a.srv.docs.builds.Load(); n != 1 {
		t.Fatalf("documents built %d times, want once", n)
	}
}
