package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Bounds of a run's configuration.
const (
	MaxTraders  = 10_000
	MaxDuration = 24 * time.Hour
)

// Tiers as GET /v1/limits and GET /deployment name them.
const (
	TierBench = "bench"
	TierProd  = "prod"
)

// ErrProd is why a run against a production deployment does not start.
var ErrProd = errors.New("the target is a prod deployment: perpd bench never loads a production venue")

// ErrNotBench is why a run against another tier stops after its first
// trader: its budgets are the public ones, and a load run would spend
// them. --allow-any-tier runs anyway (every 429 is still honoured).
var ErrNotBench = errors.New("the target is not the bench profile (start it with `perpd serve --deployment bench` or " +
	"`perpd devnet --deployment bench`); pass --allow-any-tier to load it anyway within its rate budgets")

// Config is one run.
type Config struct {
	// Nodes are base URLs (NormalizeNodes); trader i calls Nodes[i%len].
	Nodes    []string
	Traders  int
	Duration time.Duration
	Mix      Mix
	// Seed drives the traders' choices (operation, market, side, size,
	// price); never the idempotency keys.
	Seed uint64
	// AllowAnyTier runs against a non-bench tier (never against prod).
	AllowAnyTier bool
	// ReadyTimeout bounds the wait for every node's /healthz to be ok.
	ReadyTimeout time.Duration
	// SetupTimeout bounds signups and faucet grants, 429 waits included.
	SetupTimeout time.Duration
	// RequestTimeout bounds one HTTP round trip.
	RequestTimeout time.Duration
	// Progress, when set, gets one line per phase.
	Progress io.Writer
}

// Defaults of the optional durations.
const (
	DefaultReadyTimeout   = 30 * time.Second
	DefaultSetupTimeout   = 60 * time.Second
	DefaultRequestTimeout = 10 * time.Second
)

func (c *Config) check() error {
	switch {
	case len(c.Nodes) == 0:
		return errors.New("no nodes")
	case c.Traders < 1 || c.Traders > MaxTraders:
		return fmt.Errorf("traders %d is outside 1..%d", c.Traders, MaxTraders)
	case c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("duration %v is outside (0, %v]", c.Duration, MaxDuration)
	case c.Mix.total() == 0:
		return errors.New("the mix weighs nothing")
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.SetupTimeout <= 0 {
		c.SetupTimeout = DefaultSetupTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return nil
}

// ResultConfig is the configuration part of a result.
type ResultConfig struct {
	Nodes      []string `json:"nodes"`
	Traders    int      `json:"traders"`
	DurationMs int64    `json:"durationMs"`
	Mix        Mix      `json:"mix"`
	Seed       uint64   `json:"seed"`
}

// Result is what a run measured; `perpd bench --out` writes it as JSON.
type Result struct {
	Config ResultConfig `json:"config"`
	// Tier is the target's tier as GET /v1/limits names it.
	Tier string `json:"tier"`
	// TradersRunning is how many traders finished setup and ran the mix.
	TradersRunning int `json:"tradersRunning"`
	// SetupMs is the signup and faucet phase; DurationMs the mix phase,
	// from its start until the last trader's last answer.
	SetupMs     int64               `json:"setupMs"`
	DurationMs  int64               `json:"durationMs"`
	Interrupted bool                `json:"interrupted"`
	Ops         map[string]OpResult `json:"ops"`
}

// Run waits for the cluster, refuses prod, sets the traders up and runs
// the mix for cfg.Duration. Ending ctx stops it early: the result then
// holds what was measured and Interrupted is set. An error means the run
// did not happen (no result) or stopped before the mix (a partial one).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	progress := progressTo(cfg.Progress)
	hc := pooledClient(cfg.Traders)
	defer hc.CloseIdleConnections()
	if err := preflight(ctx, hc, cfg.Nodes, cfg.ReadyTimeout); err != nil {
		return nil, err
	}
	rec := newRecorder(cfg.Seed)
	cl := &client{http: hc, rec: rec, timeout: cfg.RequestTimeout}
	res := &Result{Config: ResultConfig{Nodes: cfg.Nodes, Traders: cfg.Traders, DurationMs: cfg.Duration.Milliseconds(),
		Mix: cfg.Mix, Seed: cfg.Seed}}

	// Setup: the first trader alone, to learn the tier before anyone
	// else signs up, then every other trader at once.
	setupStart := time.Now()
	setupDeadline := setupStart.Add(cfg.SetupTimeout)
	traders := make([]*trader, cfg.Traders)
	for i := range traders {
		traders[i] = newTrader(i, cfg.Nodes[i%len(cfg.Nodes)], cfg.Seed, cl, cfg.Mix)
	}
	ready := make([]bool, len(traders))
	if ready[0] = traders[0].setup(ctx, setupDeadline); !ready[0] {
		res.summarize(rec, time.Since(setupStart), 0)
		if res.Interrupted = ctx.Err() != nil; res.Interrupted {
			return res, nil
		}
		return res, fmt.Errorf("the first trader could not sign up and take a faucet grant on %s (see the errors)", traders[0].base)
	}
	lim, ok := traders[0].limits(ctx, setupDeadline)
	if !ok {
		res.summarize(rec, time.Since(setupStart), 0)
		return res, fmt.Errorf("GET /v1/limits failed on %s", traders[0].base)
	}
	res.Tier = lim.Tier
	progress("tier %s: %s", lim.Tier, lim)
	if lim.Tier == TierProd {
		return nil, ErrProd
	}
	if lim.Tier != TierBench && !cfg.AllowAnyTier {
		res.summarize(rec, time.Since(setupStart), 0)
		return res, ErrNotBench
	}
	var wg sync.WaitGroup
	for i := 1; i < len(traders); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready[i] = traders[i].setup(ctx, setupDeadline)
		}()
	}
	wg.Wait()
	setup := time.Since(setupStart)
	for _, r := range ready {
		if r {
			res.TradersRunning++
		}
	}
	progress("setup: %d of %d traders signed up and funded in %.1fs", res.TradersRunning, cfg.Traders, setup.Seconds())
	if ctx.Err() != nil {
		res.Interrupted = true
		res.summarize(rec, setup, 0)
		return res, nil
	}

	// The mix, one goroutine per trader.
	mixStart := time.Now()
	deadline := mixStart.Add(cfg.Duration)
	for i, t := range traders {
		if !ready[i] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.run(ctx, deadline)
		}()
	}
	wg.Wait()
	res.Interrupted = ctx.Err() != nil
	res.summarize(rec, setup, time.Since(mixStart))
	return res, nil
}

