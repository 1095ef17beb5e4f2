package httpapi

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/access"
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

// waitingRead starts GET /v1/account with key and X-Min-Index ahead
// entries past the node's applied index, and returns its answer.
func waitingRead(a *testAPI, key string, ahead uint64) <-chan resp {
	min := strconv.FormatUint(a.node.Machine().Applied()+ahead, 10)
	out := make(chan resp, 1)
	go func() {
		out <- a.do(req{method: "GET", path: "/v1/account", key: key, header: map[string]string{"X-Min-Index": min}})
	}()
	time.Sleep(50 * time.Millisecond) // the request is waiting (or answered)
	return out
}

// X-Min-Index gives read-your-writes on any node, also for the key a write
// created: a key minted at an index the serving node has not applied, nor
// heard is committed, was refused 401 "not valid" at once (found on a
// follower right after a signup through another node, X-Min-Index set to
// the signup's X-Raft-Index). The node now waits for the index first.
func TestMinIndexWaitsForAnUnknownKey(t *testing.T) {
	a := newTestAPI(t)
	master, acct := a.signup()
	_, minter := a.mint(master, "read", "admin-sessions")
	key := "pdk_" + strings.Repeat("ab", 24)
	done := waitingRead(a, key, 10)
	cmd, _ := fsm.NewCommand(fsm.CmdMintKey, access.NewKey{KeyID: "key_chosen", KeyHashHex: HashKey(key), Label: "t"})
	cmd.Account, cmd.KeyID, cmd.IdemKey = acct, minter, "mint-chosen"
	if res, err := a.node.Propose(t.Context(), cmd); err != nil || res.Status != 201 {
		t.Fatalf("mint: %v %+v", err, res)
	}
	if r := <-done; r.status != 200 {
		t.Fatalf("a key minted before X-Min-Index: %d %s (want 200)", r.status, r.body)
	}
}

// X-Min-Index set to a revoke's index makes the revoke exact
// (docs/architecture.md, Revocation): a request authenticated against the
// state before the revoke, then held for the index, was served with the
// revoked key. The key is checked again after the wait.
func TestMinIndexPastARevokeRefusesTheRevokedKey(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	k, id := a.mint(master, "read")
	done := waitingRead(a, k, 10)
	if r := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: master, idem: nextIdem(), body: map[string]any{"keyId": id}}); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := <-done; r.status != 401 || r.code() != "unauthorized" {
		t.Fatalf("a key revoked before X-Min-Index: %d %s (want 401)", r.status, r.body)
	}
}

// An unknown key is refused with 401 on a node that is up to date, even
// while writes are in flight: an entry committed but not yet applied after
// the request arrived does not make the node "catching up" (which answered
// 503 and invites a retry of a key that will never work).
func TestUnknownKeyIs401WhileEntriesAreInFlight(t *testing.T) {
	a := newTestAPI(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = a.node.ProposeInternal(fsm.CmdTick, struct{}{})
		}
	}()
	defer func() { close(stop); <-done }()
	headers := []map[string]string{nil, {"X-Consistency": "linearizable"}}
	for i := 0; i < 100; i++ { // within one address's read burst (120)
		h := headers[i%2]
		r := a.do(req{method: "GET", path: "/v1/account", key: "pdk_unknown", header: h})
		if r.status != 401 || r.code() != "unauthorized" {
			t.Fatalf("request %d (%v): %d %s (want 401)", i, h, r.status, r.body)
		}
	}
}
