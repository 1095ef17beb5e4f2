package harness

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/perpd/perpd/jepsen/db"
)

// Options configure a run. Zero values take the defaults noted.
type Options struct {
	Nodes    int           // 3 or 5 (default 5)
	Duration time.Duration // how long clients run under faults (default 5m)
	Nemesis  string        // "all", "none" or e.g. "kill,partition" (default all)
	Workers  int           // concurrent client processes (default 4 per node)
	Rate     float64       // target client operations per second (default 60)
	Accounts int           // accounts whose balance is a register (default 12)
	// Traders are funded accounts that trade (default DefaultTraders of
	// Duration and Rate; -1: none).
	Traders int
	// Withdrawers are funded accounts that withdraw (default 4; -1: none).
	Withdrawers int
	// LightningPercent is the share of withdrawals sent to a Lightning
	// invoice instead of a Spark address (default 33; -1: none).
	LightningPercent int
	Seed             int64 // default: time-based

	// ReportRoot is where <timestamp>/ report folders go (default
	// jepsen/reports under ModuleDir).
	ReportRoot string
	// ModuleDir is the perpd module root to build (default: found from
	// the working directory).
	ModuleDir string
	// Bin is a prebuilt perpd; empty builds one.
	Bin string
	// BuildTags are passed to go build (jepsen_bug plants the node bug).
	BuildTags string
	// AllowNoPartition lets a run without usable iptables go on without
	// the partition nemesis (loudly). Without it such a run fails.
	AllowNoPartition bool
	// LivenessBound is how soon after a heal the cluster must take writes
	// again (default 30s).
	LivenessBound time.Duration
	// PorcupineTimeout bounds the linearizability search per account
	// (default 60s).
	PorcupineTimeout time.Duration
	// Bug plants a client-side bug (builds with -tags jepsen_bug only).
	Bug string
	// KeepData keeps the nodes' data directories after the run.
	KeepData bool
	// NoFundingBoundary runs the nodes on the calendar clock. By default
	// every node's clock is shifted (`serve --clock-offset`) so that an
	// hourly funding boundary falls halfway through the faults.
	NoFundingBoundary bool
	// IPBase puts node i at 127.0.0.(IPBase+i): a multiple of 10 up to 90
	// (default 10). Runs on different bases go at once (iptables.LockRun).
	IPBase int
	// Log receives progress (default stderr).
	Log io.Writer
}

// TradersPerSlice traders share the trading load of each TraderSlice of
// a run by default. At the default rate a trader places about 40 orders
// and takes about 25 fills a minute, so in a slice none reaches a node's
// per-account retention (checker.ClosedOrdersKept, checker.FillsKept),
// past which the trading checker can judge a trader only in part or not
// at all; a longer run spreads the same load over more traders instead.
const (
	TradersPerSlice = 8
	TraderSlice     = 20 * time.Minute
	// DefaultRate is the client operations a second of a run that names
	// none.
	DefaultRate = 60
)

// DefaultTraders is the number of traders a run of duration d at rate
// operations a second gets when none is asked for: TradersPerSlice for
// each started TraderSlice, times each started DefaultRate of the rate.
func DefaultTraders(d time.Duration, rate float64) int {
	slices := int((d + TraderSlice - 1) / TraderSlice)
	rates := int(math.Ceil(rate / DefaultRate))
	return TradersPerSlice * max(slices, 1) * max(rates, 1)
}

func (o *Options) setDefaults() error {
	if o.Nodes == 0 {
		o.Nodes = 5
	}
	if o.Nodes < 3 || o.Nodes > 5 {
		return fmt.Errorf("nodes must be 3, 4 or 5, not %d", o.Nodes)
	}
	if o.IPBase == 0 {
		o.IPBase = db.DefaultIPBase
	}
	if err := db.CheckIPBase(o.IPBase); err != nil {
		return err
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Minute
	}
	if o.Nemesis == "" {
		o.Nemesis = "all"
	}
	if o.Workers == 0 {
		o.Workers = 4 * o.Nodes
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Accounts == 0 {
		o.Accounts = 12
	}
	if o.Traders == 0 {
		o.Traders = DefaultTraders(o.Duration, o.Rate)
	}
	if o.Withdrawers == 0 {
		o.Withdrawers = 4
	}
	if o.LightningPercent == 0 {
		o.LightningPercent = 33
	}
	if o.LightningPercent > 100 {
		return fmt.Errorf("lightning-percent must be at most 100, not %d", o.LightningPercent)
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	if o.LivenessBound == 0 {
		o.LivenessBound = 30 * time.Second
	}
	if o.PorcupineTimeout == 0 {
		o.PorcupineTimeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	return nil
}
