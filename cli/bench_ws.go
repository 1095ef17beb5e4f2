package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/perpd/perpd/cli/loadgen"
)

type benchWSFlags struct {
	nodes, feeds, markets, orderMarket, out    string
	clients, accountClients, traders           int
	orderEvery, warmup, duration               time.Duration
	readyTimeout, setupTimeout, connectTimeout time.Duration
	allowAnyTier                               bool
}

func benchWSCmd() *cobra.Command {
	var f benchWSFlags
	cmd := &cobra.Command{
		Use:   "ws",
		Short: "Open many WebSocket clients and report the fan-out rate and how late events arrive",
		Long: `bench ws signs up --traders funded accounts, opens --clients WebSockets spread over --nodes,
each subscribed to the prices of --prices and the stats of --stats; the first
--account-clients also authenticate with a trader's key (client j with trader j mod
--traders) and subscribe to its account channel. The traders then place one-contract
market orders on --order-market, alternating buy and sell, one every --order-every each, so
account events flow.

After --warmup it counts, for --duration, every event frame the clients receive and how
late it is: the receive time minus the frame's tsMs, the log time the leader stamped on
the entry that produced it (raft commit, apply, the hub's fan-out and the socket; tsMs is
whole milliseconds, so figures are up to 1 ms high). Price frames are also measured from
the print's own oracle time (prices_oracle). It prints frames/s and p50/p90/p99/max per
channel and writes the same as JSON to --out.

Each client holds one socket: raise 'ulimit -n' above --clients plus a margin first. It
refuses a prod deployment, and a tier other than bench unless --allow-any-tier.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			nodes, err := loadgen.NormalizeNodes(splitList(f.nodes))
			if err != nil {
				return fmt.Errorf("--nodes: %w", err)
			}
			if f.readyTimeout <= 0 || f.setupTimeout <= 0 || f.connectTimeout <= 0 {
				return fmt.Errorf("--ready-timeout, --setup-timeout and --connect-timeout must be positive")
			}
			cfg := loadgen.WSConfig{Nodes: nodes, Clients: f.clients, AccountClients: f.accountClients, Traders: f.traders,
				Feeds: splitList(f.feeds), Markets: splitList(f.markets), OrderMarket: f.orderMarket, OrderEvery: f.orderEvery,
				Warmup: f.warmup, Duration: f.duration, AllowAnyTier: f.allowAnyTier, ReadyTimeout: f.readyTimeout,
				SetupTimeout: f.setupTimeout, SubscribeTimeout: f.connectTimeout, Progress: cmd.ErrOrStderr()}
			res, runErr := loadgen.RunWS(ctx, cfg)
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
	fl.StringVar(&f.nodes, "nodes", "127.0.0.1:8080", "comma-separated nodes: host:port or http(s) base URLs; clients and traders are spread over them")
	fl.IntVar(&f.clients, "clients", 1000, "WebSocket clients, one socket each")
	fl.IntVar(&f.accountClients, "account-clients", 250, "how many of the clients also subscribe to a trader's account")
	fl.IntVar(&f.traders, "traders", 8, "trading accounts whose orders make account events")
	fl.StringVar(&f.feeds, "prices", "BTCUSD", "comma-separated feeds every client subscribes to on the prices channel")
	fl.StringVar(&f.markets, "stats", "BTC-PERP", "comma-separated markets every client subscribes to on the stats channel")
	fl.StringVar(&f.orderMarket, "order-market", "BTC-PERP", "market of the traders' orders")
	fl.DurationVar(&f.orderEvery, "order-every", 200*time.Millisecond, "each trader's interval between orders (0: no orders)")
	fl.DurationVar(&f.warmup, "warmup", 5*time.Second, "how long the clients read before measuring starts")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "how long the fan-out is measured")
	fl.StringVar(&f.out, "out", "", "where to write the JSON result (empty: nowhere)")
	fl.BoolVar(&f.allowAnyTier, "allow-any-tier", false, "run against a tier other than bench (never prod)")
	fl.DurationVar(&f.readyTimeout, "ready-timeout", loadgen.DefaultReadyTimeout, "how long to wait for every node's /healthz")
	fl.DurationVar(&f.setupTimeout, "setup-timeout", loadgen.DefaultSetupTimeout, "bound on the traders' signup and faucet phase")
	fl.DurationVar(&f.connectTimeout, "connect-timeout", loadgen.DefaultSubscribeTimeout, "bound on connecting and subscribing every client")
	return cmd
}
