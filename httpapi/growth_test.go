package httpapi

import (
	"bytes"
	"fmt"
	"image"
	_ "image/png"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/node"
)

// A new user's referral flow over HTTP: one account creates a code, the
// other binds it and trades; the fill carries the referral block, the
// referrer sees the pending reward; every refusal answers its code.
func TestReferralOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	refKey, _ := a.tradingAccount()
	refereeKey, refereeAcct := a.tradingAccount()

	// Codes: a bad one, a custom one, a collision, a second one.
	for _, bad := range []string{"ab", "no spaces", "dash-es"} {
		if r := a.do(req{method: "POST", path: "/v1/referral/code", key: refKey, idem: nextIdem(), body: map[string]any{"code": bad}}); r.status != 400 || r.code() != "validation" {
			t.Fatalf("code %q: %d %s", bad, r.status, r.body)
		}
	}
	r := a.do(req{method: "POST", path: "/v1/referral/code", key: refKey, idem: nextIdem(), body: map[string]any{"code": "friends1"}})
	if r.status != 201 || r.json(t)["code"] != "FRIENDS1" {
		t.Fatalf("code: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/referral/code", key: refereeKey, idem: nextIdem(), body: map[string]any{"code": "Friends1"}}); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("collision: %d %s", r.status, r.body)
	}
	// Binds: unknown, own, then the referee's, then twice.
	if r := a.do(req{method: "POST", path: "/v1/referral/bind", key: refereeKey, idem: nextIdem(), body: map[string]any{"code": "NOPE1"}}); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("unknown code: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/referral/bind", key: refKey, idem: nextIdem(), body: map[string]any{"code": "FRIENDS1"}}); r.status != 403 || r.code() != "referral_forbidden" {
		t.Fatalf("own code: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/referral/bind", key: refereeKey, idem: nextIdem(), body: map[string]any{}}); r.status != 400 {
		t.Fatalf("bind without code: %d %s", r.status, r.body)
	}
	r = a.do(req{method: "POST", path: "/v1/referral/bind", key: refereeKey, idem: nextIdem(), body: map[string]any{"code": "friends1"}})
	if r.status != 200 || r.json(t)["bound"] != true || r.json(t)["referredBy"].(map[string]any)["discountActive"] != true {
		t.Fatalf("bind: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/referral/bind", key: refereeKey, idem: nextIdem(), body: map[string]any{"code": "friends1"}}); r.status != 409 {
		t.Fatalf("second bind: %d %s", r.status, r.body)
	}
	// A read-only key may not act in the programme.
	readKey, _ := a.mint(refKey, "read")
	if r := a.do(req{method: "GET", path: "/v1/referral", key: readKey}); r.status != 403 || r.code() != "insufficient_scope" {
		t.Fatalf("read key: %d %s", r.status, r.body)
	}

	// The referee trades: its fill carries the referral block.
	if r := a.do(req{method: "POST", path: "/v1/orders", key: refereeKey, idem: "rb-1", body: orderBody("BTC-PERP", "buy", "market", "20000", nil)}); r.status != 201 {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	f := a.do(req{method: "GET", path: "/v1/fills", key: refereeKey}).json(t)["fills"].([]any)[0].(map[string]any)
	rb, ok := f["referral"].(map[string]any)
	if !ok || rb["code"] != "FRIENDS1" || rb["policyVersion"] != "1" || rb["discountMsat"] == "0" || rb["rewardMsat"] == "0" {
		t.Fatalf("fill referral block %v", f["referral"])
	}
	if f["accountId"] != refereeAcct {
		t.Fatalf("fill %v", f)
	}

	st := a.do(req{method: "GET", path: "/v1/referral", key: refKey}).json(t)
	stats := st["stats"].(map[string]any)
	if stats["pendingHoldbackMsat"] != rb["rewardMsat"] || stats["claimableMsat"] != "0" || stats["referees"] != "1" || stats["activeReferees"] != "1" {
		t.Fatalf("referrer stats %v", stats)
	}
	if st["code"].(map[string]any)["code"] != "FRIENDS1" || st["referredBy"] != nil || st["program"].(map[string]any)["policyVersion"] != "1" {
		t.Fatalf("referrer status %v", st)
	}
	gates := st["eligibility"].(map[string]any)["gates"].([]any)
	if len(gates) != 2 || gates[0].(map[string]any)["gate"] != "account_age" {
		t.Fatalf("gates %v", gates)
	}
	earn := a.do(req{method: "GET", path: "/v1/referral/earnings", key: refKey}).json(t)
	if e := earn["earnings"].([]any); len(e) != 1 || e[0].(map[string]any)["status"] != "accrued" || e[0].(map[string]any)["fillSeq"] != f["seq"] {
		t.Fatalf("earnings %v (fill seq %v)", earn, f["seq"])
	}
	refs := a.do(req{method: "GET", path: "/v1/referral/referees", key: refKey}).json(t)
	if refs["referees"] != "1" || len(refs["items"].([]any)) != 1 || strings.Contains(string(a.do(req{method: "GET", path: "/v1/referral/referees", key: refKey}).body), refereeAcct) {
		t.Fatalf("referees %v", refs)
	}
	// Nothing vested yet; the referee has no code to claim for.
	if r := a.do(req{method: "POST", path: "/v1/referral/claim", key: refKey, idem: nextIdem(), body: "{}"}); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("early claim: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/referral/claim", key: refereeKey, idem: nextIdem(), body: "{}"}); r.status != 404 {
		t.Fatalf("claim without a code: %d %s", r.status, r.body)
	}
	rs := a.do(req{method: "GET", path: "/v1/referral", key: refereeKey}).json(t)
	if rs["referredBy"].(map[string]any)["code"] != "FRIENDS1" || rs["bindWindow"] != nil || rs["stats"] != nil || rs["code"] != nil {
		t.Fatalf("referee status %v", rs)
	}
	// A drawn code: 8 characters of the alphabet.
	r = a.do(req{method: "POST", path: "/v1/referral/code", key: refereeKey, idem: nextIdem(), body: "{}"})
	if r.status != 201 || !regexp.MustCompile(`^[A-Z2-9]{8}$`).MatchString(r.json(t)["code"].(string)) {
		t.Fatalf("drawn code: %d %s", r.status, r.body)
	}
}

