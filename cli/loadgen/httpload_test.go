package loadgen

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// kvServer is an etcd-gateway-like target: it decodes {"key","value"}
// (base64), counts requests, remembers keys and idempotency headers, and
// answers every fifth request of a worker with a refusal.
type kvServer struct {
	delay    time.Duration
	mu       sync.Mutex
	requests int
	keys     map[string]bool
	idem     map[string]bool
	dupKey   bool
	dupIdem  bool
	bad      []string
	sides    map[string][]string // worker -> sides in arrival order
}

func (s *kvServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(s.delay)
	raw, _ := io.ReadAll(r.Body)
	var body struct{ Key, Value, Side string }
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if err := json.Unmarshal(raw, &body); err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		s.bad = append(s.bad, fmt.Sprintf("%s %s %q", r.Method, r.Header.Get("Content-Type"), raw))
		w.WriteHeader(400)
		return
	}
	key, err := base64.StdEncoding.DecodeString(body.Key)
	if err != nil {
		s.bad = append(s.bad, "key "+body.Key)
	}
	if s.keys[string(key)] {
		s.dupKey = true
	}
	s.keys[string(key)] = true
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		if s.idem[k] {
			s.dupIdem = true
		}
		s.idem[k] = true
	}
	worker := r.Header.Get("X-Worker")
	s.sides[worker] = append(s.sides[worker], body.Side)
	// key is bench/<run>/<worker>/<seq>: refuse every fifth request.
	parts := strings.Split(string(key), "/")
	if seq, _ := strconv.Atoi(parts[len(parts)-1]); seq%5 == 4 {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":"no","code":"conflict"}`)
		return
	}
	fmt.Fprint(w, `{"header":{}}`)
}

