package httpapi

import (
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node/tokenrail"
)

func (a *testAPI) usdxOp(t fsm.CmdType, payload any) {
	a.t.Helper()
	res, err := a.node.ProposeInternal(t, payload)
	if err != nil || !res.OK() {
		a.t.Fatalf("usdx op %d: %v %+v", t, err, res)
	}
}

func i64p(v int64) *int64 { return &v }

// mintUSDx quotes and mints n USDx on key's account.
func (a *testAPI) mintUSDx(key, n string) {
	a.t.Helper()
	q := a.do(req{method: "POST", path: "/v1/usdx/quotes", key: key, body: map[string]any{"side": "mint", "usdx": n}}).json(a.t)
	qid := q["quoteId"].(string)
	if r := a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: qid, body: map[string]any{"quoteId": qid}}); r.status != 201 {
		a.t.Fatalf("mint %d %s", r.status, r.body)
	}
}

// TestUsdxOverHTTP is the new user's path: read the public state, quote
// and mint, see supply and hedge grow together, stake, unstake, redeem;
// and every refusal of the routes with its status and code (SPEC 7).
// validateExchanges checks every answer against /openapi.json.
func TestUsdxOverHTTP(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgetScale(10)}) // more writes than one order burst
	a.listMarkets()
	key, acctID := a.tradingAccount()
	post := func(path string, body any) resp {
		return a.do(req{method: "POST", path: path, key: key, body: body})
	}
	pub := a.get("/v1/usdx").json(t)
	if pub["supply"] != "0" || pub["backingIdentityHolds"] != true || pub["oracleFresh"] != false || pub["mintsHalted"] != false {
		t.Fatalf("public state %v", pub)
	}
	// Keys, scopes and bodies.
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/quotes", body: map[string]any{"side": "mint", "usdx": "1"}}), 401, "unauthorized")
	readKey, _ := a.mint(key, "read")
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/quotes", key: readKey, body: map[string]any{"side": "mint", "usdx": "1"}}), 403, "insufficient_scope")
	wantCode(t, post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "1.5"}), 400, "usdx_whole_units")
	wantCode(t, post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "1e3"}), 400, "validation")
	wantCode(t, post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": 10}), 400, "validation")
	wantCode(t, post("/v1/usdx/quotes", map[string]any{"side": "burn", "usdx": "10"}), 400, "validation")
	// The oracle has not printed yet: stale.
	r := post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "10"})
	wantCode(t, r, 409, "usdx_oracle_stale")
	if r.json(t)["reason"] != "oracle_stale" {
		t.Fatalf("%s", r.body)
	}
	a.freshPrices()
	wantCode(t, post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "0"}), 409, "usdx_dust")
	r = post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "50.000"})
	if r.status != 201 {
		t.Fatalf("quote: %d %s", r.status, r.body)
	}
	q := r.json(t)
	qid := q["quoteId"].(string)
	if q["usdx"] != "50" || q["contracts"] != "50" || q["side"] != "mint" {
		t.Fatalf("%v", q)
	}
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: "other", body: map[string]any{"quoteId": qid}}), 400, "validation")
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: "nope", body: map[string]any{"quoteId": "nope"}}), 404, "not_found")
	r = a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: qid, body: map[string]any{"quoteId": qid}})
	if r.status != 201 || r.json(t)["state"] != "minted" || r.json(t)["satsMsat"] != q["satsMsat"] {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	pub = a.get("/v1/usdx").json(t)
	if pub["supply"] != "50" || pub["hedge"].(map[string]any)["contracts"] != "50" || pub["backingIdentityHolds"] != true {
		t.Fatalf("after mint %v", pub)
	}
	acct := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t)
	if acct["usdx"] != "50" || acct["susdx"] != "0" {
		t.Fatalf("account %v", acct)
	}
	// Stake, unstake.
	r = post("/v1/usdx/stake", map[string]any{"usdx": "20"})
	if r.status != 201 || r.json(t)["susdx"] != "20" {
		t.Fatalf("stake %d %s", r.status, r.body)
	}
	wantCode(t, post("/v1/usdx/stake", map[string]any{"usdx": "31"}), 400, "insufficient_balance")
	r = post("/v1/usdx/unstake", map[string]any{"susdx": "10"})
	if r.status != 201 || r.json(t)["state"] != "cooling" {
		t.Fatalf("unstake %d %s", r.status, r.body)
	}
	u := a.do(req{method: "GET", path: "/v1/usdx/unstakes", key: key}).json(t)
	if len(u["unstakes"].([]any)) != 1 || u["cooling"] != "10" {
		t.Fatalf("%v", u)
	}
	// Redeem, idempotently under a key.
	r = a.do(req{method: "POST", path: "/v1/usdx/redemptions", key: key, idem: "red-1", body: map[string]any{"usdx": "5"}})
	if r.status != 201 || r.json(t)["state"] != "paid" || r.json(t)["sagaId"] != accountScopedID("urd_", acctID, "red-1") {
		t.Fatalf("redeem %d %s", r.status, r.body)
	}
	again := a.do(req{method: "POST", path: "/v1/usdx/redemptions", key: key, idem: "red-1", body: map[string]any{"usdx": "5"}})
	if again.status != 201 || string(again.body) != string(r.body) {
		t.Fatalf("retry %d %s", again.status, again.body)
	}
	wantCode(t, post("/v1/usdx/redemptions", map[string]any{"usdx": "1000"}), 400, "insufficient_balance")
	if a.get("/v1/usdx").json(t)["supply"] != "45" {
		t.Fatal("redemption burns supply")
	}
	act := a.do(req{method: "GET", path: "/v1/usdx/activity?limit=2", key: key}).json(t)
	if len(act["activity"].([]any)) != 2 || act["nextBeforeSeq"] == nil {
		t.Fatalf("activity %v", act)
	}
	// Capacity: a hard cap binding at 60 leaves 15.
	a.usdxOp(fsm.CmdUSDxParams, fsm.USDxParamsPayload{HardCap: i64p(60)})
	r = post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "20"})
	wantCode(t, r, 409, "usdx_capacity")
	if b := r.json(t); b["headroom"] != "15" || b["limit"] != "hard_cap" || b["reason"] != "capacity" {
		t.Fatalf("%s", r.body)
	}
	// Requote: the price moves 5% between quote and mint.
	r = post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "2"})
	qid = r.json(t)["quoteId"].(string)
	a.print("BTCUSD", btcStartQ8*105/100, time.Now().UnixMilli())
	r = a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: qid, body: map[string]any{"quoteId": qid}})
	wantCode(t, r, 409, "usdx_requote")
	fresh := r.json(t)["quote"].(map[string]any)
	if fresh["quoteId"] == qid {
		t.Fatal("a requote carries a fresh quote")
	}
	fid := fresh["quoteId"].(string)
	if r := a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: fid, body: map[string]any{"quoteId": fid}}); r.status != 201 {
		t.Fatalf("fresh quote mint %d %s", r.status, r.body)
	}
	// Expiry.
	a.usdxOp(fsm.CmdUSDxParams, fsm.USDxParamsPayload{QuoteTTLMs: i64p(1000)})
	qid = post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "1"}).json(t)["quoteId"].(string)
	time.Sleep(1300 * time.Millisecond)
	a.print("BTCUSD", btcStartQ8*105/100, time.Now().UnixMilli())
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: qid, body: map[string]any{"quoteId": qid}}), 409, "usdx_quote_expired")
	// Halt: mints and stakes refused; redemptions and unstakes go on.
	a.usdxOp(fsm.CmdUSDxHalt, fsm.USDxHaltPayload{Halt: true, Reason: "drill"})
	r = post("/v1/usdx/quotes", map[string]any{"side": "mint", "usdx": "1"})
	wantCode(t, r, 409, "usdx_mints_halted")
	if r.json(t)["reason"] != "drill" {
		t.Fatalf("%s", r.body)
	}
	wantCode(t, post("/v1/usdx/stake", map[string]any{"usdx": "1"}), 409, "usdx_mints_halted")
	if r := post("/v1/usdx/redemptions", map[string]any{"usdx": "1"}); r.status != 201 {
		t.Fatalf("redeem under halt %d %s", r.status, r.body)
	}
	if r := post("/v1/usdx/unstake", map[string]any{"susdx": "1"}); r.status != 201 {
		t.Fatalf("unstake under halt %d %s", r.status, r.body)
	}
	pub = a.get("/v1/usdx").json(t)
	if pub["mintsHalted"] != true || pub["mintsHaltedReason"] != "drill" {
		t.Fatalf("%v", pub)
	}
	// No token rail here.
	wantCode(t, a.do(req{method: "GET", path: "/v1/usdx/deposit-address", key: key}), 503, "token_rail_unavailable")
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: key, idem: nextIdem(),
		body: map[string]any{"usdx": "1", "sparkAddress": "sprt1abcdefgh"}}), 503, "token_rail_unavailable")
	if h := a.get("/v1/usdx/history").json(t); h["nextBeforeTsMs"] != nil {
		t.Fatalf("%v", h)
	}
	if f := a.get("/v1/usdx/freezes").json(t); len(f["freezes"].([]any)) != 0 || len(f["frozen"].([]any)) != 0 {
		t.Fatalf("%v", f)
	}
	wantCode(t, a.do(req{method: "GET", path: "/v1/usdx/history?limit=0"}), 400, "validation")
}

