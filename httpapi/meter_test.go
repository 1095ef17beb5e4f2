package httpapi

import (
	"net/textproto"
	"strconv"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
)

var t0 = time.Unix(1_800_000_000, 0)

func TestMeterBurstThenRefuse(t *testing.T) {
	m := newMeter()
	b := Budgets["order"]
	for i := 0; i < b.KeyBurst; i++ {
		if v := m.take(b, "key:a", "", t0); !v.ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	v := m.take(b, "key:a", "", t0)
	if v.ok {
		t.Fatal("request past the burst admitted")
	}
	// 60 per minute: one token a second.
	if v.retryAfter <= 0 || v.retryAfter > time.Second {
		t.Fatalf("retryAfter %v, want within one token interval", v.retryAfter)
	}
}

func TestMeterRefillsAtTheMinuteRate(t *testing.T) {
	m := newMeter()
	b := Budgets["withdraw"] // 10 per minute: a token every 6 s
	for i := 0; i < b.KeyBurst; i++ {
		m.take(b, "key:a", "", t0)
	}
	if m.take(b, "key:a", "", t0.Add(5900*time.Millisecond)).ok {
		t.Fatal("refilled early")
	}
	if !m.take(b, "key:a", "", t0.Add(6100*time.Millisecond)).ok {
		t.Fatal("did not refill after one token interval")
	}
}

func TestMeterBudgetsAreIndependent(t *testing.T) {
	m := newMeter()
	for i := 0; i < Budgets["withdraw"].KeyBurst+3; i++ {
		m.take(Budgets["withdraw"], "key:a", "acct:x", t0)
	}
	if !m.take(Budgets["order"], "key:a", "acct:x", t0).ok || !m.take(Budgets["read"], "key:a", "acct:x", t0).ok {
		t.Fatal("an empty withdraw budget blocked another budget")
	}
}

func TestMeterAccountBucketSharedByKeys(t *testing.T) {
	m := newMeter()
	b := Budgets["order"] // key burst 20, account burst 60
	admitted := 0
	for k := 0; k < 6; k++ {
		for i := 0; i < b.KeyBurst; i++ {
			if m.take(b, "key:"+strconv.Itoa(k), "acct", t0).ok {
				admitted++
			}
		}
	}
	if admitted != b.AccountBurst {
		t.Fatalf("six keys got %d tokens, want the account burst %d", admitted, b.AccountBurst)
	}
	if !m.take(b, "key:other", "acct2", t0).ok {
		t.Fatal("another account was throttled")
	}
}

func TestMeterRefusalDrawsNothing(t *testing.T) {
	m := newMeter()
	b := Budgets["order"]
	// Drain the account through other keys, then hit it with a fresh key:
	// the refusal must not consume that key's own tokens.
	for k := 0; k < 3; k++ {
		for i := 0; i < b.KeyBurst; i++ {
			m.take(b, "key:"+strconv.Itoa(k), "acct", t0)
		}
	}
	if m.take(b, "key:fresh", "acct", t0).ok {
		t.Fatal("account bucket should be empty")
	}
	if got := m.peek(b, "key:fresh", "", t0); got != b.KeyBurst {
		t.Fatalf("refused request drew from the key bucket: %d left", got)
	}
}

func TestRateLimitHeadersAnd429(t *testing.T) {
	// A read budget that refills once a minute: at the default 10 a
	// second, a busy machine refilled a token while the session was
	// minted and /v1/limits was answered 200 (a flake of 2026-11-28).
	a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
	master, _ := a.signup()
	var last resp
	for i := 0; i < tinyRead()["read"].KeyBurst+1; i++ {
		last = a.do(req{method: "GET", path: "/v1/account", key: master})
		if last.status == 429 {
			break
		}
		if last.header.Get("X-RateLimit-Limit") == "" || last.header.Get("X-RateLimit-Remaining") == "" || last.header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("metered response without rate headers: %v", last.header)
		}
	}
	if last.status != 429 || last.code() != "rate_limited" {
		t.Fatalf("burst never refused: %d %s", last.status, last.body)
	}
	ra, err := strconv.Atoi(last.header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", last.header.Get("Retry-After"))
	}
	if last.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("remaining on 429: %q", last.header.Get("X-RateLimit-Remaining"))
	}
	// The order budget is untouched by the read burst.
	r := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: nextIdem(), body: map[string]any{"scopes": []string{"read"}}})
	if r.status != 201 {
		t.Fatalf("order budget affected by read burst: %d %s", r.status, r.body)
	}
	lim := a.do(req{method: "GET", path: "/v1/limits", key: master})
	if lim.status != 429 {
		t.Fatalf("limits is a read and the read budget is empty: %d", lim.status)
	}
}

