package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// OpRequest is what `perpd bench http` records its measured requests under.
const OpRequest = "request"

// MaxHeaders bounds the --header templates of one run.
const MaxHeaders = 32

// Header is one request header whose value is a template.
type Header struct {
	Name  string
	Value Template
}

// ParseHeader reads "Name: template".
func ParseHeader(s string) (Header, error) {
	name, val, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n{}") {
		return Header{}, fmt.Errorf("header %q is not `Name: value`", s)
	}
	t, err := ParseTemplate(strings.TrimSpace(val))
	if err != nil {
		return Header{}, fmt.Errorf("header %s: %w", name, err)
	}
	return Header{Name: http.CanonicalHeaderKey(name), Value: t}, nil
}

// HTTPConfig is one run of the generic HTTP load: Concurrency workers in
// closed loops (a worker sends its next request when the last is
// answered), the same requests whatever the target.
type HTTPConfig struct {
	// Label names the target in the result ("etcd", "perpd").
	Label string
	// URLs are absolute http(s) URLs; worker i sends to URLs[i%len].
	URLs        []string
	Method      string
	Body        Template
	HasBody     bool
	Headers     []Header
	Concurrency int
	// Warmup runs the load unmeasured before the Duration that counts.
	Warmup   time.Duration
	Duration time.Duration
	// PerpdSignup signs up one perpd account per worker (with one faucet
	// grant) on its URL's origin before the load; {{key}} is its API key.
	// It refuses prod, and any tier but bench unless AllowAnyTier.
	PerpdSignup  bool
	AllowAnyTier bool
	// ReadyTimeout, SetupTimeout: as Config's (PerpdSignup only).
	ReadyTimeout   time.Duration
	SetupTimeout   time.Duration
	RequestTimeout time.Duration
	Progress       io.Writer
}

func (c *HTTPConfig) check() error {
	if len(c.URLs) == 0 {
		return errors.New("no URL")
	}
	for _, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Fragment != "" {
			return fmt.Errorf("%q is not an absolute http(s) URL", u)
		}
	}
	if c.Method == "" {
		c.Method = http.MethodGet
		if c.HasBody {
			c.Method = http.MethodPost
		}
	}
	switch c.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead:
	default:
		return fmt.Errorf("method %q is not GET, POST, PUT, PATCH, DELETE or HEAD", c.Method)
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > MaxTraders:
		return fmt.Errorf("concurrency %d is outside 1..%d", c.Concurrency, MaxTraders)
	case c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("duration %v is outside (0, %v]", c.Duration, MaxDuration)
	case c.Warmup < 0 || c.Warmup > MaxDuration:
		return fmt.Errorf("warmup %v is outside [0, %v]", c.Warmup, MaxDuration)
	case len(c.Headers) > MaxHeaders:
		return fmt.Errorf("%d headers, more than %d", len(c.Headers), MaxHeaders)
	}
	usesKey := c.Body.Uses(PhKey)
	for _, h := range c.Headers {
		usesKey = usesKey || h.Value.Uses(PhKey)
	}
	if usesKey && !c.PerpdSignup {
		return errors.New("{{key}} is used but there is no key: pass --perpd-signup to sign up one account per worker")
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.SetupTimeout <= 0 {
		c.SetupTimeout = DefaultSetupTimeout
	}
	return nil
}

// HTTPResultConfig is the configuration part of an HTTPResult.
type HTTPResultConfig struct {
	URLs        []string `json:"urls"`
	Method      string   `json:"method"`
	Concurrency int      `json:"concurrency"`
	WarmupMs    int64    `json:"warmupMs"`
	DurationMs  int64    `json:"durationMs"`
	PerpdSignup bool     `json:"perpdSignup"`
}

