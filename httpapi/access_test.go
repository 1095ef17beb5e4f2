package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/node"
)

func TestSignupReturnsMasterKeyOnce(t *testing.T) {
	a := newTestAPI(t)
	idem := nextIdem()
	r := a.do(req{method: "POST", path: "/v1/signup", idem: idem, body: "{}"})
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	key := m["apiKey"].(string)
	if !strings.HasPrefix(key, "pdk_") || m["accountId"] == "" || !strings.HasPrefix(m["railAddress"].(string), "sparkt1") {
		t.Fatalf("signup result %v", m)
	}
	again := a.do(req{method: "POST", path: "/v1/signup", idem: idem, body: "{}"})
	if again.status != 409 || again.code() != "conflict" || strings.Contains(string(again.body), key) {
		t.Fatalf("replayed signup must not reveal the key: %d %s", again.status, again.body)
	}
	// Only the hash is in the state.
	a.node.Machine().Read(func(st *fsm.State, _ uint64) {
		b, _ := fsm.Marshal(st)
		if strings.Contains(string(b), key) {
			t.Error("the key value reached the replicated state")
		}
	})
	sessions := a.do(req{method: "GET", path: "/v1/sessions", key: key})
	if strings.Contains(string(sessions.body), key) {
		t.Fatal("sessions list leaks the key value")
	}
}

func TestSignupRefusedOnProd(t *testing.T) {
	a := newTestAPI(t, func(c *node.Config) { c.Deployment = "prod" })
	r := a.do(req{method: "POST", path: "/v1/signup", idem: nextIdem(), body: "{}"})
	if r.status != 403 {
		t.Fatalf("prod signup: %d %s", r.status, r.body)
	}
	if d := a.do(req{method: "GET", path: "/deployment"}); !strings.Contains(string(d.body), `"prod"`) {
		t.Fatalf("deployment %s", d.body)
	}
}

func TestIdempotencyReplayAndReuse(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	idem := nextIdem()
	first := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: idem, body: "{}"})
	if first.status != 201 {
		t.Fatalf("%d %s", first.status, first.body)
	}
	// Same key, same body (other whitespace): the stored answer, applied once.
	again := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: idem, body: " { } "})
	if again.status != first.status || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", again.status, again.body)
	}
	if again.header.Get("X-Raft-Index") != first.header.Get("X-Raft-Index") {
		t.Fatalf("a replay points at the original write's index: %s vs %s", again.header.Get("X-Raft-Index"), first.header.Get("X-Raft-Index"))
	}
	deps := a.do(req{method: "GET", path: "/v1/deposits", key: master}).json(t)["deposits"].([]any)
	if len(deps) != 1 {
		t.Fatalf("faucet applied %d times", len(deps))
	}
	// Same key on another route is another request: refused.
	if r := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: idem, body: map[string]any{"label": "x"}}); r.status != 409 || r.code() != "idempotency_key_reused" {
		t.Fatalf("same key, other route: %d %s", r.status, r.body)
	}
	// Same key, different body: refused, nothing changes.
	idem = nextIdem()
	mint := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: idem, body: map[string]any{"label": "x"}})
	if mint.status != 201 {
		t.Fatalf("mint: %d %s", mint.status, mint.body)
	}
	reuse := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: idem, body: map[string]any{"label": "y"}})
	if reuse.status != 409 || reuse.code() != "idempotency_key_reused" {
		t.Fatalf("reuse: %d %s", reuse.status, reuse.body)
	}
	// The mint replay omits the key value (returned exactly once).
	replay := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: idem, body: map[string]any{"label": "x"}})
	if replay.status != 201 || strings.Contains(string(replay.body), "apiKey") || !strings.Contains(string(replay.body), mint.json(t)["keyId"].(string)) {
		t.Fatalf("mint replay: %d %s", replay.status, replay.body)
	}
}

func TestIdempotencyKeysAreScopedPerAccount(t *testing.T) {
	a := newTestAPI(t)
	k1, _ := a.signup()
	k2, _ := a.signup()
	idem := nextIdem()
	for _, k := range []string{k1, k2} {
		if r := a.do(req{method: "POST", path: "/v1/faucet", key: k, idem: idem, body: "{}"}); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("another account's key collided: %d %s", r.status, r.body)
		}
	}
}

func TestIdempotencyHeaderRules(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	for _, bad := range []string{"", strings.Repeat("k", 256), "has space", "tab\tkey"} {
		r := a.do(req{method: "POST", path: "/v1/faucet", key: master, body: "{}", header: map[string]string{IdemHeader: bad}})
		if r.status != 400 || r.code() != "validation" {
			t.Errorf("idempotency-key %q: %d %s", bad, r.status, r.body)
		}
	}
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: master, body: "{}", idem: strings.Repeat("k", 255)}); r.status != 201 {
		t.Fatalf("a 255-character key is allowed: %d %s", r.status, r.body)
	}
}