func TestLimitsReportLiveValues(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	r := a.do(req{method: "GET", path: "/v1/limits", key: master})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	b := r.json(t)["budgets"].(map[string]any)
	read := b["read"].(map[string]any)
	if read["limitPerMin"].(float64) != 600 || read["burst"].(float64) != 120 {
		t.Fatalf("read budget %v", read)
	}
	// The limits call itself drew one read token.
	if rem := read["remaining"].(float64); rem != 119 {
		t.Fatalf("remaining %v, want 119", rem)
	}
	if w := b["withdraw"].(map[string]any); w["remaining"].(float64) != 5 {
		t.Fatalf("withdraw %v", w)
	}
}

// A full bucket table evicts the least recently used buckets: a client
// draining its withdraw budget is never refilled by others' churn.
func TestMeterFullTableKeepsRecentlyUsedBuckets(t *testing.T) {
	m := newMeter()
	m.maxBuckets = 8
	w := Budgets["withdraw"]
	for i := 0; i < w.KeyBurst; i++ {
		m.take(w, "key:drained", "", t0)
	}
	for i := 0; i < 100; i++ {
		m.take(Budgets["read"], "ip:"+strconv.Itoa(i), "", t0)
		if m.take(w, "key:drained", "", t0).ok {
			t.Fatalf("after %d new subjects the drained withdraw budget was refilled", i+1)
		}
	}
	if len(m.buckets) > m.maxBuckets || m.lru.Len() != len(m.buckets) {
		t.Fatalf("table holds %d buckets (list %d), bound %d", len(m.buckets), m.lru.Len(), m.maxBuckets)
	}
}

// The idle sweep forgets only buckets unused for meterIdle.
func TestMeterSweepForgetsOnlyIdleBuckets(t *testing.T) {
	m := newMeter()
	w := Budgets["withdraw"]
	m.take(w, "key:old", "", t0)
	for i := 0; i < w.KeyBurst; i++ {
		m.take(w, "key:busy", "", t0.Add(meterIdle))
	}
	// The next take sweeps (more than a minute since the last sweep).
	if m.take(w, "key:busy", "", t0.Add(meterIdle+time.Second)).ok {
		t.Fatal("the busy, drained bucket was forgotten by the sweep")
	}
	if _, ok := m.buckets[w.Name+"|key:old"]; ok {
		t.Fatal("an idle bucket survived the sweep")
	}
}

