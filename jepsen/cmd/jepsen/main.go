package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/perpd/perpd/jepsen/harness"
	"github.com/perpd/perpd/jepsen/iptables"
)

func main() { os.Exit(run()) }

func run() int {
	var o harness.Options
	var cleanup bool
	flag.DurationVar(&o.Duration, "time", envDuration("TIME", 5*time.Minute), "how long clients run under faults (env TIME)")
	flag.StringVar(&o.Nemesis, "nemesis", envString("NEMESIS", "all"), "faults: all, none or a list of kill,pause,partition,membership,transfer,clock (env NEMESIS)")
	flag.IntVar(&o.Nodes, "nodes", envInt("NODES", 5), "cluster size, 3 to 5 (env NODES)")
	flag.IntVar(&o.Workers, "workers", 0, "concurrent client processes (default 4 per node)")
	flag.Float64Var(&o.Rate, "rate", 0, "target client operations per second (default 60)")
	flag.IntVar(&o.Accounts, "accounts", 0, "accounts whose balance is checked as a register (default 12)")
	flag.IntVar(&o.Traders, "traders", 0, "funded accounts that place and cancel orders (default 8 for each started 20 minutes of -time and 60 ops/s of -rate, so none reaches a node's history bounds; -1: none)")
	flag.IntVar(&o.Withdrawers, "withdrawers", 0, "funded accounts that withdraw to the simulated rail (default 4; -1: none)")
	flag.IntVar(&o.LightningPercent, "lightning-percent", 0, "percent of withdrawals sent to a Lightning invoice, which the simulated rail returns (default 33; -1: none)")
	flag.Int64Var(&o.Seed, "seed", 0, "random seed (default: time)")
	flag.StringVar(&o.ReportRoot, "report-dir", "", "parent of the report folders (default jepsen/reports)")
	flag.StringVar(&o.Bin, "bin", "", "prebuilt perpd binary (default: go build)")
	flag.StringVar(&o.BuildTags, "tags", "", "build tags for perpd (jepsen_bug plants the node bug)")
	flag.BoolVar(&o.AllowNoPartition, "allow-no-partition", os.Getenv("JEPSEN_ALLOW_NO_PARTITION") == "1",
		"go on without the partition nemesis when iptables is unusable (env JEPSEN_ALLOW_NO_PARTITION=1)")
	flag.DurationVar(&o.LivenessBound, "liveness-bound", 0, "how soon after a heal writes must succeed (default 30s)")
	flag.StringVar(&o.Bug, "bug", "", "plant a client bug (harness built with -tags jepsen_bug only)")
	flag.BoolVar(&o.KeepData, "keep-data", false, "keep the nodes' data directories")
	flag.BoolVar(&o.NoFundingBoundary, "no-funding-boundary", false, "run the nodes on the calendar clock (default: shift every node's clock so an hourly funding boundary falls halfway through the faults)")
	flag.IntVar(&o.IPBase, "ip-base", 0, "nodes at 127.0.0.(ip-base+i): 10 (default) to 90 in tens, so runs on different bases go at once")
	flag.BoolVar(&cleanup, "cleanup", false, "only delete firewall chains a killed run left behind, then exit")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if cleanup {
		iptables.Cleanup(ctx)
		fmt.Println("jepsen: firewall chains removed")
		return 0
	}
	sum, err := harness.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: run failed: %v\n", err)
		if sum != nil {
			fmt.Println(sum.Line())
		}
		return 2
	}
	fmt.Println(sum.Line())
	if sum.Failed() {
		return 1
	}
	return 0
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