func TestFaucetCreditsThroughDepositsAndExhausts(t *testing.T) {
	a := newTestAPI(t)
	master, acct := a.signup()
	for i := 2; i >= 0; i-- {
		r := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: nextIdem(), body: "{}"})
		m := r.json(t)
		if r.status != 201 || m["creditedMsat"] != "1000000000" || int(m["grantsRemainingThisHour"].(float64)) != i {
			t.Fatalf("grant: %d %s", r.status, r.body)
		}
	}
	r := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: nextIdem(), body: "{}"})
	if r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("exhausted faucet: %d %s %v", r.status, r.body, r.header)
	}
	acc := a.do(req{method: "GET", path: "/v1/account", key: master}).json(t)
	if acc["freeMsat"] != "3000000000" || acc["reservedMsat"] != "0" || acc["accountId"] != acct {
		t.Fatalf("account %v", acc)
	}
	a.node.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.Ledger.CreditedMsat != 3_000_000_000 || st.Ledger.Balance(ledger.Free(acct)) != 3_000_000_000 {
			t.Errorf("ledger %+v", st.Ledger)
		}
		if err := st.Ledger.Check(); err != nil {
			t.Error(err)
		}
	})
}

func TestDepositsPagination(t *testing.T) {
	a := newTestAPI(t, func(c *node.Config) { c.FaucetGrantsPerHour = 10 })
	master, _ := a.signup()
	for i := 0; i < 5; i++ {
		a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: nextIdem(), body: "{}"})
	}
	var seqs []string
	path := "/v1/deposits?limit=2"
	for pages := 0; pages < 5; pages++ {
		r := a.do(req{method: "GET", path: path, key: master})
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		m := r.json(t)
		for _, d := range m["deposits"].([]any) {
			dm := d.(map[string]any)
			if !strings.HasPrefix(dm["railRef"].(string), "faucet:") {
				t.Fatalf("railRef %v", dm["railRef"])
			}
			seqs = append(seqs, dm["seq"].(string))
		}
		if m["nextBeforeSeq"] == nil {
			break
		}
		path = "/v1/deposits?limit=2&beforeSeq=" + m["nextBeforeSeq"].(string)
	}
	if len(seqs) != 5 {
		t.Fatalf("paged %d deposits: %v", len(seqs), seqs)
	}
	for i := 1; i < len(seqs); i++ {
		var x, y int
		fmt.Sscan(seqs[i-1], &x)
		fmt.Sscan(seqs[i], &y)
		if x <= y {
			t.Fatalf("not newest first: %v", seqs)
		}
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=-1", "limit=1.5", "limit=%201", "beforeSeq=0", "beforeSeq=abc"} {
		if r := a.do(req{method: "GET", path: "/v1/deposits?" + q, key: master}); r.status != 400 || r.code() != "validation" {
			t.Errorf("?%s: %d %s", q, r.status, r.body)
		}
	}
	if r := a.do(req{method: "GET", path: "/v1/deposits?limit=200", key: master}); r.status != 200 {
		t.Fatalf("limit=200 is the maximum: %d", r.status)
	}
}

func TestSessionCapListAndRevoke(t *testing.T) {
	a := newTestAPI(t)
	a.srv.budgets = roomyBudgets()
	master, _ := a.signup()
	var keys, ids []string
	for i := 0; i < 19; i++ {
		k, id := a.mint(master, "read")
		keys, ids = append(keys, k), append(ids, id)
	}
	r := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: nextIdem(), body: map[string]any{"scopes": []string{"read"}}})
	if r.status != 403 || r.code() != "session_limit" {
		t.Fatalf("21st live key: %d %s", r.status, r.body)
	}
	rv := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: master, idem: nextIdem(), body: map[string]any{"keyId": ids[0]}})
	if rv.status != 200 || !strings.Contains(string(rv.body), ids[0]) {
		t.Fatalf("revoke: %d %s", rv.status, rv.body)
	}
	if g := a.do(req{method: "GET", path: "/v1/account", key: keys[0]}); g.status != 401 || g.code() != "unauthorized" {
		t.Fatalf("revoked key still works: %d", g.status)
	}
	if _, id := a.mint(master, "read"); id == "" {
		t.Fatal("a revoke frees a slot")
	}
	list := a.do(req{method: "GET", path: "/v1/sessions", key: keys[1]}).json(t)["sessions"].([]any)
	if len(list) != 21 {
		t.Fatalf("listed %d keys, want 21 incl. the revoked one", len(list))
	}
	var revoked, current int
	for _, s := range list {
		m := s.(map[string]any)
		if m["revokedTsMs"] != nil {
			revoked++
			if m["revokedBy"] == nil || m["revokeReason"] != "revoked" || m["keyId"] != ids[0] {
				t.Fatalf("revoked entry %v", m)
			}
		}
		if m["current"] == "1" {
			current++
			if m["keyId"] != ids[1] {
				t.Fatalf("current marks the wrong key: %v", m)
			}
		}
	}
	if revoked != 1 || current != 1 {
		t.Fatalf("revoked %d current %d", revoked, current)
	}
	if r := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: master, idem: nextIdem(), body: map[string]any{"keyId": "key_nope"}}); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("unknown key: %d %s", r.status, r.body)
	}
	for _, body := range []string{`{}`, `{"allButCurrent": false}`, `{"keyId": "x", "allButCurrent": true}`} {
		if r := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: master, idem: nextIdem(), body: body}); r.status != 400 {
			t.Errorf("revoke %s: %d", body, r.status)
		}
	}
	all := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: master, idem: nextIdem(), body: map[string]any{"allButCurrent": true}})
	if all.status != 200 || len(all.json(t)["revoked"].([]any)) != 19 {
		t.Fatalf("allButCurrent: %d %s", all.status, all.body)
	}
	if r := a.do(req{method: "GET", path: "/v1/account", key: master}); r.status != 200 {
		t.Fatalf("the current key survives allButCurrent: %d", r.status)
	}
}