// TestUsdxTokenRailOverHTTP: with the simulated token rail wired, the
// deposit address is stable, withdrawals are requested (and refused to a
// frozen address), whatever the halt.
func TestUsdxTokenRailOverHTTP(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithTokenRail(tokenrail.NewSim())})
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	d1 := a.do(req{method: "GET", path: "/v1/usdx/deposit-address", key: key}).json(t)
	d2 := a.do(req{method: "GET", path: "/v1/usdx/deposit-address", key: key}).json(t)
	if d1["address"] != d2["address"] || d1["tokenIdentifier"] != "usdx-testnet" {
		t.Fatalf("%v %v", d1, d2)
	}
	q := a.do(req{method: "POST", path: "/v1/usdx/quotes", key: key, body: map[string]any{"side": "mint", "usdx": "10"}}).json(t)
	qid := q["quoteId"].(string)
	if r := a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: qid, body: map[string]any{"quoteId": qid}}); r.status != 201 {
		t.Fatal(r.status)
	}
	a.usdxOp(fsm.CmdUSDxHalt, fsm.USDxHaltPayload{Halt: true, Reason: "drill"})
	tradeKey, _ := a.mint(key, "trade", "read")
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: tradeKey, idem: nextIdem(),
		body: map[string]any{"usdx": "1", "sparkAddress": "sprt1abcdefgh"}}), 403, "insufficient_scope")
	r := a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: key, idem: nextIdem(),
		body: map[string]any{"usdx": "4", "sparkAddress": "sprt1abcdefgh"}})
	if r.status != 201 || r.json(t)["state"] != "requested" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: key, idem: nextIdem(),
		body: map[string]any{"usdx": "1", "sparkAddress": "NOT AN ADDRESS"}}), 400, "validation")
	a.usdxOp(fsm.CmdUSDxFreeze, fsm.USDxFreezePayload{SparkAddress: "sprt1frozen1", Action: "freeze", Reason: "court order"})
	var seq uint64
	a.node.Machine().Read(func(st *fsm.State, _ uint64) { seq = st.USDx.Freezes[0].Seq })
	a.usdxOp(fsm.CmdUSDxFreezeApplied, fsm.USDxFreezeAppliedPayload{Seq: seq, IssuerRef: "iss1", ImpactedMicro: -1})
	wantCode(t, a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: key, idem: nextIdem(),
		body: map[string]any{"usdx": "1", "sparkAddress": "sprt1frozen1"}}), 403, "compliance_refused")
	f := a.get("/v1/usdx/freezes").json(t)
	if fr := f["frozen"].([]any); len(fr) != 1 || fr[0] != "sprt1frozen1" {
		t.Fatalf("%v", f)
	}
	w := a.do(req{method: "GET", path: "/v1/usdx/withdrawals", key: key}).json(t)
	if l := w["withdrawals"].([]any); len(l) != 1 || l[0].(map[string]any)["usdx"] != "4" {
		t.Fatalf("%v", w)
	}
	if pub := a.get("/v1/usdx").json(t); pub["frozenCount"] != float64(1) || pub["freezeCount"] != float64(1) {
		t.Fatalf("%v", pub)
	}
}