// Leaderboard over HTTP: a trader gets a generated handle (never its
// account id), settings validate the display name and null clears it,
// and an opted-out handle answers exactly as an unknown one.
func TestLeaderboardOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, acct := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "lb-1", body: orderBody("ETH-PERP", "buy", "market", "10", nil)}); r.status != 201 {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	me := a.do(req{method: "GET", path: "/v1/leaderboard/me", key: key}).json(t)
	handle, _ := me["handle"].(string)
	if !regexp.MustCompile(`^[a-z]+-[a-z]+-[0-9]{4}$`).MatchString(handle) || strings.Contains(handle, acct) || me["optedOut"] != false {
		t.Fatalf("own view %v", me)
	}
	el := me["eligibility"].([]any)
	if len(el) != 3 || el[0].(map[string]any)["eligible"] != false || el[0].(map[string]any)["reason"] != "gates_failed" {
		t.Fatalf("eligibility %v", el)
	}
	board := a.do(req{method: "GET", path: "/v1/leaderboard?board=roi&window=30d&limit=5", key: ""}).json(t)
	if board["board"] != "roi" || board["window"] != "30d" || board["cadenceMinutes"] != "15" || board["testnet"] != true {
		t.Fatalf("board %v", board)
	}
	if r := a.do(req{method: "GET", path: "/v1/leaderboard?window=1y"}); r.status != 400 {
		t.Fatalf("bad window: %d", r.status)
	}
	for _, bad := range []any{"", " padded", "x\u0000y", strings.Repeat("n", 33), 7} {
		if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"displayName": bad}}); r.status != 400 || r.code() != "validation" {
			t.Fatalf("display name %q: %d %s", bad, r.status, r.body)
		}
	}
	r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"displayName": "Ada L."}})
	if r.status != 200 || r.json(t)["displayName"] != "Ada L." {
		t.Fatalf("settings: %d %s", r.status, r.body)
	}
	prof := a.do(req{method: "GET", path: "/v1/leaderboard/trader/" + handle})
	if prof.status != 200 || prof.json(t)["displayName"] != "Ada L." || prof.json(t)["tradingSince"] == nil || bytes.Contains(prof.body, []byte(acct)) {
		t.Fatalf("profile: %d %s", prof.status, prof.body)
	}
	r = a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"displayName": nil}})
	if r.status != 200 || r.json(t)["displayName"] != nil {
		t.Fatalf("clear name: %d %s", r.status, r.body)
	}
	unknown := a.do(req{method: "GET", path: "/v1/leaderboard/trader/calm-otter-0000x"})
	r = a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"optedOut": true}})
	if r.status != 200 || r.json(t)["optedOut"] != true {
		t.Fatalf("opt out: %d %s", r.status, r.body)
	}
	opted := a.do(req{method: "GET", path: "/v1/leaderboard/trader/" + handle})
	if unknown.status != 404 || opted.status != 404 || !bytes.Equal(unknown.body, opted.body) || unknown.code() != "not_found" {
		t.Fatalf("unknown %d %s, opted out %d %s", unknown.status, unknown.body, opted.status, opted.body)
	}
	for _, h := range []string{"Content-Type", "Content-Length"} {
		if unknown.header.Get(h) != opted.header.Get(h) {
			t.Fatalf("header %s differs: %q vs %q", h, unknown.header.Get(h), opted.header.Get(h))
		}
	}
}