func startKV(t *testing.T, delay time.Duration) (*kvServer, string) {
	s := &kvServer{delay: delay, keys: map[string]bool{}, idem: map[string]bool{}, sides: map[string][]string{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func kvConfig(t *testing.T, url string) HTTPConfig {
	body, err := ParseTemplate(`{"key":"{{b64:bench/{{run}}/{{worker}}/{{seq}}}}","value":"{{b64:v}}","side":"{{alt:buy|sell}}"}`)
	if err != nil {
		t.Fatal(err)
	}
	idem, _ := ParseHeader("idempotency-key: {{uuid}}")
	worker, _ := ParseHeader("x-worker: {{worker}}")
	return HTTPConfig{Label: "kv", URLs: []string{url + "/v3/kv/put"}, Body: body, HasBody: true,
		Headers: []Header{idem, worker}, Concurrency: 4, Duration: 600 * time.Millisecond}
}

// Every request is a fresh one (unique key and idempotency-key), a worker
// alternates, refusals are counted by code, and the latencies are the
// server's delay or more.
func TestRunHTTPSendsTheTemplatedRequestsAndMeasures(t *testing.T) {
	s, url := startKV(t, 5*time.Millisecond)
	cfg := kvConfig(t, url)
	cfg.Warmup = 200 * time.Millisecond
	res, err := RunHTTP(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 || s.dupKey || s.dupIdem {
		t.Fatalf("bad requests %v, duplicate key %v, duplicate idempotency-key %v", s.bad, s.dupKey, s.dupIdem)
	}
	q := res.Requests
	// 4 workers, 5 ms each: at most ~800 in 1 s; the warmup's are not counted.
	if q.Count < 100 || int(q.Count) >= s.requests || q.Count != q.OK+q.Errors["conflict"] || len(q.Errors) != 1 {
		t.Fatalf("result %+v, server saw %d", q, s.requests)
	}
	if share := float64(q.Errors["conflict"]) / float64(q.Count); share < 0.15 || share > 0.25 {
		t.Errorf("%.2f of the requests refused, want about one in five", share)
	}
	if q.P50Ms < 5 || !(q.P50Ms <= q.P90Ms && q.P90Ms <= q.P99Ms && q.P99Ms <= q.MaxMs) {
		t.Errorf("latencies %+v with a 5 ms server", q)
	}
	if want := float64(q.OK) / (float64(res.DurationMs) / 1000); q.OKPerSec < want*0.95 || q.OKPerSec > want*1.05 {
		t.Errorf("ok/s %.1f, want about %.1f", q.OKPerSec, want)
	}
	if res.DurationMs < 600 || res.DurationMs > 900 || res.Workers != 4 || res.Interrupted {
		t.Errorf("result header %+v", res)
	}
	if len(s.sides) != 4 {
		t.Fatalf("workers seen: %v", len(s.sides))
	}
	for w, sides := range s.sides {
		for i, side := range sides {
			if want := []string{"buy", "sell"}[i%2]; side != want {
				t.Fatalf("worker %s request %d: %s, want %s", w, i, side, want)
			}
		}
	}
}

// ok/s is the target's pace: 2 workers on a 200 ms server make 10
// answers a second. The requests counted are those sent in the window,
// so the rate is over the window they were sent in. Over the end of the
// warmup to the last answer it was 10 requests over 1.1 s: the start
// counted the warmup's last requests' time, not the requests, and the
// end the last requests' time after the deadline (a rate low by about a
// latency over the duration).
func TestRunHTTPRateIsTheTargetsPace(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
	}))
	defer srv.Close()
	res, err := RunHTTP(context.Background(), HTTPConfig{URLs: []string{srv.URL}, Concurrency: 2,
		Warmup: 300 * time.Millisecond, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q := res.Requests
	if q.OK < 8 || q.OK > 10 || q.OKPerSec < 0.95*float64(q.OK) || q.OKPerSec > 1.05*float64(q.OK) || res.DurationMs != 1000 {
		t.Fatalf("%d ok at %.2f/s over %d ms; want 8-10 ok over the 1,000 ms they were sent in", q.OK, q.OKPerSec, res.DurationMs)
	}
	// Without a warmup every worker sends its first request at the start,
	// so the 4 each sent in the second (at 0, 0.3, 0.6, 0.9 s) take 1.2 s:
	// 2 workers on a 300 ms server make 6.7 answers a second, not 8.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
	}))
	defer slow.Close()
	res, err = RunHTTP(context.Background(), HTTPConfig{URLs: []string{slow.URL}, Concurrency: 2, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Requests; q.OK != 8 || q.OKPerSec < 6.3 || q.OKPerSec > 7 {
		t.Fatalf("no warmup: %d ok at %.2f/s over %d ms; want 8 at about 6.7/s", q.OK, q.OKPerSec, res.DurationMs)
	}
}

// A 429 is counted and its Retry-After honoured: about one request a
// second per worker instead of hundreds.
func TestRunHTTPHonoursRetryAfter(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":"slow down","code":"rate_limited"}`)
	}))
	defer srv.Close()
	res, err := RunHTTP(context.Background(), HTTPConfig{URLs: []string{srv.URL}, Concurrency: 2, Duration: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n < 2 || n > 6 || res.Requests.Errors["rate_limited"] != int64(n) || res.Requests.OK != 0 {
		t.Fatalf("%d requests in 1.5 s by 2 workers told to wait 1 s; result %+v", n, res.Requests)
	}
	if res.Config.Method != http.MethodGet {
		t.Fatalf("no body: method %s, want GET", res.Config.Method)
	}
}

// With --perpd-signup every worker gets its own funded account and sends
// its key; a prod target is refused before any signup.
func TestRunHTTPSignsUpOneAccountPerWorker(t *testing.T) {
	keys := map[string]int{}
	var mu sync.Mutex
	n := 0
	f := &fakeVenue{tier: TierBench, deployment: "testnet", orders: func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.Header.Get(keyHeader)]++
		mu.Unlock()
		w.WriteHeader(201)
		fmt.Fprint(w, `{"orderId":"o","status":"filled"}`)
	}}
	url := startFake(t, f)
	// The fake answers every signup with key "k"; count the signups instead.
	body, _ := ParseTemplate(`{"marketId":"BTC-PERP","side":"{{alt:buy|sell}}"}`)
	key, _ := ParseHeader("x-api-key: {{key}}")
	idem, _ := ParseHeader("idempotency-key: {{uuid}}")
	cfg := HTTPConfig{URLs: []string{url + "/v1/orders"}, Body: body, HasBody: true, Headers: []Header{key, idem},
		Concurrency: 3, Duration: 300 * time.Millisecond, PerpdSignup: true, ReadyTimeout: 2 * time.Second, SetupTimeout: 5 * time.Second}
	res, err := RunHTTP(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s := f.count("POST /v1/signup"); s != 3 || f.count("POST /v1/faucet") != 3 {
		t.Fatalf("%d signups, %d faucet grants for 3 workers", s, f.count("POST /v1/faucet"))
	}
	mu.Lock()
	n = keys["k"]
	mu.Unlock()
	if n == 0 || len(keys) != 1 || res.Requests.OK == 0 || res.Tier != TierBench || res.Setup[OpSignup].OK != 3 {
		t.Fatalf("keys sent %v, result %+v", keys, res)
	}
	if f.reused.Load() {
		t.Fatal("an idempotency-key was sent twice")
	}

	prod := &fakeVenue{tier: TierProd, deployment: TierProd}
	purl := startFake(t, prod)
	cfg.URLs = []string{purl + "/v1/orders"}
	if _, err := RunHTTP(context.Background(), cfg); !errors.Is(err, ErrProd) || prod.count("POST /v1/signup") != 0 {
		t.Fatalf("prod: %v, %d signups", err, prod.count("POST /v1/signup"))
	}
	testnet := &fakeVenue{tier: "testnet", deployment: "testnet"}
	turl := startFake(t, testnet)
	cfg.URLs = []string{turl + "/v1/orders"}
	if _, err := RunHTTP(context.Background(), cfg); !errors.Is(err, ErrNotBench) || testnet.count("POST /v1/signup") != 1 {
		t.Fatalf("testnet: %v, %d signups", err, testnet.count("POST /v1/signup"))
	}
}