// HTTPResult is what `perpd bench http` measured.
type HTTPResult struct {
	Label  string           `json:"label"`
	Config HTTPResultConfig `json:"config"`
	// Tier is the perpd target's tier (PerpdSignup only).
	Tier    string `json:"tier,omitempty"`
	Workers int    `json:"workers"`
	SetupMs int64  `json:"setupMs"`
	// DurationMs is the measured window: from the end of the warmup to
	// the deadline (or the interruption); without a warmup, from the
	// start to the last worker's last answer.
	DurationMs  int64 `json:"durationMs"`
	Interrupted bool  `json:"interrupted"`
	// Requests are the requests sent in the measured window.
	Requests OpResult `json:"requests"`
	// Setup are the signup and faucet calls (PerpdSignup only).
	Setup map[string]OpResult `json:"setup,omitempty"`
}

// RunHTTP runs cfg: the setup when asked, then the load. An error means
// the run did not happen or stopped before the load; ending ctx stops the
// load early (Interrupted is then set).
func RunHTTP(ctx context.Context, cfg HTTPConfig) (*HTTPResult, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	progress := progressTo(cfg.Progress)
	hc := pooledClient(cfg.Concurrency)
	defer hc.CloseIdleConnections()
	res := &HTTPResult{Label: cfg.Label, Config: HTTPResultConfig{URLs: cfg.URLs, Method: cfg.Method, Concurrency: cfg.Concurrency,
		WarmupMs: cfg.Warmup.Milliseconds(), DurationMs: cfg.Duration.Milliseconds(), PerpdSignup: cfg.PerpdSignup}}
	keys := make([]string, cfg.Concurrency)
	if cfg.PerpdSignup {
		setupStart := time.Now()
		var err error
		keys, err = signUpWorkers(ctx, hc, &cfg, res)
		res.SetupMs = time.Since(setupStart).Milliseconds()
		if err != nil {
			return res, err
		}
		progress("setup: %d accounts signed up and funded in %.1fs (tier %s)", len(keys), float64(res.SetupMs)/1000, res.Tier)
		if ctx.Err() != nil {
			res.Interrupted = true
			return res, nil
		}
	}
	res.Workers = cfg.Concurrency
	rec := newRecorder(1)
	run := newRunID()
	began := time.Now()
	measureFrom := began.Add(cfg.Warmup)
	deadline := measureFrom.Add(cfg.Duration)
	progress("%s: %d workers, %s %s, warmup %v, measuring %v", cfg.Label, cfg.Concurrency, cfg.Method, cfg.URLs[0], cfg.Warmup, cfg.Duration)
	var lastAnswer atomic.Int64 // unix ns of the last measured answer
	var wg sync.WaitGroup
	fc := loadClient(cfg.Concurrency, cfg.RequestTimeout)
	defer fc.CloseIdleConnections()
	for i := 0; i < cfg.Concurrency; i++ {
		w := &httpWorker{cfg: &cfg, hc: hc, fc: fc, rec: rec, url: cfg.URLs[i%len(cfg.URLs)],
			vars: Vars{Worker: i, Run: run, Key: keys[i]}, measureFrom: measureFrom, lastAnswer: &lastAnswer}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx, deadline)
		}()
	}
	wg.Wait()
	res.Interrupted = ctx.Err() != nil
	// The rate is over the time the counted requests (those sent in the
	// window) took. After a warmup the workers are mid-request when the
	// window opens, in a steady state: that is the window itself. Up to
	// the last answer it also held the warmup's last requests' time,
	// uncounted, and the last requests' time past the deadline, so the
	// rate ran low by about a latency over the duration. Without a
	// warmup every worker sends its first request at the start, and its
	// requests fill the time to its last answer.
	end := time.Now()
	if end.After(deadline) {
		end = deadline
	}
	if cfg.Warmup == 0 {
		end = measureFrom
		if last := lastAnswer.Load(); last > 0 {
			end = time.Unix(0, last)
		}
	}
	window := max(end.Sub(measureFrom), 0)
	res.DurationMs = window.Milliseconds()
	if s := rec.ops[OpRequest]; s != nil {
		res.Requests = summarize(s, window)
	} else {
		res.Requests = OpResult{Errors: map[string]int64{}}
	}
	return res, nil
}