// A bucket idle for meterIdle is forgotten only once it is full again:
// the signup budget refills one a minute, so a drained one is still short
// after ten minutes, and forgetting it handed the address a fresh burst of
// 30 (every ten minutes instead of one a minute).
func TestMeterSweepKeepsABucketThatIsNotFullYet(t *testing.T) {
	m := newMeter()
	sb := Budgets["signup"]
	for i := 0; i < sb.KeyBurst; i++ {
		if !m.take(sb, "ip:a", "", t0).ok {
			t.Fatalf("signup %d of the burst refused", i+1)
		}
	}
	m.take(Budgets["read"], "ip:b", "", t0)
	// 11 minutes on: the next take sweeps; the read bucket is full and
	// goes, the signup bucket has 11 of 30 tokens and stays.
	at := t0.Add(meterIdle + time.Minute)
	v := m.take(sb, "ip:a", "", at)
	if !v.ok || v.remaining != 10 {
		t.Fatalf("after 11 idle minutes: admitted %v with %d left, want 10 (11 refilled, one drawn)", v.ok, v.remaining)
	}
	if _, ok := m.buckets[Budgets["read"].Name+"|ip:b"]; ok {
		t.Fatal("a full idle bucket survived the sweep")
	}
	// Once full again (30 minutes idle), it goes too.
	m.take(Budgets["read"], "ip:c", "", at.Add(31*time.Minute))
	if _, ok := m.buckets[sb.Name+"|ip:a"]; ok {
		t.Fatal("a full idle signup bucket survived the sweep")
	}
}

// The leader draws the order budget when the write is proposed; on a
// single node that is the node itself. A replay draws a token like any
// request (it did when the meter ran before the handler), and a refusal
// writes nothing.
func TestOrderBudgetDrawnAtProposeReplaysIncluded(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgets(tinyOrder())})
	master, account := a.signup()
	ob := tinyOrder()["order"]
	caa := func(idem string) resp {
		return a.do(req{method: "POST", path: "/v1/cancel-all-after", key: master, idem: idem, body: map[string]any{"timeoutMs": "0"}})
	}
	first := caa("caa-1")
	if first.status != 200 || first.header.Get("X-RateLimit-Remaining") != strconv.Itoa(ob.KeyBurst-1) {
		t.Fatalf("first: %d %s remaining %q", first.status, first.body, first.header.Get("X-RateLimit-Remaining"))
	}
	replay := caa("caa-1")
	if replay.status != 200 || replay.header.Get("Idempotent-Replayed") != "true" || replay.header.Get("X-RateLimit-Remaining") != strconv.Itoa(ob.KeyBurst-2) {
		t.Fatalf("replay: %d %s replayed %q remaining %q", replay.status, replay.body, replay.header.Get("Idempotent-Replayed"), replay.header.Get("X-RateLimit-Remaining"))
	}
	// A malformed body is refused before it is proposed: it draws nothing.
	if r := a.do(req{method: "POST", path: "/v1/cancel-all-after", key: master, idem: "caa-bad", body: "{}"}); r.status != 400 {
		t.Fatalf("malformed: %d %s", r.status, r.body)
	}
	for i := 2; i < ob.KeyBurst; i++ {
		if r := caa("caa-fill-" + strconv.Itoa(i)); r.status != 200 {
			t.Fatalf("write %d of the burst: %d %s", i+1, r.status, r.body)
		}
	}
	refused := caa("caa-refused")
	ra, _ := strconv.Atoi(refused.header.Get("Retry-After"))
	if refused.status != 429 || refused.code() != "rate_limited" || ra < 1 || refused.header.Get("X-RateLimit-Remaining") != "0" ||
		refused.header.Get("X-RateLimit-Limit") != strconv.Itoa(ob.PerKeyPerMin) {
		t.Fatalf("past the burst: %d %s %v", refused.status, refused.body, refused.header)
	}
	written := func(idem string) (ok bool) {
		a.node.Machine().Read(func(st *fsm.State, _ uint64) { ok = st.Idem.Records["acct:"+account+":"+idem] != nil })
		return ok
	}
	if !written("caa-1") || written("caa-refused") {
		t.Fatalf("admitted write stored %v; refused write stored %v (want true, false)", written("caa-1"), written("caa-refused"))
	}
	if r := caa("caa-1"); r.status != 429 {
		t.Fatalf("a replay with the budget empty: %d %s", r.status, r.body)
	}
	lim := a.do(req{method: "GET", path: "/v1/limits", key: master}).json(t)
	if o := lim["budgets"].(map[string]any)["order"].(map[string]any); o["remaining"].(float64) != 0 {
		t.Fatalf("limits after the burst: %v", o)
	}
}