// TestRevokedKeyCannotWriteAfterRevoke: the FSM re-checks the key when a
// write applies, so a key revoked earlier in the log never acts even if a
// node authenticated it against older state.
func TestRevokedKeyCannotWriteAfterRevoke(t *testing.T) {
	a := newTestAPI(t)
	master, acct := a.signup()
	k, id := a.mint(master, "read", "admin-sessions")
	a.do(req{method: "POST", path: "/v1/sessions/revoke", key: master, idem: nextIdem(), body: map[string]any{"keyId": id}})
	cmd, _ := fsm.NewCommand(fsm.CmdFaucet, nil)
	cmd.Account, cmd.KeyID, cmd.IdemKey = acct, id, "late"
	res, err := a.node.Propose(t.Context(), cmd)
	if err != nil || res.Status != 401 || res.Code != "unauthorized" {
		t.Fatalf("revoked key's late write: %v %+v", err, res)
	}
	_ = k
}

// roomyBudgets lifts the order budget so a test can mint many keys.
func roomyBudgets() map[string]Budget {
	b := map[string]Budget{}
	for k, v := range Budgets {
		b[k] = v
	}
	b["order"] = Budget{Name: "order", PerKeyPerMin: 6000, KeyBurst: 1000, PerAccountPerMin: 6000, AccountBurst: 1000}
	return b
}

func TestErrorModel(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	cases := []struct {
		r      req
		status int
		code   string
	}{
		{req{method: "GET", path: "/v1/nope"}, 404, "not_found"},
		{req{method: "GET", path: "/"}, 404, "not_found"},
		{req{method: "DELETE", path: "/v1/account", key: master}, 405, "validation"},
		{req{method: "POST", path: "/v1/sessions", key: master, idem: nextIdem(), body: `{"label": "` + strings.Repeat("x", MaxBodyBytes) + `"}`}, 413, "body_too_large"},
		{req{method: "POST", path: "/v1/sessions", key: master, idem: nextIdem(), body: `{"label":`}, 400, "validation"},
		{req{method: "POST", path: "/v1/sessions", key: master, idem: nextIdem(), body: `{"scopes":["root"]}`}, 400, "validation"},
		{req{method: "GET", path: "/v1/account", key: "wrong"}, 401, "unauthorized"},
		{req{method: "GET", path: "/healthz", header: map[string]string{"X-Min-Index": "x"}}, 400, "validation"},
	}
	for _, c := range cases {
		r := a.do(c.r)
		if r.status != c.status || r.code() != c.code || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %s (%s)", c.r.method, c.r.path, r.status, r.body, r.header.Get("Content-Type"))
		}
		if r.json(t)["error"] == "" {
			t.Errorf("%s %s: no error text", c.r.method, c.r.path)
		}
	}
}

func TestPanicAnswersJSON(t *testing.T) {
	a := newTestAPI(t)
	a.srv.Engine.GET("/boom", func(*gin.Context) { panic("boom") })
	r := a.do(req{method: "GET", path: "/boom"})
	if r.status != http.StatusInternalServerError || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	a.seen = nil // /boom is a test-only route, not part of the description
}

func TestConsistencyHeader(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	w := a.do(req{method: "POST", path: "/v1/faucet", key: master, idem: nextIdem(), body: "{}"})
	r := a.do(req{method: "GET", path: "/v1/account", key: master, header: map[string]string{"X-Consistency": "linearizable"}})
	if r.status != 200 || r.json(t)["freeMsat"] != "1000000000" {
		t.Fatalf("linearizable read: %d %s", r.status, r.body)
	}
	if r.header.Get("X-Raft-Index") < w.header.Get("X-Raft-Index") && len(r.header.Get("X-Raft-Index")) <= len(w.header.Get("X-Raft-Index")) {
		t.Fatalf("linearizable read behind the write: %s < %s", r.header.Get("X-Raft-Index"), w.header.Get("X-Raft-Index"))
	}
	if r := a.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Consistency": "eventual"}}); r.status != 400 || r.code() != "validation" {
		t.Fatalf("unknown consistency: %d %s", r.status, r.body)
	}
}
