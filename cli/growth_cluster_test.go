package cli_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/growth"
)

// TestGrowthAcrossACluster walks the referral and promoter programmes as
// users would, each write sent to a follower (forwarded to the leader) and
// each read of it made on the other follower (X-Min-Index): a referrer's
// code, a referee's bind and trades, a promoter's code with a kickback and
// its referee's trades; every fill's referral block adds up to what the
// earners see pending. Log time then jumps past the holdback (two days),
// the rewards vest, and claims race: the same idempotency key sent to
// both followers at once pays once (both answers the same), a second key
// is refused (409 conflict) and the free balance grew by the reward
// exactly. Every member then serves the same leaderboard, the same share
// card ETag (a 304 on the other members), and the same state hash.
func TestGrowthAcrossACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster and two days of log time; skipped with -short")
	}
	clk := &shiftedClock{start: time.Now()}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(2*time.Millisecond),
		clustertest.Clock(clk), clustertest.CheckInvariants(true))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	fs := c.Followers()
	a, b := c.HTTP(fs[0].ID), c.HTTP(fs[1].ID)
	call := func(base, method, path, key, idem string, body any, want int) map[string]any {
		t.Helper()
		st, m := railCall(t, base, method, path, key, idem, body)
		if st != want {
			t.Fatalf("%s %s: %d %v, want %d", method, path, st, m, want)
		}
		return m
	}
	order := func(base, key, id, side string, n int) {
		t.Helper()
		call(base, "POST", "/v1/orders", key, id, map[string]any{"marketId": "BTC-PERP", "side": side, "type": "market",
			"contracts": strconv.Itoa(n), "reduceOnly": false}, 201)
	}
	msat := func(v any) int64 {
		t.Helper()
		n, err := strconv.ParseInt(v.(string), 10, 64)
		if err != nil {
			t.Fatalf("not a decimal string: %v", v)
		}
		return n
	}
	// Every fill of key's account (one page: the test makes few), as the
	// referral blocks' discount and reward sums.
	rewards := func(base, key string) (discount, reward int64) {
		t.Helper()
		for _, f := range call(base, "GET", "/v1/fills?limit=100", key, "", nil, 200)["fills"].([]any) {
			if r, ok := f.(map[string]any)["referral"].(map[string]any); ok {
				discount += msat(r["discountMsat"])
				reward += msat(r["rewardMsat"])
			}
		}
		return discount, reward
	}
	waitPrices(t, a)

	// A referrer (passing its own volume gate) and its referee.
	ref := fundedAccount(t, a, "g-ref")
	call(a, "POST", "/v1/referral/code", ref, "g-code", map[string]any{"code": "cluster1"}, 201)
	order(a, ref, "r-1", "buy", 200)
	order(a, ref, "r-2", "sell", 200)
	referee := fundedAccount(t, b, "g-referee")
	call(b, "POST", "/v1/referral/bind", referee, "g-bind", map[string]any{"code": "CLUSTER1"}, 200)
	for i, side := range []string{"buy", "sell", "buy", "sell"} {
		order(b, referee, fmt.Sprint("e-", i), side, 20_000)
	}
	_, refReward := rewards(a, referee)
	stats := call(a, "GET", "/v1/referral", ref, "", nil, 200)["stats"].(map[string]any)
	if refReward < 1_000_000 || msat(stats["pendingHoldbackMsat"]) != refReward || stats["claimableMsat"] != "0" {
		t.Fatalf("referrer before the holdback: %v (fills' rewards %d)", stats, refReward)
	}

	// A promoter (approved at once on testnet) and its referee.
	prom := fundedAccount(t, b, "g-prom")
	channel := map[string]any{"kind": "website", "url": "https://example.org", "audience": "devs"}
	application := map[string]any{"displayName": "Cluster Promo", "plan": "a blog post", "jurisdictions": []any{"DE"},
		"channels": []any{channel}, "acceptedTermsVersion": growth.PromoterTermsVersion}
	call(b, "POST", "/v1/promoter/apply", prom, "g-apply", application, 201)
	call(b, "POST", "/v1/promoter/codes", prom, "g-pcode", map[string]any{"code": "PROMO1", "label": "blog", "kickbackQ9": "50000000"}, 201)
	pref := fundedAccount(t, a, "g-pref")
	call(a, "POST", "/v1/referral/bind", pref, "g-pbind", map[string]any{"code": "promo1"}, 200)
	order(a, pref, "p-1", "buy", 20_000)
	order(a, pref, "p-2", "sell", 20_000)
	_, promReward := rewards(b, pref)
	pv := call(b, "GET", "/v1/promoter", prom, "", nil, 200)
	if promReward < 1_000_000 || msat(pv["pendingHoldbackMsat"]) != promReward || pv["referees"] != "1" {
		t.Fatalf("promoter before the holdback: %v (fills' rewards %d)", pv, promReward)
	}

	// Two days and twenty minutes of log time, a minute at a time (a
	// leader steps at most fsm.MaxClockStepMs per entry).
	leader := c.Leader().Node
	logNow := func() (now int64) {
		leader.Machine().Read(func(st *fsm.State, _ uint64) { now = st.NowMs })
		return now
	}
	start := logNow()
	target := start/growth.DayMs*growth.DayMs + 2*growth.DayMs + 20*60_000
	for now := start; now < target; {
		step := min(59_000, target-now)
		clk.offsetMs.Add(step)
		now += step
		if !clustertest.Poll(20*time.Second, func() bool { return logNow() >= now }) {
			t.Fatalf("log time %d never reached %d", logNow(), now)
		}
	}
	stats = call(b, "GET", "/v1/referral", ref, "", nil, 200)["stats"].(map[string]any)
	if msat(stats["claimableMsat"]) != refReward || stats["pendingHoldbackMsat"] != "0" {
		t.Fatalf("referrer after the holdback: %v (rewards %d)", stats, refReward)
	}

	// The same claim sent to both followers at once: paid once.
	freeOf := func(base, key string) int64 {
		return msat(call(base, "GET", "/v1/account", key, "", nil, 200)["freeMsat"])
	}
	race := func(path, key, idemA, idemB string) [2]struct {
		st int
		m  map[string]any
	} {
		var out [2]struct {
			st int
			m  map[string]any
		}
		var wg sync.WaitGroup
		for i, base := range []string{a, b} {
			idem := []string{idemA, idemB}[i]
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i].st, out[i].m = railCall(t, base, "POST", path, key, idem, map[string]any{})
			}()
		}
		wg.Wait()
		return out
	}
	before := freeOf(a, ref)
	got := race("/v1/referral/claim", ref, "g-claim", "g-claim")
	for _, r := range got {
		if r.st != 201 || msat(r.m["claimedMsat"]) != refReward || r.m["accruals"] != "4" {
			t.Fatalf("claims under one key: %+v, want 201 claimedMsat %d accruals 4", got, refReward)
		}
	}
	if st, m := railCall(t, b, "POST", "/v1/referral/claim", ref, "g-claim-2", map[string]any{}); st != http.StatusConflict || m["code"] != "conflict" {
		t.Fatalf("a second claim: %d %v", st, m)
	}
	if d := freeOf(b, ref) - before; d != refReward {
		t.Fatalf("the referrer's free balance grew %d msat, want %d", d, refReward)
	}
	for _, e := range call(a, "GET", "/v1/referral/earnings", ref, "", nil, 200)["earnings"].([]any) {
		if e.(map[string]any)["status"] != growth.StatusClaimed {
			t.Fatalf("earning after the claim: %v", e)
		}
	}

	// Two claims under two keys at once: one pays, the other is refused.
	before = freeOf(b, prom)
	got = race("/v1/promoter/claim", prom, "g-pc-a", "g-pc-b")
	paid := 0
	for _, r := range got {
		switch {
		case r.st == 201 && msat(r.m["claimedMsat"]) == promReward:
			paid++
		case r.st == http.StatusConflict && r.m["code"] == "conflict":
		default:
			t.Fatalf("racing promoter claims: %+v", got)
		}
	}
	if paid != 1 {
		t.Fatalf("racing promoter claims paid %d times: %+v", paid, got)
	}
	if d := freeOf(a, prom) - before; d != promReward {
		t.Fatalf("the promoter's free balance grew %d msat, want %d", d, promReward)
	}

	// The boards: the same on every member, the referee and the promoter's
	// referee on them under handles, the card's ETag the same everywhere.
	handle := call(a, "GET", "/v1/leaderboard/me", referee, "", nil, 200)["handle"].(string)
	var board map[string]any
	for i, m := range c.Live() {
		got := call(c.HTTP(m.ID), "GET", "/v1/leaderboard?board=pnl&window=all", "", "", nil, 200)
		if i == 0 {
			board = got
		} else if fmt.Sprint(got) != fmt.Sprint(board) {
			t.Fatalf("%s serves board %v, another member %v", m.ID, got, board)
		}
	}
	found := false
	for _, r := range board["rows"].([]any) {
		found = found || r.(map[string]any)["handle"] == handle
	}
	if !found || board["computedTsMs"] == nil {
		t.Fatalf("board %v lacks the referee %s", board, handle)
	}
	var etag string
	for i, m := range c.Live() {
		req, _ := http.NewRequest("GET", c.HTTP(m.ID)+"/v1/leaderboard/trader/"+handle+"/og.png", nil)
		if i > 0 {
			req.Header.Set("If-None-Match", etag)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		switch {
		case i == 0 && res.StatusCode == 200 && res.Header.Get("Content-Type") == "image/png":
			etag = res.Header.Get("ETag")
		case i > 0 && res.StatusCode == http.StatusNotModified && res.Header.Get("ETag") == etag:
		default:
			t.Fatalf("%s card: %d %v (etag %s)", m.ID, res.StatusCode, res.Header, etag)
		}
	}
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitPrices waits until base serves a fresh BTC-PERP price.
func waitPrices(t *testing.T, base string) {
	t.Helper()
	if !clustertest.Poll(15*time.Second, func() bool {
		st, m := railCall(t, base, "GET", "/v1/markets/BTC-PERP", "", "", nil)
		return st == 200 && m["lastPrice"] != nil
	}) {
		t.Fatal("no BTC-PERP price")
	}
}