// The share card: a 1200x630 PNG with an ETag tied to the recompute stamp
// and the settings revision, 304 on If-None-Match, a new ETag after a
// rename, and 404 for unknown and opted-out handles alike.
func TestShareCardOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "og-1", body: orderBody("ETH-PERP", "buy", "market", "10", nil)}); r.status != 201 {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	handle := a.do(req{method: "GET", path: "/v1/leaderboard/me", key: key}).json(t)["handle"].(string)
	path := "/v1/leaderboard/trader/" + handle + "/og.png"
	r := a.do(req{method: "GET", path: path})
	if r.status != 200 || r.header.Get("Content-Type") != "image/png" {
		t.Fatalf("card: %d %s", r.status, r.header)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(r.body))
	if err != nil || format != "png" || cfg.Width != 1200 || cfg.Height != 630 {
		t.Fatalf("card %s %dx%d %v", format, cfg.Width, cfg.Height, err)
	}
	if out := os.Getenv("PERPD_CARD_OUT"); out != "" { // to look at it
		_ = os.WriteFile(out, r.body, 0o644)
	}
	etag := r.header.Get("ETag")
	if !regexp.MustCompile(`^"og-[0-9]+-[0-9]+-[0-9a-f]{16}"$`).MatchString(etag) {
		t.Fatalf("etag %q", etag)
	}
	if r := a.do(req{method: "GET", path: path, header: map[string]string{"If-None-Match": etag}}); r.status != 304 || len(r.body) != 0 || r.header.Get("ETag") != etag {
		t.Fatalf("revalidation: %d %q", r.status, r.header.Get("ETag"))
	}
	if r := a.do(req{method: "GET", path: path, header: map[string]string{"If-None-Match": `"og-1-1"`}}); r.status != 200 {
		t.Fatalf("stale tag: %d", r.status)
	}
	// A rename changes the card, so its tag.
	if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"displayName": "Grace"}}); r.status != 200 {
		t.Fatalf("rename: %d %s", r.status, r.body)
	}
	r2 := a.do(req{method: "GET", path: path, header: map[string]string{"If-None-Match": etag}})
	if r2.status != 200 || r2.header.Get("ETag") == etag || bytes.Equal(r2.body, r.body) {
		t.Fatalf("after rename: %d %q", r2.status, r2.header.Get("ETag"))
	}
	unknown := a.do(req{method: "GET", path: "/v1/leaderboard/trader/no-such-0000/og.png"})
	if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"optedOut": true}}); r.status != 200 {
		t.Fatalf("opt out: %d", r.status)
	}
	opted := a.do(req{method: "GET", path: path})
	if unknown.status != 404 || opted.status != 404 || !bytes.Equal(unknown.body, opted.body) || opted.header.Get("ETag") != "" {
		t.Fatalf("unknown %d %s / opted out %d %s", unknown.status, unknown.body, opted.status, opted.body)
	}
}