func TestRunHTTPRefusesBadConfigs(t *testing.T) {
	keyHdr, _ := ParseHeader("x-api-key: {{key}}")
	keyBody, _ := ParseTemplate(`{"k":"{{key}}"}`)
	// A live server that counts: a refused config must not call it. (The
	// refusal is also far quicker than the 1 s run a config let through
	// would take, but a loaded machine may stall it for more than a few
	// ms, so the bound is half that run.)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	ok := HTTPConfig{URLs: []string{srv.URL + "/x"}, Concurrency: 1, Duration: time.Second}
	for name, tc := range map[string]struct {
		mut  func(c *HTTPConfig)
		want string
	}{
		"no url":           {func(c *HTTPConfig) { c.URLs = nil }, "no URL"},
		"relative url":     {func(c *HTTPConfig) { c.URLs = []string{"/v1/orders"} }, "absolute"},
		"ftp url":          {func(c *HTTPConfig) { c.URLs = []string{"ftp://h/x"} }, "absolute"},
		"method":           {func(c *HTTPConfig) { c.Method = "BREW" }, "method"},
		"no workers":       {func(c *HTTPConfig) { c.Concurrency = 0 }, "concurrency"},
		"too many workers": {func(c *HTTPConfig) { c.Concurrency = MaxTraders + 1 }, "concurrency"},
		"no duration":      {func(c *HTTPConfig) { c.Duration = 0 }, "duration"},
		"negative warmup":  {func(c *HTTPConfig) { c.Warmup = -time.Second }, "warmup"},
		"key in a header":  {func(c *HTTPConfig) { c.Headers = []Header{keyHdr} }, "--perpd-signup"},
		"key in the body":  {func(c *HTTPConfig) { c.Body, c.HasBody = keyBody, true }, "--perpd-signup"},
		"too many headers": {func(c *HTTPConfig) { c.Headers = make([]Header, MaxHeaders+1) }, "headers"},
	} {
		c := ok
		tc.mut(&c)
		began := time.Now()
		res, err := RunHTTP(context.Background(), c)
		if err == nil || res != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v %v, want an error naming %q", name, res, err, tc.want)
		}
		if took := time.Since(began); took > ok.Duration/2 {
			t.Errorf("%s: took %v: it ran", name, took)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d requests sent by refused configs", n)
	}
}

// A request the server drops without answering is recorded once as a
// transport failure: the client never resends it behind the tool's back
// (a POST sent twice would be two orders; a GET counted once would hide
// the server's failures).
func TestRunHTTPNeverResendsADroppedRequest(t *testing.T) {
	for _, withBody := range []bool{false, true} {
		t.Run(fmt.Sprint("body=", withBody), func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n++
				mu.Unlock()
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			}))
			defer srv.Close()
			cfg := HTTPConfig{URLs: []string{srv.URL}, Concurrency: 2, Duration: 1200 * time.Millisecond}
			if withBody {
				cfg.Body, _ = ParseTemplate(`{"n":"{{seq}}"}`)
				cfg.HasBody = true
			}
			res, err := RunHTTP(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := res.Requests.Errors[CodeTransport]; n == 0 || got != int64(n) || res.Requests.OK != 0 {
				t.Fatalf("the server saw %d requests; the result recorded %d transport failures (%+v)", n, got, res.Requests)
			}
		})
	}
}
