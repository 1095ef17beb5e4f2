package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/db"
	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/jepsen/iptables"
	"github.com/perpd/perpd/jepsen/nemesis"
	"github.com/perpd/perpd/jepsen/raftlog"
	"github.com/perpd/perpd/jepsen/report"
	"github.com/perpd/perpd/jepsen/workload"
)

// Phase bounds, so a run always ends by itself.
const (
	setupAccountsTimeout = 90 * time.Second
	rejoinTimeout        = 2 * time.Minute
	resolveTimeout       = 90 * time.Second
	settleTimeout        = 30 * time.Second
	finalReadAttempts    = 20
	maxDepositPages      = 1000
	depositPageSize      = 100
)

// Run performs one test and returns its summary. The error is for runs that
// could not be carried out (build failure, no cluster, unusable iptables);
// a run that completed with violations returns a summary that Failed().
func Run(ctx context.Context, opts Options) (sum *report.Summary, err error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	r := &run{opts: opts, rng: mrand.New(mrand.NewSource(opts.Seed))}
	defer func() {
		// Deferred cleanups below run before this; a panic is turned into an
		// error only after the processes and the firewall are gone.
		if p := recover(); p != nil {
			err = fmt.Errorf("harness panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return r.run(ctx)
}

type run struct {
	opts    Options
	rng     *mrand.Rand
	dir     string
	rec     *history.Recorder
	cluster *db.Cluster
	fw      *iptables.Firewall
	cl      *client.Client
	env     *workload.Env
	bin     string
	// archives is where the nodes record what they apply ("" when the
	// build cannot): jepsen/raftlog compares them after the run.
	archives string
	// settled are the traders the cleanup saw with nothing live, and
	// quietIndex an index from which none of them can change
	// (cancelResting); the final reads are made at or past it.
	settled    map[string]bool
	quietIndex uint64
	// paths are the scripted feeds' planned paths (prices.go), frozen
	// the markets' pinned prices for the final reads.
	paths  map[string]*pricePlan
	frozen map[string]int64
	// simRail is the shared payout book's directory ("" when the build
	// cannot share one); wdSettled the withdrawers seen with nothing open
	// (withdrawals.go).
	simRail   string
	wdSettled map[string]bool

	mu  sync.Mutex // guards sum.Problems, appended to from worker goroutines
	sum report.Summary
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Log, "jepsen %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (r *run) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.logf("PROBLEM: %s", msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Problems = append(r.sum.Problems, msg)
}

func (r *run) run(ctx context.Context) (*report.Summary, error) {
	o := r.opts
	names, err := nemesis.Parse(o.Nemesis)
	if err != nil {
		return nil, err
	}
	if err := checkBug(o.Bug); err != nil {
		return nil, err
	}
	unlock, err := iptables.LockRun(ctx, o.IPBase, contains(names, "partition"), r.logf)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if o.ModuleDir == "" {
		if o.ModuleDir, err = findModule(); err != nil {
			return nil, err
		}
	}
	if o.ReportRoot == "" {
		o.ReportRoot = filepath.Join(o.ModuleDir, "jepsen", "reports")
	}
	r.dir = filepath.Join(o.ReportRoot, time.Now().UTC().Format("20060102T150405.000Z"))
	if err := os.MkdirAll(filepath.Join(r.dir, "nodes"), 0o755); err != nil {
		return nil, err
	}
	r.sum.Dir, r.sum.Nodes, r.sum.Nemeses = r.dir, o.Nodes, names
	r.logf("report folder %s (seed %d)", r.dir, o.Seed)

	work, err := os.MkdirTemp("", "perpd-jepsen-")
	if err != nil {
		return nil, err
	}
	// Nodes may run under other uids: they must reach the binary and
	// their data directories.
	_ = os.Chmod(work, 0o755)
	if !o.KeepData {
		defer os.RemoveAll(work)
	}

	// Partitions need root and iptables; say so loudly, and only go on
	// without them when explicitly allowed.
	wantPartition := contains(names, "partition")
	if wantPartition {
		if err := iptables.Check(ctx); err != nil {
			if !o.AllowNoPartition {
				return nil, fmt.Errorf("the partition nemesis cannot run: %v (run as root with iptables installed, or opt out with -allow-no-partition / JEPSEN_ALLOW_NO_PARTITION=1)", err)
			}
			r.logf("WARNING: PARTITION NEMESIS DISABLED: %v", err)
			r.degraded("partition nemesis disabled: " + err.Error())
			names = without(names, "partition")
			r.sum.Nemeses = names
		}
	}

	if o.Bin != "" {
		r.bin, err = copyBin(o.Bin, work)
	} else {
		r.logf("building perpd (tags %q)", o.BuildTags)
		r.bin, err = buildPerpd(ctx, o.ModuleDir, work, o.BuildTags)
	}
	if err != nil {
		return nil, err
	}
	flags, err := serveFlags(ctx, r.bin)
	if err != nil {
		return nil, err
	}

	r.rec, err = history.NewRecorder(filepath.Join(r.dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer r.rec.Close()

	var tok [16]byte
	_, _ = rand.Read(tok[:])
	extra := []string{"--snapshot-threshold", "256", "--trailing-logs", "64"}
	if strings.Contains(flags, "--check-invariants") {
		extra = append(extra, "--check-invariants")
	}
	if strings.Contains(flags, "--por-beside-apply-from") {
		// The runs' states are small, which a node would build inside
		// apply: build every tree beside it, so faults meet that path.
		extra = append(extra, "--por-beside-apply-from", "1")
	}
	if strings.Contains(flags, "--faucet-grants-per-hour") {
		extra = append(extra, "--faucet-grants-per-hour", "1000000")
	} else {
		r.logf("WARNING: perpd has no --faucet-grants-per-hour; the faucet will refuse most grants")
	}
	clockFlag := strings.Contains(flags, "--clock-offset")
	var baseOffset time.Duration
	switch {
	case o.NoFundingBoundary:
	case clockFlag:
		baseOffset = fundingOffset(time.Now(), o.Duration)
		extra = append(extra, "--clock-offset", baseOffset.String())
		r.logf("clocks shifted %v: a funding boundary falls about %v into the faults", baseOffset, o.Duration/2)
	default:
		r.logf("WARNING: perpd has no --clock-offset; the run crosses no funding boundary unless the hour turns")
	}
	if contains(names, "clock") && !clockFlag {
		r.logf("WARNING: CLOCK NEMESIS DISABLED: perpd has no serve --clock-offset")
		r.degraded("clock nemesis disabled: perpd has no serve --clock-offset")
		names = without(names, "clock")
		r.sum.Nemeses = names
	}
	if strings.Contains(flags, "--apply-archive") {
		r.archives = filepath.Join(work, "archives")
	}
	extra = append(extra, r.simRailFlags(work, flags)...)
	ownUIDs := contains(names, "partition")
	r.cluster, err = db.New(db.Config{Bin: r.bin, Nodes: o.Nodes, DataDir: filepath.Join(work, "data"),
		LogDir: filepath.Join(r.dir, "nodes"), Token: hex.EncodeToString(tok[:]), OwnUIDs: ownUIDs, ExtraArgs: extra,
		ArchiveDir: r.archives, IPBase: o.IPBase, OnExit: r.nodeExited})
	if err != nil {
		return nil, err
	}
	if ownUIDs {
		var hosts []iptables.Host
		for _, n := range r.cluster.Nodes {
			hosts = append(hosts, iptables.Host{ID: n.ID, Addr: n.IP, UID: n.UID})
		}
		if r.fw, err = iptables.Setup(ctx, hosts); err != nil {
			return nil, err
		}
		defer r.fw.Close()
	}
	defer r.cluster.StopAll()

	r.logf("starting %d nodes", o.Nodes)
	if err := r.cluster.StartAll(ctx); err != nil {
		return nil, fmt.Errorf("start cluster: %w (logs in %s)", err, filepath.Join(r.dir, "nodes"))
	}
	r.cl = client.New(client.DefaultTimeout)
	defer r.cl.Close()
	var nodes []string
	for _, n := range r.cluster.Nodes {
		nodes = append(nodes, n.HTTP)
	}
	r.env = &workload.Env{Client: r.cl, Rec: r.rec, Nodes: nodes, Linearizable: true}
	if !r.cl.Probe(ctx, nodes[0], "POST", "/v1/signup") {
		return nil, fmt.Errorf("the build under test has no POST /v1/signup: the access layer is missing, nothing to test")
	}
	if err := r.setupAccounts(ctx); err != nil {
		return nil, err
	}
	if err := r.setupTraders(ctx); err != nil {
		return nil, err
	}
	if err := r.setupWithdrawers(ctx); err != nil {
		return nil, err
	}

	nemeses, err := nemesis.New(names, &nemesis.Env{DB: r.cluster, FW: r.fw, Bin: r.bin, Rand: mrand.New(mrand.NewSource(o.Seed + 1)),
		ClockFlag: clockFlag, ClockOffset: baseOffset})
	if err != nil {
		return nil, err
	}
	// Whatever happens from here on, every fault is healed.
	defer func() {
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_ = nemesis.HealAll(hctx, nemeses, nil)
	}()

	start := r.rec.Now()
	r.runPhase(ctx, nemeses)
	end := r.rec.Now()

	hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	if err := nemesis.HealAll(hctx, nemeses, r); err != nil {
		r.problem("final heal: %v", err)
	}
	cancel()
	r.restartAll(ctx)
	probeTook, probeOK := r.probeWrites(ctx)
	frozen := len(r.env.Traders) > 0 && r.freezePrices(ctx)
	r.resolvePending(ctx)
	r.cancelResting(ctx)
	r.settleWithdrawals(ctx)
	if len(r.env.Traders) > 0 {
		if at := uint64(0); frozen {
			if at = r.awaitFrozen(ctx); at == 0 {
				r.unsettle(nil, "no node served the pinned prices: a liquidation may still change a trader during the final reads")
			}
			r.quietIndex = max(r.quietIndex, at)
		} else {
			r.unsettle(nil, "the prices could not be pinned for the final reads: a liquidation may change a trader while they are read")
		}
	}
	clocks, why := r.fundingClocks(ctx)
	if clocks == nil && len(r.env.Traders) > 0 {
		r.unsettle(nil, "before the final reads "+why)
	}
	final := r.readFinal(ctx)
	r.readTraders(ctx, final)
	r.readWithdrawers(ctx, final)
	final.MarketFunding = r.readMarketFunding(ctx)
	final.LogTimeOriginMs = r.rec.Started().UnixMilli() + baseOffset.Milliseconds()
	r.checkFrozen(ctx, final, clocks)
	final.Samples = r.sampleStates(ctx)
	final.Ledgers = r.sampleLedgers(ctx)

	r.cluster.StopAll()
	if r.fw != nil {
		r.fw.Close()
	}
	if err := r.rec.Close(); err != nil {
		r.problem("history: %v", err)
	}
	r.check(final, int64(start), int64(end), probeTook, probeOK)
	r.checkStores(final)
	if r.sum.Failed() {
		r.keepData(filepath.Join(work, "data"))
	}
	if err := report.Write(r.dir, &r.sum, final); err != nil {
		return &r.sum, err
	}
	return &r.sum, nil
}

// checkStores reads the stopped nodes' raft stores: their committed logs
// must match, and replaying each must give the hash it reported
// (jepsen/raftlog).
func (r *run) checkStores(final *checker.Final) {
	dirs := map[string]string{}
	for _, n := range r.cluster.Nodes {
		dirs[n.ID] = n.Data
	}
	logs, replay, below := raftlog.Check(dirs, final.Samples)
	r.sum.Results = append(r.sum.Results, logs, below, replay)
	if r.archives != "" {
		paths := map[string]string{}
		for _, n := range r.cluster.Nodes {
			paths[n.ID] = r.cluster.ArchivePath(n)
		}
		r.sum.Results = append(r.sum.Results, raftlog.CheckArchives(paths))
	}
}

// keepData copies the nodes' data directories into the report of a failed
// run: a divergence is diagnosed from the logs the nodes held.
func (r *run) keepData(data string) {
	dst := filepath.Join(r.dir, "data")
	if err := os.CopyFS(dst, os.DirFS(data)); err != nil {
		r.logf("could not keep the data directories: %v", err)
		return
	}
	if r.archives != "" {
		if err := os.CopyFS(filepath.Join(r.dir, "archives"), os.DirFS(r.archives)); err != nil {
			r.logf("could not keep the apply archives: %v", err)
		}
	}
	if r.simRail != "" {
		if err := os.CopyFS(filepath.Join(r.dir, "simrail"), os.DirFS(r.simRail)); err != nil {
			r.logf("could not keep the payout book: %v", err)
		}
	}
	r.logf("kept the nodes' data directories and apply archives in %s", r.dir)
}

// degraded notes a degraded run in the report without failing it.
func (r *run) degraded(msg string) {
	r.sum.Results = append(r.sum.Results, checker.Result{Name: "harness", Verdict: checker.Unknown, Details: []string{msg}})
}

// Fault records nemesis events in the history (nemesis.Recorder).
func (r *run) Fault(f string, ok bool, detail string) {
	inv := r.rec.Invoke(history.Op{Process: history.NemesisProcess, F: f, Detail: detail})
	t := history.OK
	if !ok {
		t = history.Info
	}
	r.rec.Complete(inv, history.Op{Type: t, Detail: detail})
}

func (r *run) setupAccounts(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, setupAccountsTimeout)
	defer cancel()
	pid := 100000
	for len(r.env.Accounts) < r.opts.Accounts {
		node := r.env.Nodes[len(r.env.Accounts)%len(r.env.Nodes)]
		key := fmt.Sprintf("jepsen-signup-%016x", r.rng.Uint64())
		acct, _, why := workload.Signup(ctx, r.env, pid, node, key)
		pid++
		if acct != nil {
			r.env.Accounts = append(r.env.Accounts, acct)
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("created only %d of %d accounts in %v: %s", len(r.env.Accounts), r.opts.Accounts, setupAccountsTimeout, why)
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.logf("created %d accounts", len(r.env.Accounts))
	return nil
}

// runPhase runs the clients and the nemesis schedule for the duration.
func (r *run) runPhase(ctx context.Context, nemeses []nemesis.Nemesis) {
	o := r.opts
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	sched := &nemesis.Schedule{Nemeses: nemeses, Rand: mrand.New(mrand.NewSource(o.Seed + 2)), Rec: r, Log: r.logf}
	if o.Duration < 3*time.Minute {
		sched.QuietMin, sched.QuietMax, sched.HoldMin, sched.HoldMax = 2*time.Second, 4*time.Second, 4*time.Second, 8*time.Second
	} else {
		sched.QuietMin, sched.QuietMax, sched.HoldMin, sched.HoldMax = 5*time.Second, 10*time.Second, 8*time.Second, 20*time.Second
	}
	kinds := workload.Kinds()
	if o.Bug != "" {
		kinds = plantBug(o.Bug, kinds)
	}
	r.logf("running %d workers at ~%.0f ops/s for %v with nemeses %v", o.Workers, o.Rate, o.Duration, r.sum.Nemeses)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer r.recoverInto("nemesis")
		sched.Run(ctx)
	}()
	if len(r.paths) > 0 && len(r.env.Traders) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.recoverInto("price crashes")
			n := r.crashPrices(ctx)
			r.mu.Lock()
			r.sum.Crashes = n
			r.mu.Unlock()
		}()
	}
	go func() {
		defer wg.Done()
		defer r.recoverInto("workload")
		n, err := workload.Run(ctx, r.env, workload.Options{Workers: o.Workers, Rate: o.Rate, Kinds: kinds, Seed: o.Seed + 3})
		if err != nil {
			r.problem("workload: %v", err)
		}
		r.logf("workload invoked %d operations", n)
	}()
	wg.Wait()
	r.sum.Faults = sched.Faults
}

// nodeExited reports a node process that ended without the harness
// stopping or killing it (a crash, a node that gave up, or a signal from
// outside the run). It stays down until the final heal starts it again.
func (r *run) nodeExited(n *db.Node, status string) {
	r.problem("%s exited on its own (%s); see %s (down until a nemesis or the final restart starts it again)", n.ID, status, n.Log)
}

func (r *run) recoverInto(what string) {
	if p := recover(); p != nil {
		r.problem("%s panicked: %v\n%s", what, p, debug.Stack())
	}
}

// restartAll makes sure every node runs and the cluster has all members
// again before the final phase.
func (r *run) restartAll(ctx context.Context) {
	for _, n := range r.cluster.Nodes {
		if !n.Running() {
			if err := r.cluster.Start(n, r.cluster.Nodes[0].Admin); err != nil {
				r.problem("restart %s: %v", n.ID, err)
			}
		} else if n.Paused() {
			_ = r.cluster.Resume(n)
		}
	}
	if err := r.cluster.WaitMembers(ctx, r.cluster.Nodes, len(r.cluster.Nodes), rejoinTimeout); err != nil {
		r.problem("cluster did not re-form after healing: %v", err)
	}
}

// probeWrites measures how soon after the final heal a write is accepted.
func (r *run) probeWrites(ctx context.Context) (time.Duration, bool) {
	start := time.Now()
	deadline := start.Add(r.opts.LivenessBound)
	pid := 200000
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		p := &workload.Process{ID: pid, Node: r.env.Nodes[i%len(r.env.Nodes)], Rand: r.rng}
		if workload.Faucet(ctx, r.env, p, r.env.Accounts[i%len(r.env.Accounts)]) == history.OK {
			took := time.Since(start)
			r.logf("cluster took a write %v after the final heal", took.Round(time.Millisecond))
			return took, true
		}
		pid++
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start), false
}

// resolvePending retries every write with an unknown outcome with its
// idempotency key until it is settled or the phase times out.
func (r *run) resolvePending(ctx context.Context) {
	pending := r.env.TakePending()
	if len(pending) == 0 {
		return
	}
	r.logf("settling %d writes with unknown outcome", len(pending))
	deadline := time.Now().Add(resolveTimeout)
	pid := 300000
	for round := 0; len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil; round++ {
		var still []workload.Pending
		for i, p := range pending {
			node := r.env.Nodes[(round+i)%len(r.env.Nodes)]
			if done := workload.Retry(ctx, r.env, pid, node, p); !checker.Settles(done) {
				still = append(still, p)
			}
			pid++
		}
		pending = still
		if len(pending) > 0 {
			time.Sleep(time.Second)
		}
	}
	if len(pending) > 0 {
		r.logf("%d writes stay unsettled", len(pending))
	}
}

// readFinal reads every account's balance, deposits and keys, retrying
// each read on the nodes in turn.
func (r *run) readFinal(ctx context.Context) *checker.Final {
	final := &checker.Final{Accounts: map[string]*checker.AccountFinal{}}
	minIndex := max(r.ackedIndex(), r.quietIndex)
	r.env.MinIndex = minIndex
	pid := 400000
	all := append(append(append([]*workload.Account(nil), r.env.Accounts...), r.env.Traders...), r.env.Withdrawers...)
	for i, a := range all {
		af := &checker.AccountFinal{}
		final.Accounts[a.ID] = af
		// A trader's balance moves with fills, a withdrawer's with
		// withdrawals: it is read with its view (readTraders,
		// readWithdrawers), not as a register read in the history.
		trader := i >= len(r.env.Accounts)
		for try := 0; try < finalReadAttempts && af.FreeMsat == nil && !trader; try++ {
			p := &workload.Process{ID: pid, Node: r.env.Nodes[(i+try)%len(r.env.Nodes)], Rand: r.rng}
			pid++
			if t, v := workload.ReadBalanceValue(ctx, r.env, p, a); t == history.OK {
				af.FreeMsat = v
			} else {
				time.Sleep(300 * time.Millisecond)
			}
		}
		for try := 0; try < finalReadAttempts && !af.DepositsComplete; try++ {
			deps, err := r.listDeposits(ctx, r.env.Nodes[(i+try)%len(r.env.Nodes)], a.APIKey, minIndex)
			if err != nil {
				af.Errors = append(af.Errors, err.Error())
				time.Sleep(300 * time.Millisecond)
				continue
			}
			af.Deposits, af.DepositsComplete = deps, true
		}
		for try := 0; try < finalReadAttempts && !af.SessionsComplete; try++ {
			res, list := r.cl.Sessions(ctx, r.env.Nodes[(i+try)%len(r.env.Nodes)], a.APIKey, minIndex)
			if list == nil {
				af.Errors = append(af.Errors, fmt.Sprintf("sessions: %d %s %s", res.Status, res.Code, res.Error))
				time.Sleep(300 * time.Millisecond)
				continue
			}
			for _, s := range list.Sessions {
				af.Sessions = append(af.Sessions, checker.Session{KeyID: s.KeyID, Label: s.Label, CreatedTsMs: int64Of(s.CreatedTsMs)})
			}
			af.SessionsComplete = true
		}
	}
	return final
}

func (r *run) listDeposits(ctx context.Context, node, apiKey string, minIndex uint64) ([]checker.Deposit, error) {
	var out []checker.Deposit
	before := ""
	for page := 0; page < maxDepositPages; page++ {
		res, p := r.cl.Deposits(ctx, node, apiKey, before, depositPageSize, minIndex)
		if p == nil {
			return nil, fmt.Errorf("deposits page %d on %s: %d %s %s", page, node, res.Status, res.Code, res.Error)
		}
		for _, d := range p.Deposits {
			c, err := d.CreditedMsat()
			if err != nil {
				return nil, err
			}
			out = append(out, checker.Deposit{Seq: d.Seq, RailRef: d.RailRef, CreditedMsat: c, TsMs: int64Of(d.TsMs)})
		}
		if p.NextBeforeSeq == nil || *p.NextBeforeSeq == "" || len(p.Deposits) == 0 {
			return out, nil
		}
		before = *p.NextBeforeSeq
	}
	return nil, errors.New("deposits: too many pages")
}

// sampleStates polls every node's applied index and state hash until
// enough indexes were seen on all nodes (the leader proposes a tick every
// second, so indexes move; replicas line up between ticks).
func (r *run) sampleStates(ctx context.Context) map[string][]checker.StateSample {
	out := map[string][]checker.StateSample{}
	deadline := time.Now().Add(settleTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, n := range r.cluster.Nodes {
			st, err := r.cluster.State(ctx, n)
			if err == nil {
				out[n.ID] = append(out[n.ID], checker.StateSample{Applied: st.Applied(), Hash: st.StateHash})
			}
		}
		if _, _, common := checker.Hashes(out); common >= 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out
}

// check runs every checker and fills the summary.
func (r *run) check(final *checker.Final, start, end int64, probeTook time.Duration, probeOK bool) {
	ops := r.rec.Ops()
	for _, op := range ops {
		if op.Process == history.NemesisProcess || op.Process == history.PriceProcess {
			continue
		}
		switch op.Type {
		case history.Invoke:
			r.sum.Ops++
		case history.OK:
			r.sum.Acknowledged++
		}
	}
	r.logf("checking %d operations", r.sum.Ops)
	linStart := time.Now()
	lin, files := checker.Linearizability(ops, checker.LinearizabilityOptions{TimeoutPerAccount: r.opts.PorcupineTimeout, OutDir: r.dir})
	r.logf("linearizability: %s in %v", lin.Verdict, time.Since(linStart).Round(time.Millisecond))
	lost, counts := checker.LostWrites(ops, final)
	money, mrep := checker.Money(ops, final)
	trading, trep := checker.Trading(ops, final)
	wd, wrep := checker.Withdrawals(ops, final)
	lt, _ := checker.LogTime(ops, final)
	live, lrep := checker.Liveness(ops, start, end, r.opts.LivenessBound)
	probe := checker.Probe(probeTook, probeOK, r.opts.LivenessBound)
	r.sum.Results = append(r.sum.Results, lin, lost, money, trading, wd, lt, live, probe)
	r.sum.Withdrawals, r.sum.WithdrawalsPaid, r.sum.WithdrawalsReturned = wrep.Acknowledged, wrep.Paid, wrep.Returned
	r.sum.WithdrawalReport = &wrep
	r.sum.Ledger = checker.Skipped
	if final.Ledgers != nil {
		var ids []string
		for _, n := range r.cluster.Nodes {
			ids = append(ids, n.ID)
		}
		led, ledRep := checker.Ledger(ops, final.Ledgers, ids, final)
		r.sum.Results = append(r.sum.Results, led)
		r.sum.Ledger, r.sum.InsuranceMsat = led.Verdict, ledRep.InsuranceMsat
	}
	r.sum.Liquidations, r.sum.ADLFills, r.sum.FundingFlows = trep.Liquidations, trep.ADLFills, trep.FundingFlows
	r.sum.Linearizable = lin.Verdict
	// Lost and doubled fills and withdrawals count as lost and duplicated
	// writes.
	r.sum.Lost = counts.Lost + trep.LostFills + wrep.Lost
	r.sum.Duplicates = counts.Duplicates + trep.DoubledFills + wrep.Duplicates
	r.sum.Unresolved = counts.Unresolved
	r.sum.Orders, r.sum.Fills = trep.Orders, trep.Fills
	r.sum.SwitchCancels, r.sum.Arms = trep.SwitchCancels, trep.Arms
	r.sum.Triggers, r.sum.TriggerFills = trep.Triggers, trep.TriggerFills
	r.sum.DriftMsat, r.sum.HashesEqual = mrep.DriftMsat+trep.DriftMsat, mrep.HashesEqual
	r.sum.Unavailable = lrep.LongestUnavailable
	r.sum.Duration = r.opts.Duration
	r.sum.Visualizations = files
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func without(xs []string, x string) []string {
	var out []string
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// unsettle takes back every trader's settled mark (why goes to the report):
// their views are then compared only where a record is listed twice.
func (r *run) unsettle(final *checker.Final, why string) {
	r.logf("no trader counts as settled: %s", why)
	r.degraded("replicas not compared whole: " + why)
	r.settled = map[string]bool{}
	if final != nil {
		for _, tf := range final.Traders {
			tf.Settled = false
		}
	}
}

// checkFrozen makes sure nothing could have moved a settled trader while
// the final views were read (prices.go): every node still serves the
// pinned prices, and no node applied an hourly funding boundary since
// before the reads (before holds the next boundaries read then).
func (r *run) checkFrozen(ctx context.Context, final *checker.Final, before map[string]string) {
	if len(final.Traders) == 0 || len(r.settled) == 0 {
		return
	}
	after, why := r.fundingClocks(ctx)
	if after == nil {
		r.unsettle(final, "after the final reads "+why)
		return
	}
	if !maps.Equal(before, after) {
		r.unsettle(final, fmt.Sprintf("a funding boundary was applied during the final reads (next boundary %v before, %v after)", before, after))
		return
	}
	if len(r.frozen) == 0 {
		return
	}
	for _, node := range r.env.Nodes {
		ok, why := false, ""
		for try := 0; try < finalReadAttempts && !ok; try++ {
			if ok, why = r.servesFrozen(ctx, node); !ok {
				time.Sleep(300 * time.Millisecond)
			}
		}
		if !ok {
			r.unsettle(final, "after the final reads "+why)
			return
		}
	}
}

// sampleLedgers reads every node's books (GET /admin/ledger) until all
// nodes were seen at the same applied index a few times, like
// sampleStates. A build without the route gives nil.
func (r *run) sampleLedgers(ctx context.Context) map[string][]checker.LedgerSample {
	out := map[string][]checker.LedgerSample{}
	deadline := time.Now().Add(settleTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, n := range r.cluster.Nodes {
			l, err := r.cluster.Ledger(ctx, n)
			if err != nil {
				if strings.Contains(err.Error(), ": 404") && len(out) == 0 {
					r.degraded("the build under test has no GET /admin/ledger: the venue's books are not checked")
					return nil
				}
				continue
			}
			s, err := ledgerSample(l)
			if err != nil {
				r.problem("ledger on %s: %v", n.ID, err)
				continue
			}
			out[n.ID] = append(out[n.ID], s)
		}
		if commonIndexes(out, len(r.cluster.Nodes)) >= 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out
}

func ledgerSample(l *client.Ledger) (checker.LedgerSample, error) {
	orZero := func(x string) string {
		if x == "" {
			return "0"
		}
		return x
	}
	v, err := ints("ledger", l.HouseMsat, l.InsuranceMsat, l.FeeRevenueMsat, l.PendingWithdrawalsMsat, l.FaucetMsat,
		l.TradersMsat, l.CreditedMsat, l.PaidMsat, orZero(l.ReferralPayableMsat), orZero(l.PromoterPayableMsat),
		orZero(l.USDxReserveMsat), orZero(l.USDxYieldMsat), orZero(l.USDxHedgeMsat))
	if err != nil {
		return checker.LedgerSample{}, err
	}
	s := checker.LedgerSample{Applied: l.Applied(), HouseMsat: v[0], InsuranceMsat: v[1], FeeRevenueMsat: v[2],
		PendingWithdrawalsMsat: v[3], FaucetMsat: v[4], TradersMsat: v[5], CreditedMsat: v[6], PaidMsat: v[7], OK: l.Conservation.OK,
		ReferralPayableMsat: v[8], PromoterPayableMsat: v[9], USDxReserveMsat: v[10], USDxYieldMsat: v[11], USDxHedgeMsat: v[12]}
	if l.Conservation.Error != nil {
		s.Error = *l.Conservation.Error
	}
	return s, nil
}

// commonIndexes counts the applied indexes all nodes were sampled at.
func commonIndexes(samples map[string][]checker.LedgerSample, nodes int) int {
	seen := map[uint64]map[string]bool{}
	for node, ss := range samples {
		for _, s := range ss {
			if seen[s.Applied] == nil {
				seen[s.Applied] = map[string]bool{}
			}
			seen[s.Applied][node] = true
		}
	}
	n := 0
	for _, at := range seen {
		if len(at) == nodes {
			n++
		}
	}
	return n
}

// fundingSetup is about how long the harness takes from starting the
// nodes to starting the clients (a few seconds on a 2-core machine).
const fundingSetup = 5 * time.Second

// fundingOffset is the clock shift that puts an hourly funding boundary
// (log time follows the leader's calendar) halfway through the faults of
// a run starting now: between 0 and an hour ahead.
func fundingOffset(now time.Time, faults time.Duration) time.Duration {
	mid := now.Add(fundingSetup + faults/2)
	return mid.Truncate(time.Hour).Add(time.Hour).Sub(mid).Truncate(time.Millisecond)
}