// TestCardETagFollowsWhatTheCardShows: the same data, the same tag; a
// rank that moved (another trader opted out between recomputes, which
// changes neither the recompute stamp nor this trader's revision) a new
// one, so the card is re-rendered and no cache keeps the stale ranks.
func TestCardETagFollowsWhatTheCardShows(t *testing.T) {
	d := growth.CardData{Handle: "plucky-puma-9818", ComputedTsMs: 1_795_734_000_597, Rev: 1, PnlMsat: 5, Curve: []int64{1, 2},
		Placements: []growth.PlacementView{{Board: "pnl", Window: "7d", Rank: 3}}}
	same := d
	same.Placements = []growth.PlacementView{{Board: "pnl", Window: "7d", Rank: 3}}
	moved := d
	moved.Placements = []growth.PlacementView{{Board: "pnl", Window: "7d", Rank: 2}}
	if cardETag(d) != cardETag(same) || cardETag(d) == cardETag(moved) {
		t.Fatalf("tags %s %s %s", cardETag(d), cardETag(same), cardETag(moved))
	}
	if !strings.HasPrefix(cardETag(d), `"og-1795734000597-1-`) {
		t.Fatalf("tag %s is not tied to the recompute stamp", cardETag(d))
	}
}

// The promoter routes: apply (validated), profile (404 before), codes with
// a bounded kickback, stats by day, earnings and claim.
func TestPromoterOverHTTP(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	if r := a.do(req{method: "GET", path: "/v1/promoter", key: key}); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("profile before applying: %d %s", r.status, r.body)
	}
	app := map[string]any{"displayName": "Sats Weekly", "plan": "weekly perps column", "jurisdictions": []string{"DE"},
		"acceptedTermsVersion": "2026-11", "channels": []map[string]any{{"kind": "newsletter", "url": "https://sats.example", "audience": "12k"}}}
	for _, field := range []string{"displayName", "channels", "plan", "jurisdictions", "acceptedTermsVersion"} {
		partial := map[string]any{}
		for k, v := range app {
			if k != field {
				partial[k] = v
			}
		}
		if r := a.do(req{method: "POST", path: "/v1/promoter/apply", key: key, idem: nextIdem(), body: partial}); r.status != 400 || r.code() != "validation" {
			t.Fatalf("without %s: %d %s", field, r.status, r.body)
		}
	}
	wrongTerms := map[string]any{}
	for k, v := range app {
		wrongTerms[k] = v
	}
	wrongTerms["acceptedTermsVersion"] = "2019-01"
	if r := a.do(req{method: "POST", path: "/v1/promoter/apply", key: key, idem: nextIdem(), body: wrongTerms}); r.status != 400 {
		t.Fatalf("old terms: %d %s", r.status, r.body)
	}
	r := a.do(req{method: "POST", path: "/v1/promoter/apply", key: key, idem: nextIdem(), body: app})
	if r.status != 201 || r.json(t)["status"] != "approved" || !strings.HasPrefix(r.json(t)["promoterId"].(string), "prm_") {
		t.Fatalf("apply: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/promoter/apply", key: key, idem: nextIdem(), body: app}); r.status != 409 {
		t.Fatalf("second apply: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/promoter/codes", key: key, idem: nextIdem(), body: map[string]any{"code": "SATS1", "label": "x", "kickbackQ9": "900000000"}}); r.status != 400 {
		t.Fatalf("kickback beyond the bound: %d %s", r.status, r.body)
	}
	r = a.do(req{method: "POST", path: "/v1/promoter/codes", key: key, idem: nextIdem(), body: map[string]any{"code": "sats1", "label": "newsletter", "kickbackQ9": "50000000"}})
	if r.status != 201 || r.json(t)["code"] != "SATS1" || r.json(t)["shareQ9"] != "250000000" {
		t.Fatalf("code: %d %s", r.status, r.body)
	}
	refereeKey, _ := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/referral/bind", key: refereeKey, idem: nextIdem(), body: map[string]any{"code": "SATS1"}}); r.status != 200 {
		t.Fatalf("bind promoter code: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/orders", key: refereeKey, idem: "pr-1", body: orderBody("BTC-PERP", "buy", "market", "20000", nil)}); r.status != 201 {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	codes := a.do(req{method: "GET", path: "/v1/promoter/codes", key: key}).json(t)["codes"].([]any)
	if len(codes) != 1 || codes[0].(map[string]any)["referees"] != "1" {
		t.Fatalf("codes %v", codes)
	}
	stats := a.do(req{method: "GET", path: "/v1/promoter/stats?days=3", key: key}).json(t)
	if days := stats["days"].([]any); len(days) != 3 || days[2].(map[string]any)["fills"] != "1" || stats["totals"].(map[string]any)["binds"] != "1" {
		t.Fatalf("stats %v", stats)
	}
	if r := a.do(req{method: "GET", path: "/v1/promoter/stats?days=91", key: key}); r.status != 400 {
		t.Fatalf("days 91: %d", r.status)
	}
	earn := a.do(req{method: "GET", path: "/v1/promoter/earnings", key: key}).json(t)["earnings"].([]any)
	if len(earn) != 1 || earn[0].(map[string]any)["code"] != "SATS1" {
		t.Fatalf("earnings %v", earn)
	}
	prof := a.do(req{method: "GET", path: "/v1/promoter", key: key}).json(t)
	if prof["pendingHoldbackMsat"] != earn[0].(map[string]any)["rewardMsat"] || prof["codes"] != "1" {
		t.Fatalf("profile %v", prof)
	}
	if r := a.do(req{method: "POST", path: "/v1/promoter/claim", key: key, idem: nextIdem(), body: "{}"}); r.status != 409 {
		t.Fatalf("early claim: %d %s", r.status, r.body)
	}
}