// TestUsdxKeysAreTheAccountsOwn: an idempotency key belongs to its
// account on the USDx routes too. Two accounts may use the same key for a
// withdrawal or a redemption (before, the second was refused 409 and so
// learned the first had used it); a retry from the same account replays;
// stake and unstake honour a key when one is sent (before, a retry staked
// twice), check it like every other route, and still work without one.
func TestUsdxKeysAreTheAccountsOwn(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithTokenRail(tokenrail.NewSim()), WithBudgetScale(10)})
	a.listMarkets()
	a.freshPrices()
	holder := func() string {
		key, _ := a.tradingAccount()
		a.mintUSDx(key, "20")
		return key
	}
	k1, k2 := holder(), holder()
	holdings := func(key string) (string, string) {
		m := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t)
		return m["usdx"].(string), m["susdx"].(string)
	}
	wd := map[string]any{"usdx": "2", "sparkAddress": "sprt1abcdefgh"}
	w1 := a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: k1, idem: "shared-1", body: wd})
	w2 := a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: k2, idem: "shared-1", body: wd})
	if w1.status != 201 || w2.status != 201 {
		t.Fatalf("the same key from two accounts: %d %s / %d %s", w1.status, w1.body, w2.status, w2.body)
	}
	id1, id2 := w1.json(t)["withdrawalId"], w2.json(t)["withdrawalId"]
	if id1 == id2 || id1 == "shared-1" || id2 == "shared-1" {
		t.Fatalf("withdrawal ids %v %v", id1, id2)
	}
	again := a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: k1, idem: "shared-1", body: wd})
	if again.status != 201 || string(again.body) != string(w1.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry %d %s", again.status, again.body)
	}
	if u, _ := holdings(k1); u != "18" {
		t.Fatalf("one withdrawal of 2 from 20 leaves 18, not %s", u)
	}
	r1 := a.do(req{method: "POST", path: "/v1/usdx/redemptions", key: k1, idem: "shared-rd", body: map[string]any{"usdx": "1"}})
	r2 := a.do(req{method: "POST", path: "/v1/usdx/redemptions", key: k2, idem: "shared-rd", body: map[string]any{"usdx": "1"}})
	if r1.status != 201 || r2.status != 201 || r1.json(t)["sagaId"] == r2.json(t)["sagaId"] {
		t.Fatalf("redemptions %d %s / %d %s", r1.status, r1.body, r2.status, r2.body)
	}
	// Stake and unstake: a key makes the retry a replay.
	stake := func(idem, usdx string) resp {
		return a.do(req{method: "POST", path: "/v1/usdx/stake", key: k1, idem: idem, body: map[string]any{"usdx": usdx}})
	}
	first := stake("stk-1", "3")
	if first.status != 201 {
		t.Fatalf("stake %d %s", first.status, first.body)
	}
	if r := stake("stk-1", "3"); r.status != 201 || string(r.body) != string(first.body) || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("stake retry %d %s", r.status, r.body)
	}
	wantCode(t, stake("stk-1", "4"), 409, "idempotency_key_reused")
	wantCode(t, stake("has space", "1"), 400, "validation")
	if u, su := holdings(k1); u != "14" || su != "3" {
		t.Fatalf("after one keyed stake of 3: usdx %s susdx %s", u, su)
	}
	unstake := func(idem string) resp {
		return a.do(req{method: "POST", path: "/v1/usdx/unstake", key: k1, idem: idem, body: map[string]any{"susdx": "1"}})
	}
	u1 := unstake("uns-1")
	if u2 := unstake("uns-1"); u1.status != 201 || string(u2.body) != string(u1.body) {
		t.Fatalf("unstake %d %s / retry %d %s", u1.status, u1.body, u2.status, u2.body)
	}
	if _, su := holdings(k1); su != "2" {
		t.Fatalf("after one keyed unstake of 1: susdx %s", su)
	}
	// Without a key both apply, as the spec's route allows.
	for range 2 {
		if r := stake("", "1"); r.status != 201 {
			t.Fatalf("unkeyed stake %d %s", r.status, r.body)
		}
	}
	if _, su := holdings(k1); su != "4" {
		t.Fatalf("after two unkeyed stakes of 1: susdx %s", su)
	}
	// The description says the header is optional there.
	spec := a.get("/openapi.json").json(t)
	op := spec["paths"].(map[string]any)["/v1/usdx/stake"].(map[string]any)["post"].(map[string]any)
	params, _ := op["parameters"].([]any)
	if len(params) != 1 || params[0].(map[string]any)["name"] != IdemHeader || params[0].(map[string]any)["required"] != false {
		t.Fatalf("stake parameters %v", params)
	}
}