// httpWorker is one closed loop of requests.
type httpWorker struct {
	cfg         *HTTPConfig
	hc          *http.Client
	rec         *recorder
	url         string
	vars        Vars
	measureFrom time.Time
	lastAnswer  *atomic.Int64
	body        []byte
	// fc sends the measured requests; req and resp are reused.
	fc   *fasthttp.Client
	req  fasthttp.Request
	resp fasthttp.Response
}

func (w *httpWorker) loop(ctx context.Context, deadline time.Time) {
	for ctx.Err() == nil && time.Now().Before(deadline) {
		o := w.send(ctx)
		w.vars.Seq++
		// A refusal is an answer like any other; only what may pass later
		// (a 429 after its Retry-After, no answer, a 5xx) waits.
		if retryable(o.code) {
			pause(ctx, o, deadline)
		}
	}
}

// loadClient is the client of the measured requests: fasthttp, whose
// worker sends and reads on its own goroutine with reused buffers, where
// net/http's client hands every request to a writer and a reader
// goroutine per connection. On a small machine the tool shares the cores
// with the system it measures, and net/http cost it about twice the CPU
// per request. Requests are never retried: a failure is recorded as one.
// An answer over maxLoadAnswer bytes counts as a transport failure.
func loadClient(conns int, timeout time.Duration) *fasthttp.Client {
	return &fasthttp.Client{
		MaxConnsPerHost:           conns,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		ReadTimeout:               timeout,
		WriteTimeout:              timeout,
		MaxResponseBodySize:       maxLoadAnswer,
		NoDefaultUserAgentHeader:  true,
		TLSConfig:                 &tls.Config{MinVersion: tls.VersionTLS12},
	}
}

// maxLoadAnswer bounds one answer of the measured load.
const maxLoadAnswer = 16 << 20

// send sends one request and records it when it started inside the
// measured window.
func (w *httpWorker) send(ctx context.Context) outcome {
	req, resp := &w.req, &w.resp
	req.Reset()
	resp.Reset()
	req.SetRequestURI(w.url)
	req.Header.SetMethod(w.cfg.Method)
	req.Header.Set("User-Agent", "perpd-bench/1")
	if w.cfg.HasBody {
		w.body = w.cfg.Body.Append(w.body[:0], &w.vars)
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(w.body)
	}
	for _, h := range w.cfg.Headers {
		req.Header.Set(h.Name, h.Value.String(&w.vars))
	}
	began := time.Now()
	measured := !began.Before(w.measureFrom)
	err := w.fc.DoTimeout(req, resp, w.cfg.RequestTimeout)
	elapsed := time.Since(began)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{aborted: true}
		}
		if measured {
			w.answered(began.Add(elapsed))
			w.rec.fail(OpRequest, CodeTransport)
		}
		return outcome{code: CodeTransport}
	}
	status := resp.StatusCode()
	o := outcome{ok: status/100 == 2}
	if !o.ok {
		o.code = refusalCode(status, resp.Body())
		if status == http.StatusTooManyRequests {
			o.retryAfter = retryAfter(string(resp.Header.Peek("Retry-After")))
		}
	}
	if measured {
		w.answered(began.Add(elapsed))
		if o.ok {
			w.rec.ok(OpRequest, elapsed)
		} else {
			w.rec.fail(OpRequest, o.code)
		}
	}
	return o
}

func (w *httpWorker) answered(at time.Time) {
	ns := at.UnixNano()
	for {
		cur := w.lastAnswer.Load()
		if ns <= cur || w.lastAnswer.CompareAndSwap(cur, ns) {
			return
		}
	}
}