// jumpClock is the system clock plus an offset the test moves forward
// (wall and monotonic alike), so log time can pass days in seconds.
type jumpClock struct {
	start  time.Time
	offset atomic.Int64 // ms
}

func (c *jumpClock) WallMs() int64 { return time.Now().UnixMilli() + c.offset.Load() }
func (c *jumpClock) Mono() time.Duration {
	return time.Since(c.start) + time.Duration(c.offset.Load())*time.Millisecond
}

// waitLogTime waits until the node's log time reaches tsMs. It polls
// every millisecond: a tick commits in about that, and the acceptance
// test below waits here some three thousand times.
func (a *testAPI) waitLogTime(tsMs int64) {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var now int64
		a.node.Machine().Read(func(st *fsm.State, _ uint64) { now = st.NowMs })
		if now >= tsMs {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("log time %d never reached %d", now, tsMs)
		}
		time.Sleep(time.Millisecond)
	}
}

// The acceptance flow, as a new user would try it over HTTP: two
// accounts, one refers the other, the referee trades, the referrer sees the
// accrued reward, the log clock passes the holdback (a clock jump, the
// leader catching up a minute per entry), the referrer claims; the
// leaderboard shows the referee after a recompute and its share card
// renders (PERPD_CARD_OUT=file.png keeps it to look at).
func TestReferralAndLeaderboardAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("about 3,000 clock steps through raft (some 5 s)")
	}
	clk := &jumpClock{start: time.Now()}
	// The raft log on tmpfs where there is one: two days of catch-up ticks
	// are some three thousand entries.
	dir := t.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "perpd-accept-"); err == nil {
		dir = shm
		t.Cleanup(func() { _ = os.RemoveAll(shm) })
	}
	a := newTestAPI(t, func(c *node.Config) { c.Clock = clk; c.TickInterval = time.Millisecond; c.DataDir = dir })
	a.listMarkets()
	a.freshPrices()
	refKey, _ := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/referral/code", key: refKey, idem: nextIdem(), body: map[string]any{"code": "WELCOME"}}); r.status != 201 {
		t.Fatalf("code: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/orders", key: refKey, idem: "own-1", body: orderBody("ETH-PERP", "buy", "market", "150", nil)}); r.status != 201 {
		t.Fatalf("referrer's own trade: %d %s", r.status, r.body)
	}
	refereeKey, _ := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/referral/bind", key: refereeKey, idem: nextIdem(), body: map[string]any{"code": "welcome"}}); r.status != 200 {
		t.Fatalf("bind: %d %s", r.status, r.body)
	}
	for i, o := range []map[string]any{orderBody("BTC-PERP", "buy", "market", "30000", nil),
		orderBody("BTC-PERP", "sell", "market", "10000", nil), orderBody("BTC-PERP", "sell", "market", "10000", nil)} {
		if r := a.do(req{method: "POST", path: "/v1/orders", key: refereeKey, idem: fmt.Sprint("ref-", i), body: o}); r.status != 201 {
			t.Fatalf("referee order %d: %d %s", i, r.status, r.body)
		}
	}
	stats := a.do(req{method: "GET", path: "/v1/referral", key: refKey}).json(t)["stats"].(map[string]any)
	pending := stats["pendingHoldbackMsat"].(string)
	if pending == "0" || stats["claimableMsat"] != "0" || stats["lifetimeEarnedMsat"] != pending {
		t.Fatalf("before the holdback: %v", stats)
	}
	earn := a.do(req{method: "GET", path: "/v1/referral/earnings", key: refKey}).json(t)["earnings"].([]any)
	if len(earn) != 3 || earn[0].(map[string]any)["status"] != "accrued" {
		t.Fatalf("earnings %v", earn)
	}

	// Two days and a quarter of an hour pass on the log clock.
	var now int64
	a.node.Machine().Read(func(st *fsm.State, _ uint64) { now = st.NowMs })
	target := (now/growth.DayMs)*growth.DayMs + 2*growth.DayMs + 20*60_000
	// A leader stamps from its monotonic clock, at most a minute past the
	// log per entry, and drops what a jump skips beyond that: step the
	// clock a minute at a time, as real minutes would pass.
	for logNow := now; logNow < target; {
		step := min(59_000, target-logNow)
		clk.offset.Add(step)
		logNow += step
		a.waitLogTime(logNow)
	}

	stats = a.do(req{method: "GET", path: "/v1/referral", key: refKey}).json(t)["stats"].(map[string]any)
	if stats["claimableMsat"] != pending || stats["pendingHoldbackMsat"] != "0" {
		t.Fatalf("after the holdback: %v (pending was %s)", stats, pending)
	}
	before := a.do(req{method: "GET", path: "/v1/account", key: refKey}).json(t)
	r := a.do(req{method: "POST", path: "/v1/referral/claim", key: refKey, idem: nextIdem(), body: "{}"})
	if r.status != 201 || r.json(t)["claimedMsat"] != pending || r.json(t)["accruals"] != "3" {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	after := a.do(req{method: "GET", path: "/v1/account", key: refKey}).json(t)
	t.Logf("referrer account before %v after %v, claimed %s", before["freeMsat"], after["freeMsat"], pending)
	earn = a.do(req{method: "GET", path: "/v1/referral/earnings", key: refKey}).json(t)["earnings"].([]any)
	if earn[0].(map[string]any)["status"] != "claimed" {
		t.Fatalf("earnings after claim %v", earn)
	}

	handle := a.do(req{method: "GET", path: "/v1/leaderboard/me", key: refereeKey}).json(t)["handle"].(string)
	board := a.do(req{method: "GET", path: "/v1/leaderboard?board=pnl&window=7d"}).json(t)
	rows := board["rows"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["handle"] != handle || rows[0].(map[string]any)["trades"] != "3" || board["computedTsMs"] == nil {
		t.Fatalf("board %v (referee %s)", board, handle)
	}
	prof := a.do(req{method: "GET", path: "/v1/leaderboard/trader/" + handle}).json(t)
	// Three days of curve: the trading day and two of funding payments.
	if pl := prof["placements"].([]any); len(pl) != 6 || len(prof["equityCurve"].([]any)) != 3 {
		t.Fatalf("profile %v", prof)
	}
	card := a.do(req{method: "GET", path: "/v1/leaderboard/trader/" + handle + "/og.png"})
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(card.body)); card.status != 200 || err != nil || cfg.Width != 1200 {
		t.Fatalf("card: %d %v", card.status, err)
	}
	if out := os.Getenv("PERPD_CARD_OUT"); out != "" {
		_ = os.WriteFile(out, card.body, 0o644)
	}
}

