package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/node"
)

// skewClock is the system clock plus an offset the test moves, on both
// readings, so the leader's log time jumps ahead with it.
type skewClock struct {
	start  time.Time
	offset atomic.Int64 // ms
}

func (c *skewClock) WallMs() int64 { return time.Now().UnixMilli() + c.offset.Load() }
func (c *skewClock) Mono() time.Duration {
	return time.Since(c.start) + time.Duration(c.offset.Load())*time.Millisecond
}

// nextPorTree moves log time past the next tree boundary and the tree's
// publication, por.PublishDelayMs later (the first tree is due at once),
// and waits until GET /por shows a tree newer than after.
func (a *testAPI) nextPorTree(clk *skewClock, after int64) map[string]any {
	a.t.Helper()
	if after > 0 {
		clk.offset.Add(por.CadenceMs + por.PublishDelayMs + 1000)
	} else {
		clk.offset.Add(por.PublishDelayMs + 1000)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		r := a.get("/por")
		if r.status == 200 {
			m := r.json(a.t)
			if ts, _ := strconv.ParseInt(m["tsMs"].(string), 10, 64); ts > after {
				return m
			}
		}
		time.Sleep(250 * time.Millisecond) // GET /por spends the unauthenticated budget
	}
	a.t.Fatal("no new Proof of Reserves tree")
	return nil
}

// settledPor moves log time to the next tree, then waits until GET /por
// keeps the same tree for half a second with no tree pending behind it
// (log time has caught up with the moved clock, and the next tree is a
// minute away) and returns it.
func (a *testAPI) settledPor(clk *skewClock) map[string]any {
	a.t.Helper()
	m := a.nextPorTree(clk, porTs(a.nextPorTree(clk, 0)))
	for i := 0; i < 100; i++ {
		time.Sleep(500 * time.Millisecond)
		again := a.get("/por").json(a.t)
		pending := false
		a.node.Machine().Read(func(st *fsm.State, _ uint64) { pending = st.PoR.Pending != nil })
		if again["tsMs"] == m["tsMs"] && !pending {
			return again
		}
		m = again
	}
	a.t.Fatal("GET /por never settled")
	return nil
}

func porTs(m map[string]any) int64 {
	ts, _ := strconv.ParseInt(m["tsMs"].(string), 10, 64)
	return ts
}