// setupOps ran in the setup phase; every other operation in the mix phase.
var setupOps = map[string]bool{OpSignup: true, OpFaucet: true, OpLimits: true}

func (r *Result) summarize(rec *recorder, setup, mix time.Duration) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r.SetupMs, r.DurationMs = setup.Milliseconds(), mix.Milliseconds()
	r.Ops = map[string]OpResult{}
	for name, s := range rec.ops {
		window := mix
		if setupOps[name] {
			window = setup
		}
		r.Ops[name] = summarize(s, window)
	}
}

// preflight waits until every node reports healthy, then refuses a prod
// deployment (GET /deployment on every node).
func preflight(ctx context.Context, hc *http.Client, nodes []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, base := range nodes {
		for {
			why := healthy(ctx, hc, base)
			if why == "" {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s is not ready after %v: %s", base, timeout, why)
			}
			wait(ctx, 200*time.Millisecond, deadline)
		}
		var d struct {
			Deployment string `json:"deployment"`
		}
		if err := getJSON(ctx, hc, base+"/deployment", &d); err != nil {
			return fmt.Errorf("%s: GET /deployment: %w", base, err)
		}
		if d.Deployment == TierProd {
			return fmt.Errorf("%s: %w", base, ErrProd)
		}
	}
	return nil
}

// healthy is "" when base's /healthz answers ok, else why not.
func healthy(ctx context.Context, hc *http.Client, base string) string {
	var h struct {
		OK     bool   `json:"ok"`
		Reason string `json:"reason"`
	}
	err := getJSON(ctx, hc, base+"/healthz", &h)
	switch {
	case err != nil && h.Reason != "":
		return h.Reason
	case err != nil:
		return err.Error()
	case !h.OK:
		return "not ok"
	}
	return ""
}

// getJSON decodes the body of GET u into out (also on a non-2xx answer,
// which it reports as an error).
func getJSON(ctx context.Context, hc *http.Client, u string, out any) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	derr := json.NewDecoder(io.LimitReader(res.Body, maxAnswerBytes)).Decode(out)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return derr
}

// progressTo writes a progress line to w, or nothing when w is nil.
func progressTo(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}

// pooledClient is an HTTP client that keeps up to conns idle connections
// per node (and twice that in all), so a run's workers reuse connections
// instead of dialling each request.
func pooledClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 2 * conns
	tr.MaxIdleConnsPerHost = conns
	return &http.Client{Transport: tr}
}