// TestDisplayNameImpersonationRefused: the settings route refuses a name
// in another trader's handle shape or with lookalike letters (400
// validation, nothing changes), and takes the caller's own handle.
func TestDisplayNameImpersonationRefused(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: nextIdem(), body: orderBody("ETH-PERP", "buy", "market", "10", nil)}); r.status != 201 {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	set := func(name string) resp {
		return a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"displayName": name}})
	}
	wantCode(t, set("silver-crow-3327"), 400, "validation")
	wantCode(t, set("silvеr crow"), 400, "validation")
	wantCode(t, set("\U0001d429\U0001d41e\U0001d42b\U0001d429\U0001d41d"), 400, "validation") // mathematical bold perpd
	wantCode(t, set("silver-crow-\U0001d7d1\U0001d7d1\U0001d7d0\U0001d7d5"), 400, "validation")
	handle := a.do(req{method: "GET", path: "/v1/leaderboard/me", key: key}).json(t)["handle"].(string)
	if r := set(handle); r.status != 200 {
		t.Fatalf("own handle as display name: %d %s", r.status, r.body)
	}
}

// TestShareCardRevalidatedSoOptOutIsAtOnce: opting out answers 404 for
// the card at once (SPEC: 404 for an opted-out handle), so a cache may
// keep a card only if it asks again before each use. The card was sent
// with max-age=60: browsers and shared caches showed it for a minute
// after the trader opted out, without asking.
func TestShareCardRevalidatedSoOptOutIsAtOnce(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	if r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: "og-cc", body: orderBody("ETH-PERP", "buy", "market", "10", nil)}); r.status != 201 {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	handle := a.do(req{method: "GET", path: "/v1/leaderboard/me", key: key}).json(t)["handle"].(string)
	path := "/v1/leaderboard/trader/" + handle + "/og.png"
	r := a.do(req{method: "GET", path: path})
	cc := r.header.Get("Cache-Control")
	if r.status != 200 || !strings.Contains(cc, "no-cache") || strings.Contains(cc, "max-age") && !strings.Contains(cc, "max-age=0") {
		t.Fatalf("card: %d, Cache-Control %q lets a cache show it without asking", r.status, cc)
	}
	if r := a.do(req{method: "GET", path: path, header: map[string]string{"If-None-Match": r.header.Get("ETag")}}); r.status != 304 || r.header.Get("Cache-Control") != cc {
		t.Fatalf("revalidation: %d, Cache-Control %q", r.status, r.header.Get("Cache-Control"))
	}
	if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"optedOut": true}}); r.status != 200 {
		t.Fatalf("opt out: %d", r.status)
	}
	if r := a.do(req{method: "GET", path: path, header: map[string]string{"If-None-Match": r.header.Get("ETag")}}); r.status != 404 {
		t.Fatalf("revalidation after opt-out: %d", r.status)
	}
}