// Tried as a new user would: fund an account, wait for the next tree,
// fetch the proof and verify it against the public root; the snapshot's
// total is the sum of every account's balance.
func TestPorOverHTTP(t *testing.T) {
	clk := &skewClock{start: time.Now()}
	a := newTestAPIWith(t, nil, func(c *node.Config) { c.Clock = clk })
	keys := map[string]string{}
	for i := 0; i < 3; i++ {
		k, acct := a.signup()
		keys[acct] = k
		if i < 2 {
			if r := a.do(req{method: "POST", path: "/v1/faucet", key: k, idem: nextIdem(), body: "{}"}); r.status != 201 {
				t.Fatalf("faucet: %d %s", r.status, r.body)
			}
		}
	}
	snap := a.settledPor(clk) // taken after the faucet grants
	if snap["status"] != "clean" || snap["consolidationVerified"] != true || snap["stale"] != false || snap["staleAfterMs"] != "180000" {
		t.Fatalf("snapshot %v", snap)
	}
	liab := snap["liability"].(map[string]any)
	var sum int64
	for _, k := range keys {
		acc := a.do(req{method: "GET", path: "/v1/account", key: k}).json(t)
		free, _ := strconv.ParseInt(acc["freeMsat"].(string), 10, 64)
		res, _ := strconv.ParseInt(acc["reservedMsat"].(string), 10, 64)
		sum += free + res
	}
	if liab["totalMsat"] != strconv.FormatInt(sum, 10) || sum == 0 || liab["leafCount"] != float64(3) {
		t.Fatalf("liability %v, accounts hold %d", liab, sum)
	}
	for acct, k := range keys {
		r := a.do(req{method: "GET", path: "/v1/por/proof", key: k})
		if r.status != 200 {
			t.Fatalf("proof: %d %s", r.status, r.body)
		}
		d, err := por.DecodeProof(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		v, err := d.Verify(liab["rootHash"].(string))
		if err != nil {
			t.Fatalf("%s: %v", acct, err)
		}
		acc := a.do(req{method: "GET", path: "/v1/account", key: k}).json(t)
		if strconv.FormatUint(v.Balance, 10) != acc["freeMsat"] || len(d.Path) != 2 || d.TreeTsMs != snap["tsMs"] {
			t.Fatalf("%s: verdict %+v, account %v", acct, v, acc["freeMsat"])
		}
	}
	// No USDx held: not in the USDx tree. A bad asset is refused; no key
	// is 401.
	var anyKey string
	for _, k := range keys {
		anyKey = k
	}
	wantCode(t, a.do(req{method: "GET", path: "/v1/por/proof?asset=usdx", key: anyKey}), 404, "not_found")
	wantCode(t, a.do(req{method: "GET", path: "/v1/por/proof?asset=btc", key: anyKey}), 400, "validation")
	wantCode(t, a.do(req{method: "GET", path: "/v1/por/proof"}), 401, "unauthorized")
	// An account created after the tree is not in it until the next one.
	late, _ := a.signup()
	wantCode(t, a.do(req{method: "GET", path: "/v1/por/proof", key: late}), 404, "not_found")
	snap2 := a.nextPorTree(clk, porTs(snap))
	if r := a.do(req{method: "GET", path: "/v1/por/proof?asset=msat", key: late}); r.status != 200 {
		t.Fatalf("late account after the next tree: %d %s", r.status, r.body)
	}
	hist := snap2["history"].([]any)
	if len(hist) < 3 || hist[0].(map[string]any)["tsMs"] != snap2["tsMs"] || hist[1].(map[string]any)["rootHash"] != liab["rootHash"] {
		t.Fatalf("history %v", hist)
	}
	if r := a.get("/por/dashboard"); r.status != 200 || !bytes.Contains(r.body, []byte("<html")) {
		t.Fatalf("dashboard: %d", r.status)
	}
}

// The USDx tree over HTTP: a holder's proof carries micro-USDx and
// verifies against liabilityUsdx; the tree's total is the supply held.
func TestPorUsdxProofOverHTTP(t *testing.T) {
	clk := &skewClock{start: time.Now()}
	a := newTestAPIWith(t, nil, func(c *node.Config) { c.Clock = clk })
	a.listMarkets()
	key, _ := a.tradingAccount()
	a.freshPrices()
	q := a.do(req{method: "POST", path: "/v1/usdx/quotes", key: key, body: map[string]any{"side": "mint", "usdx": "20"}})
	if q.status != 201 {
		t.Fatalf("quote: %d %s", q.status, q.body)
	}
	qid := q.json(t)["quoteId"].(string)
	if r := a.do(req{method: "POST", path: "/v1/usdx/mints", key: key, idem: qid, body: map[string]any{"quoteId": qid}}); r.status != 201 {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	snap := a.settledPor(clk)
	lu := snap["liabilityUsdx"].(map[string]any)
	if lu["totalMicro"] != "20000000" || lu["leafCount"] != float64(1) {
		t.Fatalf("liabilityUsdx %v", lu)
	}
	if v := snap["vaultExposure"].(map[string]any); v["netPctOfEquityQ9"] != "0" || v["consolidationVerified"] != true || v["quantumQ9"] != "50000000" {
		t.Fatalf("vaultExposure %v", v)
	}
	if snap["status"] != "clean" || snap["consolidationVerified"] != true {
		t.Fatalf("snapshot %v", snap)
	}
	r := a.do(req{method: "GET", path: "/v1/por/proof?asset=usdx", key: key})
	if r.status != 200 {
		t.Fatalf("proof: %d %s", r.status, r.body)
	}
	d, err := por.DecodeProof(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Verify(lu["rootHash"].(string))
	if err != nil || d.Asset != "usdx" || d.Leaf.BalanceMicro != "20000000" || d.TotalMicro != "20000000" || d.Leaf.BalanceMsat != "" || v.Balance != 20_000_000 {
		t.Fatalf("usdx proof %s: %v", r.body, err)
	}
	// The sats proof of the same account is another tree with another root.
	r = a.do(req{method: "GET", path: "/v1/por/proof", key: key})
	d2, _ := por.DecodeProof(bytes.NewReader(r.body))
	if _, err := d2.Verify(lu["rootHash"].(string)); err == nil {
		t.Fatal("the sats proof verified against the USDx root")
	}
	if _, err := d2.Verify(snap["liability"].(map[string]any)["rootHash"].(string)); err != nil {
		t.Fatal(err)
	}
}

// TestPorProofSurvivesTheCacheChangingUnderIt: a proof request found the
// cached tree current in its state read and so copied no leaves; another
// request then replaced the cache with another tree (as at a minute's
// boundary) before this one used it. It answered 503 "the tree changed";
// now it keeps the tree it found and answers the proof.
func TestPorProofSurvivesTheCacheChangingUnderIt(t *testing.T) {
	clk := &skewClock{start: time.Now()}
	a := newTestAPIWith(t, nil, func(c *node.Config) { c.Clock = clk })
	k, _ := a.signup()
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: k, idem: nextIdem(), body: "{}"}); r.status != 201 {
		t.Fatalf("faucet: %d %s", r.status, r.body)
	}
	snap := a.settledPor(clk)
	root := snap["liability"].(map[string]any)["rootHash"].(string)
	if r := a.do(req{method: "GET", path: "/v1/por/proof", key: k}); r.status != 200 { // caches the tree
		t.Fatalf("first proof: %d %s", r.status, r.body)
	}
	other, err := por.BuildWidth(por.Hash{1}, []por.Leaf{{Amount: 5}, {Amount: 6}}, por.MinWidth)
	if err != nil {
		t.Fatal(err)
	}
	testHookPorProofRead = func() {
		porTrees.Lock()
		porTrees.byAsset[por.AssetMsat] = other
		porTrees.Unlock()
	}
	t.Cleanup(func() { testHookPorProofRead = nil })
	r := a.do(req{method: "GET", path: "/v1/por/proof", key: k})
	if r.status != 200 {
		t.Fatalf("proof with the cache replaced under it: %d %s", r.status, r.body)
	}
	d, err := por.DecodeProof(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(root); err != nil {
		t.Fatal(err)
	}
}

// TestPorProofRequestsShareOneTreeBuild: the levels of a new tree are
// built on read, once. Proof requests that all missed the cache (as at
// every minute's boundary) each copied the leaves under the state's read
// lock and each built the whole tree: at 100,000 accounts about 14 MB and
// 33 ms of CPU per request, so a burst of requests from many keys spiked
// memory and CPU by its size. Now the first builds and the rest wait for
// its tree; every request still gets its own valid proof.
func TestPorProofRequestsShareOneTreeBuild(t *testing.T) {
	clk := &skewClock{start: time.Now()}
	a := newTestAPIWith(t, nil, func(c *node.Config) { c.Clock = clk })
	const n = 6
	var keys []string
	for i := 0; i < n; i++ {
		k, _ := a.signup()
		keys = append(keys, k)
	}
	snap := a.settledPor(clk)
	root := snap["liability"].(map[string]any)["rootHash"].(string)
	// Every request reads the state before any of them builds.
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	testHookPorProofRead = func() {
		arrived.Done()
		select {
		case <-all:
		case <-time.After(10 * time.Second): // a request that never came: the count below fails
		}
	}
	var builds atomic.Int32
	testHookPorTreeBuild = func() {
		builds.Add(1)
		time.Sleep(100 * time.Millisecond) // a large tree
	}
	t.Cleanup(func() { testHookPorProofRead, testHookPorTreeBuild = nil, nil })
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for _, k := range keys {
		wg.Add(1)
		go func(k string) {
			defer wg.Done()
			// a.do records every exchange and is not safe for concurrent use.
			hr, _ := http.NewRequest("GET", a.http.URL+"/v1/por/proof", nil)
			hr.Header.Set(KeyHeader, k)
			res, err := a.http.Client().Do(hr)
			if err != nil {
				errs <- err.Error()
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				errs <- fmt.Sprintf("%d %s", res.StatusCode, body)
				return
			}
			d, err := por.DecodeProof(bytes.NewReader(body))
			if err == nil {
				_, err = d.Verify(root)
			}
			if err != nil {
				errs <- err.Error()
			}
		}(k)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if got := builds.Load(); got != 1 {
		t.Fatalf("%d concurrent proof requests built the tree %d times", n, got)
	}
}
