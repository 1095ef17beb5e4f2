package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLimitPriceIsOnTheTickAndAwayFromTheMid(t *testing.T) {
	const mid, tick = 9_712_345_678_901, 50_000_000 // 97,123.45678901 USD, 0.5 USD tick
	for _, bps := range []int64{limitAwayMinBps, 333, limitAwayMaxBps} {
		buy, sell := int64(LimitPrice(mid, tick, bps, true)), int64(LimitPrice(mid, tick, bps, false))
		if buy%tick != 0 || sell%tick != 0 {
			t.Fatalf("%d bps: buy %d sell %d not on the %d tick", bps, buy, sell, tick)
		}
		away := mid * bps / 10_000
		if buy > mid-away || buy <= mid-away-tick {
			t.Errorf("%d bps: buy %d, want the tick at or below %d", bps, buy, mid-away)
		}
		if sell < mid+away || sell >= mid+away+tick {
			t.Errorf("%d bps: sell %d, want the tick at or above %d", bps, sell, mid+away)
		}
	}
	if p := LimitPrice(3, 5, 500, true); p != 5 {
		t.Errorf("a buy below one tick: %d, want the tick", p)
	}
	if p := LimitPrice(10_000, 1, 200, false); p != 10_200 {
		t.Errorf("exact: %d, want 10200", p)
	}
}

func TestNormalizeNodes(t *testing.T) {
	got, err := NormalizeNodes([]string{"127.0.0.1:8080", " http://h:1/ ", "https://x.example/api/", ""})
	want := []string{"http://127.0.0.1:8080", "http://h:1", "https://x.example/api"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%v %v, want %v", got, err, want)
	}
	for _, bad := range [][]string{nil, {" "}, {"ftp://h:1"}, {"http://"}, {"http://h:1/?q=1"}} {
		if _, err := NormalizeNodes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// fakeVenue answers what a trader calls, with tier and deployment as set,
// and counts requests by "METHOD path". orders, when set, answers
// POST /v1/orders.
type fakeVenue struct {
	tier, deployment string
	orders           http.HandlerFunc
	mu               sync.Mutex
	calls            map[string]int
	idemKeys         map[string]bool
	reused           atomic.Bool
}

func (f *fakeVenue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls[r.Method+" "+r.URL.Path]++
	if k := r.Header.Get(idemHeader); k != "" {
		if f.idemKeys[k] {
			f.reused.Store(true)
		}
		f.idemKeys[k] = true
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /healthz":
		fmt.Fprint(w, `{"ok":true,"db":true,"tsMs":"1"}`)
	case "GET /deployment":
		fmt.Fprintf(w, `{"deployment":%q}`, f.deployment)
	case "POST /v1/signup":
		w.WriteHeader(201)
		fmt.Fprint(w, `{"apiKey":"k","accountId":"acc_1","railAddress":"x"}`)
	case "POST /v1/faucet":
		w.WriteHeader(201)
		fmt.Fprint(w, `{"creditedMsat":"1000","grantsRemainingThisHour":2}`)
	case "GET /v1/limits":
		fmt.Fprintf(w, `{"tier":%q,"budgets":{"order":{"limitPerMin":60,"burst":20,"remaining":20}}}`, f.tier)
	case "GET /v1/markets":
		fmt.Fprint(w, `[{"marketId":"BTC-PERP","status":"live","tickSizeQ8":"50000000","minOrderContracts":"1","maxOrderContracts":"1000000","lastPrice":{"midQ8":"9700000000000","tsMs":"1"}}]`)
	case "POST /v1/orders":
		f.orders(w, r)
	default:
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"no","code":"not_found"}`)
	}
}

func (f *fakeVenue) count(k string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[k]
}

func startFake(t *testing.T, f *fakeVenue) string {
	f.calls, f.idemKeys = map[string]int{}, map[string]bool{}
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return s.URL
}

func fakeConfig(url string, traders int, d time.Duration, mix string) Config {
	m, err := ParseMix(mix)
	if err != nil {
		panic(err)
	}
	return Config{Nodes: []string{url}, Traders: traders, Duration: d, Mix: m, Seed: 1, ReadyTimeout: 2 * time.Second,
		SetupTimeout: 5 * time.Second}
}

// Every order answers 429 with Retry-After: 1. A trader that honours it
// sends about one order a second; one that did not would send thousands.
func TestA429IsCountedAndItsRetryAfterHonoured(t *testing.T) {
	f := &fakeVenue{tier: TierBench, deployment: "testnet", orders: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":"the order budget is empty","code":"rate_limited"}`)
	}}
	url := startFake(t, f)
	res, err := Run(context.Background(), fakeConfig(url, 2, 2500*time.Millisecond, "market=1"))
	if err != nil {
		t.Fatal(err)
	}
	sent := f.count("POST /v1/orders")
	// Two traders, each at t=0, 1 s and 2 s: six; allow one more each
	// for timing at the edges.
	if sent < 4 || sent > 8 {
		t.Fatalf("%d orders sent in 2.5 s by 2 traders told to wait 1 s after each", sent)
	}
	m := res.Ops[OpMarket]
	if m.Count != int64(sent) || m.OK != 0 || m.Errors["rate_limited"] != int64(sent) || len(m.Errors) != 1 {
		t.Fatalf("market result %+v, want %d rate_limited", m, sent)
	}
	if f.reused.Load() {
		t.Fatal("an idempotency-key was sent twice")
	}
}

func TestRunRefusesProd(t *testing.T) {
	f := &fakeVenue{tier: TierProd, deployment: TierProd}
	url := startFake(t, f)
	res, err := Run(context.Background(), fakeConfig(url, 4, time.Second, DefaultMix))
	if !errors.Is(err, ErrProd) || res != nil {
		t.Fatalf("%v %v, want ErrProd and no result", res, err)
	}
	if n := f.count("POST /v1/signup"); n != 0 {
		t.Fatalf("%d signups sent to a prod deployment", n)
	}
}

// On a tier other than bench only the first trader signs up, unless the
// run says any tier will do.
func TestRunStopsOnANonBenchTierUnlessAllowed(t *testing.T) {
	f := &fakeVenue{tier: "testnet", deployment: "testnet", orders: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		fmt.Fprint(w, `{"orderId":"o","status":"filled"}`)
	}}
	url := startFake(t, f)
	res, err := Run(context.Background(), fakeConfig(url, 4, time.Second, "market=1"))
	if !errors.Is(err, ErrNotBench) || res == nil || res.Tier != "testnet" || res.TradersRunning != 0 {
		t.Fatalf("%+v %v, want ErrNotBench with the tier", res, err)
	}
	if n := f.count("POST /v1/signup"); n != 1 {
		t.Fatalf("%d signups, want only the first trader's", n)
	}
	cfg := fakeConfig(url, 4, 300*time.Millisecond, "market=1")
	cfg.AllowAnyTier = true
	res, err = Run(context.Background(), cfg)
	if err != nil || res.TradersRunning != 4 || res.Ops[OpMarket].OK == 0 {
		t.Fatalf("allowed: %+v %v", res, err)
	}
	if !strings.Contains(ErrNotBench.Error(), "--allow-any-tier") {
		t.Fatal("the refusal does not name the way out")
	}
}