// TestCodesPosingAsTheVenueRefused: a new referral or promoter code that
// names the venue, claims to be official or is a staff word is refused
// (400 validation, nothing created); before, anyone could create PERPD or
// OFFICIAL and hand it out as the venue's own (trust review, 2026-11-27).
func TestCodesPosingAsTheVenueRefused(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	for _, code := range []string{"perpd", "PerpdVip", "GETPERPD1", "official1", "SUPPORT", "admin"} {
		wantCode(t, a.do(req{method: "POST", path: "/v1/referral/code", key: key, idem: nextIdem(), body: map[string]any{"code": code}}), 400, "validation")
	}
	if r := a.do(req{method: "POST", path: "/v1/referral/code", key: key, idem: nextIdem(), body: map[string]any{"code": "sats21"}}); r.status != 201 {
		t.Fatalf("an ordinary code: %d %s", r.status, r.body)
	}
	app := map[string]any{"displayName": "Bob", "plan": "posts", "jurisdictions": []string{"US"}, "acceptedTermsVersion": "2026-11",
		"channels": []map[string]any{{"kind": "website", "url": "https://example.com/", "audience": "devs"}}}
	if r := a.do(req{method: "POST", path: "/v1/promoter/apply", key: key, idem: nextIdem(), body: app}); r.status != 201 {
		t.Fatalf("apply: %d %s", r.status, r.body)
	}
	pcode := func(code string) resp {
		return a.do(req{method: "POST", path: "/v1/promoter/codes", key: key, idem: nextIdem(), body: map[string]any{"code": code, "label": "x", "kickbackQ9": "0"}})
	}
	wantCode(t, pcode("PERPDPRO"), 400, "validation")
	wantCode(t, pcode("team"), 400, "validation")
	if r := pcode("MYTEAM"); r.status != 201 {
		t.Fatalf("an ordinary promoter code: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "GET", path: "/v1/promoter/codes", key: key}); !strings.Contains(string(r.body), `"codes":[{"code":"MYTEAM"`) {
		t.Fatalf("codes after the refusals: %s", r.body)
	}
	for range 200 {
		if ref := growth.CheckCodeImpersonation(drawCode()); ref != nil {
			t.Fatalf("a drawn code: %s", ref.Msg)
		}
	}
}