// signUpWorkers makes one funded perpd account per worker on the origin
// of its URL, as `perpd bench` sets up its traders: every node ready and
// none prod, the first account alone to learn the tier, then the rest at
// once. It returns the workers' API keys.
func signUpWorkers(ctx context.Context, hc *http.Client, cfg *HTTPConfig, res *HTTPResult) ([]string, error) {
	bases := make([]string, len(cfg.URLs))
	for i, u := range cfg.URLs {
		p, _ := url.Parse(u) // checked
		bases[i] = p.Scheme + "://" + p.Host
	}
	if err := preflight(ctx, hc, uniq(bases), cfg.ReadyTimeout); err != nil {
		return nil, err
	}
	rec := newRecorder(1)
	cl := &client{http: hc, rec: rec, timeout: cfg.RequestTimeout}
	deadline := time.Now().Add(cfg.SetupTimeout)
	traders := make([]*trader, cfg.Concurrency)
	for i := range traders {
		traders[i] = newTrader(i, bases[i%len(bases)], 1, cl, nil)
	}
	start := time.Now()
	defer func() { res.Setup = summarizeAll(rec, time.Since(start)) }()
	tier, err := setupAll(ctx, traders, deadline, cfg.AllowAnyTier, "worker")
	res.Tier = tier
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(traders))
	for i, t := range traders {
		keys[i] = t.key
	}
	return keys, nil
}

func summarizeAll(rec *recorder, window time.Duration) map[string]OpResult {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := map[string]OpResult{}
	for name, s := range rec.ops {
		out[name] = summarize(s, window)
	}
	return out
}

func uniq(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// WriteTable prints the result in one header line and one line of figures.
func (r *HTTPResult) WriteTable(w io.Writer) error {
	q := r.Requests
	_, err := fmt.Fprintf(w, "%s: %d workers, %s %s (%d URL(s)), measured %.1fs after %.1fs warmup%s\n"+
		"  requests %d, ok %d, ok/s %.1f, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms, errors %s\n",
		r.Label, r.Workers, r.Config.Method, r.Config.URLs[0], len(r.Config.URLs), float64(r.DurationMs)/1000,
		float64(r.Config.WarmupMs)/1000, map[bool]string{true: " (interrupted)"}[r.Interrupted],
		q.Count, q.OK, q.OKPerSec, q.P50Ms, q.P90Ms, q.P99Ms, q.MaxMs, errorList(q.Errors))
	if err != nil || len(r.Setup) == 0 {
		return err
	}
	names := make([]string, 0, len(r.Setup))
	for n := range r.Setup {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := r.Setup[n]
		if _, err := fmt.Fprintf(w, "  setup %s: %d of %d ok, errors %s\n", n, s.OK, s.Count, errorList(s.Errors)); err != nil {
			return err
		}
	}
	return nil
}

// setupAll signs the traders up and funds them: the first alone, to learn
// the target's tier (refusing prod, and any tier but bench unless
// allowAny), then the rest at once. It returns the tier; a trader that
// could not be set up is an error (unless ctx ended).
func setupAll(ctx context.Context, traders []*trader, deadline time.Time, allowAny bool, what string) (string, error) {
	if !traders[0].setup(ctx, deadline) {
		return "", fmt.Errorf("the first %s could not sign up and take a faucet grant on %s", what, traders[0].base)
	}
	lim, ok := traders[0].limits(ctx, deadline)
	if !ok {
		return "", fmt.Errorf("GET /v1/limits failed on %s", traders[0].base)
	}
	if lim.Tier == TierProd {
		return lim.Tier, ErrProd
	}
	if lim.Tier != TierBench && !allowAny {
		return lim.Tier, ErrNotBench
	}
	ready := make([]bool, len(traders))
	ready[0] = true
	var wg sync.WaitGroup
	for i := 1; i < len(traders); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready[i] = traders[i].setup(ctx, deadline)
		}()
	}
	wg.Wait()
	for i, r := range ready {
		if !r && ctx.Err() == nil {
			return lim.Tier, fmt.Errorf("%s %d could not sign up and take a faucet grant on %s", what, i, traders[i].base)
		}
	}
	return lim.Tier, nil
}
