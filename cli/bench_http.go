package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cli/loadgen"
)

type benchHTTPFlags struct {
	urls, method, body, label, out             string
	headers                                    []string
	concurrency                                int
	duration, warmup                           time.Duration
	readyTimeout, setupTimeout, requestTimeout time.Duration
	perpdSignup, allowAnyTier                  bool
}

func benchHTTPCmd() *cobra.Command {
	var f benchHTTPFlags
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Load any HTTP endpoint with N closed-loop workers and report requests/s and latency percentiles",
		Long: `bench http runs --concurrency workers, each sending its next request as soon as the last is
answered, for --warmup (not measured) and then --duration (measured). It prints requests/s of
2xx answers, p50/p90/p99/max of their full round trip and the other answers by code, and
writes the same as JSON to --out. The same code drives every target, so two runs with the
same flags compare the targets, not the tools.

--body and every --header value are templates: literal text with placeholders
  {{worker}}        the worker's index, from 0
  {{seq}}           the worker's request number, from 0
  {{run}}           8 random hex characters, fixed for the run
  {{uuid}}          a fresh random UUID at every request
  {{key}}           the worker's perpd API key (needs --perpd-signup)
  {{alt:a|b}}       option seq mod n: a worker alternates a, b, a, ...
  {{b64:text}}      the standard base64 of text, itself a template
Inside an argument the first "}}" closes it.

--perpd-signup first signs up one perpd account per worker (with one faucet grant) on the
origin of its URL, refusing a prod deployment, and a tier other than bench unless
--allow-any-tier.

Every answer is counted: 2xx as ok, the rest by the body's "code" (a string), else
http_<status>, or transport when none came. After a 429 the worker sleeps its Retry-After;
after a 5xx or no answer it pauses 100 ms; after any other refusal it goes on at once.

etcd (3.4 JSON gateway), unique keys:
  perpd bench http --label etcd --url http://127.0.0.1:2379/v3/kv/put \
    --body '{"key":"{{b64:bench/{{run}}/{{worker}}/{{seq}}}}","value":"{{b64:v{{seq}}}}"}'
perpd orders, one account per worker:
  perpd bench http --label perpd --url http://127.0.0.1:18080/v1/orders --perpd-signup \
    --header 'x-api-key: {{key}}' --header 'idempotency-key: {{uuid}}' \
    --body '{"marketId":"BTC-PERP","side":"{{alt:buy|sell}}","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := f.config()
			if err != nil {
				return err
			}
			cfg.Progress = cmd.ErrOrStderr()
			res, runErr := loadgen.RunHTTP(ctx, cfg)
			if res == nil {
				return runErr
			}
			if err := res.WriteTable(cmd.OutOrStdout()); err != nil {
				return err
			}
			if err := writeJSON(f.out, res); err != nil {
				return err
			}
			return runErr
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.urls, "url", "", "comma-separated absolute http(s) URLs; worker i sends to the (i mod n)-th")
	fl.StringVar(&f.method, "method", "", "HTTP method (default POST with --body, else GET)")
	fl.StringVar(&f.body, "body", "", "request body template (sent as application/json)")
	fl.StringArrayVar(&f.headers, "header", nil, "'Name: value template', repeatable")
	fl.IntVar(&f.concurrency, "concurrency", 64, "workers, each with one request in flight")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "how long the measured load runs")
	fl.DurationVar(&f.warmup, "warmup", 0, "how long the load runs before measuring starts")
	fl.StringVar(&f.label, "label", "", "name of the target in the output (default: the first URL's host)")
	fl.StringVar(&f.out, "out", "", "where to write the JSON result (empty: nowhere)")
	fl.BoolVar(&f.perpdSignup, "perpd-signup", false, "sign up and fund one perpd account per worker first; {{key}} is its API key")
	fl.BoolVar(&f.allowAnyTier, "allow-any-tier", false, "with --perpd-signup: run against a tier other than bench (never prod)")
	fl.DurationVar(&f.readyTimeout, "ready-timeout", loadgen.DefaultReadyTimeout, "with --perpd-signup: how long to wait for every node's /healthz")
	fl.DurationVar(&f.setupTimeout, "setup-timeout", loadgen.DefaultSetupTimeout, "with --perpd-signup: bound on the signup and faucet phase")
	fl.DurationVar(&f.requestTimeout, "request-timeout", loadgen.DefaultRequestTimeout, "bound on one HTTP round trip")
	return cmd
}

// config checks the flags and builds the run; nothing is called yet.
func (f benchHTTPFlags) config() (loadgen.HTTPConfig, error) {
	cfg := loadgen.HTTPConfig{Label: f.label, URLs: splitList(f.urls), Method: strings.ToUpper(strings.TrimSpace(f.method)),
		Concurrency: f.concurrency, Duration: f.duration, Warmup: f.warmup, PerpdSignup: f.perpdSignup,
		AllowAnyTier: f.allowAnyTier, ReadyTimeout: f.readyTimeout, SetupTimeout: f.setupTimeout, RequestTimeout: f.requestTimeout}
	if len(cfg.URLs) == 0 {
		return cfg, fmt.Errorf("--url is required")
	}
	if f.readyTimeout <= 0 || f.setupTimeout <= 0 || f.requestTimeout <= 0 {
		return cfg, fmt.Errorf("--ready-timeout, --setup-timeout and --request-timeout must be positive")
	}
	if f.body != "" {
		t, err := loadgen.ParseTemplate(f.body)
		if err != nil {
			return cfg, fmt.Errorf("--body: %w", err)
		}
		cfg.Body, cfg.HasBody = t, true
	}
	for _, h := range f.headers {
		p, err := loadgen.ParseHeader(h)
		if err != nil {
			return cfg, fmt.Errorf("--header: %w", err)
		}
		cfg.Headers = append(cfg.Headers, p)
	}
	if cfg.Label == "" {
		cfg.Label = hostOf(cfg.URLs[0])
	}
	return cfg, nil
}

// hostOf is the host:port of an http(s) URL, or the URL itself.
func hostOf(u string) string {
	s := u
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return u
	}
	return s
}

// writeJSON writes v, indented, to path (nothing when path is empty).
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}