func TestScaleBudgetsCopiesAndMultiplies(t *testing.T) {
	before := Budgets["order"]
	scaled, err := ScaleBudgets(Budgets, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := Budget{Name: "order", PerKeyPerMin: 6000, KeyBurst: 2000, PerAccountPerMin: 18000, AccountBurst: 6000}
	if scaled["order"] != want {
		t.Fatalf("order x100: %+v, want %+v", scaled["order"], want)
	}
	if len(scaled) != len(Budgets) {
		t.Fatalf("scaled %d budgets of %d", len(scaled), len(Budgets))
	}
	if Budgets["order"] != before {
		t.Fatalf("the package budgets changed: %+v", Budgets["order"])
	}
	if one, _ := ScaleBudgets(Budgets, 1); one["read"] != Budgets["read"] {
		t.Fatalf("x1 changed the read budget: %+v", one["read"])
	}
	for _, k := range []int{0, -1, MaxBudgetScale + 1} {
		if _, err := ScaleBudgets(Budgets, k); err == nil {
			t.Errorf("scale %d accepted", k)
		}
	}
	if _, err := ScaleBudgets(Budgets, MaxBudgetScale); err != nil {
		t.Errorf("scale %d (the maximum) refused: %v", MaxBudgetScale, err)
	}
}

// A server built with a budget scale meters and reports the scaled
// budgets: a burst far past the testnet one is admitted.
func TestBudgetScaleRaisesWhatTheServerAdmits(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgetScale(100)})
	master, _ := a.signup()
	lim := a.do(req{method: "GET", path: "/v1/limits", key: master}).json(t)
	read := lim["budgets"].(map[string]any)["read"].(map[string]any)
	if read["limitPerMin"].(float64) != 60000 || read["burst"].(float64) != 12000 {
		t.Fatalf("read budget x100: %v", read)
	}
	order := Budgets["order"]
	for i := 0; i < order.KeyBurst*3; i++ {
		r := a.do(req{method: "POST", path: "/v1/cancel-all-after", key: master, idem: nextIdem(), body: map[string]any{"timeoutMs": "0"}})
		if r.status != 200 {
			t.Fatalf("write %d (testnet burst %d): %d %s", i+1, order.KeyBurst, r.status, r.body)
		}
	}
}

// The rate headers are written into the header map directly, so their
// keys must be the canonical ones Header.Get and the wire use.
func TestRateHeaderKeysAreCanonical(t *testing.T) {
	for spelled, key := range map[string]string{
		"X-RateLimit-Limit": hdrRateLimit, "X-RateLimit-Remaining": hdrRateRemaining, "X-RateLimit-Reset": hdrRateReset,
	} {
		if canon := textproto.CanonicalMIMEHeaderKey(spelled); canon != key {
			t.Errorf("%s is written as %q; Header.Get looks for %q", spelled, key, canon)
		}
	}
}

// Drawing from buckets that exist names them without making a string: the
// leader draws every order's budget this way.
func TestWarmBucketsDrawWithoutAllocating(t *testing.T) {
	m := newMeter()
	b := Budget{Name: "order", PerKeyPerMin: 60_000, KeyBurst: 1_000_000, PerAccountPerMin: 60_000, AccountBurst: 1_000_000}
	now := time.Now()
	m.take(b, "key:key_1", "acc_1", now)
	if n := testing.AllocsPerRun(100, func() { m.take(b, "key:key_1", "acc_1", now) }); !raceEnabled && n != 0 {
		t.Errorf("a draw from warm buckets allocates %v times", n)
	}
	if got := m.size(); got != 2 {
		t.Errorf("%d buckets, want the key's and the account's", got)
	}
	// One draw, then AllocsPerRun's warm-up and its 100 runs.
	if left := m.peek(b, "key:key_1", "acc_1", now); left != 1_000_000-102 {
		t.Errorf("peek sees %d tokens left, want %d: not the buckets take drew from", left, 1_000_000-102)
	}
}
