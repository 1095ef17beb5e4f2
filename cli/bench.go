package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cli/loadgen"
)

type benchFlags struct {
	nodes, mix, out                      string
	traders                              int
	duration, readyTimeout, setupTimeout time.Duration
	requestTimeout                       time.Duration
	seed                                 uint64
	allowAnyTier                         bool
}

func benchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a running cluster with simulated traders and report throughput, latency and errors per operation",
		Long: `bench signs up --traders accounts (spread over --nodes), takes one faucet grant each,
then runs a weighted mix of market orders, limit orders, cancels and reads for --duration,
one goroutine per trader. It prints a table (count, ok/s, p50/p90/p99/max latency of the
full HTTP round trip, errors by code) and writes the same as JSON to --out.

It refuses a prod deployment, and by default any target whose tier is not bench: start
one with 'perpd devnet --deployment bench' or 'perpd serve --deployment bench'. A 429 is
counted and its Retry-After honoured by the trader that got it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBench(ctx, cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", "127.0.0.1:8080", "comma-separated nodes: host:port or http(s) base URLs; traders are spread over them")
	fl.IntVar(&f.traders, "traders", 8, "simulated traders, one account and one goroutine each")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "how long the mix runs after setup")
	fl.StringVar(&f.mix, "mix", loadgen.DefaultMix, "relative weights of the operations market, limit, cancel and read")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the traders' choices (operation, market, side, size, price); keys are always random")
	fl.StringVar(&f.out, "out", "bench-result.json", "where to write the JSON result (empty: nowhere)")
	fl.BoolVar(&f.allowAnyTier, "allow-any-tier", false, "run against a tier other than bench (never prod), within its rate budgets")
	fl.DurationVar(&f.readyTimeout, "ready-timeout", loadgen.DefaultReadyTimeout, "how long to wait for every node's /healthz to be ok")
	fl.DurationVar(&f.setupTimeout, "setup-timeout", loadgen.DefaultSetupTimeout, "bound on the signup and faucet phase, 429 waits included")
	fl.DurationVar(&f.requestTimeout, "request-timeout", loadgen.DefaultRequestTimeout, "bound on one HTTP round trip")
	// The generic HTTP load (the etcd comparison) and the WebSocket fan-out.
	cmd.AddCommand(benchHTTPCmd(), benchWSCmd())
	return cmd
}

func runBench(ctx context.Context, cmd *cobra.Command, f benchFlags) error {
	mix, err := loadgen.ParseMix(f.mix)
	if err != nil {
		return fmt.Errorf("--mix: %w", err)
	}
	nodes, err := loadgen.NormalizeNodes(splitList(f.nodes))
	if err != nil {
		return fmt.Errorf("--nodes: %w", err)
	}
	cfg := loadgen.Config{Nodes: nodes, Traders: f.traders, Duration: f.duration, Mix: mix, Seed: f.seed,
		AllowAnyTier: f.allowAnyTier, ReadyTimeout: f.readyTimeout, SetupTimeout: f.setupTimeout,
		RequestTimeout: f.requestTimeout, Progress: cmd.ErrOrStderr()}
	res, runErr := loadgen.Run(ctx, cfg)
	if res == nil {
		return runErr
	}
	if err := res.WriteTable(cmd.OutOrStdout()); err != nil {
		return err
	}
	if f.out != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.out, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return runErr
}
