package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/jepsen/workload"
)

// Withdrawals (README "Withdrawals"): funded withdrawer accounts withdraw
// to Spark addresses and Lightning invoices under faults; every node
// shares one simulated payout book (serve --sim-rail-dir), which the
// checker reads from its directory.

const (
	grantsPerWithdrawer = 2
	// withdrawSettleTimeout bounds the wait for the leader's rail driver to
	// pay or return every withdrawal after the run.
	withdrawSettleTimeout = 60 * time.Second
	withdrawalPageSize    = 100
	maxWithdrawalPages    = 100
)

// simRailFlags creates the shared payout book's directory under work (any
// node uid may write it) and returns the serve flags that point every
// node at it, or nil when the build has no --sim-rail-dir.
func (r *run) simRailFlags(work, flags string) []string {
	if !strings.Contains(flags, "--sim-rail-dir") {
		r.logf("WARNING: perpd has no --sim-rail-dir; each node's simulated rail keeps its own payout book")
		return nil
	}
	dir := filepath.Join(work, "simrail")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		r.problem("sim rail book: %v", err)
		return nil
	}
	// Nodes may run under their own uids (partitions): all of them write
	// the book.
	if err := os.Chmod(dir, 0o777); err != nil {
		r.problem("sim rail book: %v", err)
		return nil
	}
	r.simRail = dir
	return []string{"--sim-rail-dir", dir}
}

// setupWithdrawers creates and funds the withdrawing accounts. Each sends
// its Spark withdrawals to the next withdrawer's Spark address (a valid
// destination on the rail's network, which the simulated rail pays), and
// a share of its withdrawals to Lightning invoices the harness signs on
// that network (which the simulated rail returns).
func (r *run) setupWithdrawers(ctx context.Context) error {
	if r.opts.Withdrawers <= 0 {
		return nil
	}
	if !r.cl.Probe(ctx, r.env.Nodes[0], "POST", "/v1/withdrawals") {
		r.degraded("withdrawals not exercised: the build under test has no POST /v1/withdrawals")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, setupAccountsTimeout)
	defer cancel()
	pid := 170000
	var ws []*workload.Account
	for len(ws) < r.opts.Withdrawers {
		node := r.env.Nodes[len(ws)%len(r.env.Nodes)]
		acct, _, why := workload.Signup(ctx, r.env, pid, node, fmt.Sprintf("jepsen-signup-%016x", r.rng.Uint64()))
		pid++
		if acct == nil || acct.RailAddress == "" {
			if ctx.Err() != nil {
				return fmt.Errorf("created only %d of %d withdrawers: %s", len(ws), r.opts.Withdrawers, why)
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		for funded := 0; funded < grantsPerWithdrawer && ctx.Err() == nil; pid++ {
			p := &workload.Process{ID: pid, Node: node, Rand: r.rng}
			if workload.Faucet(ctx, r.env, p, acct) == history.OK {
				funded++
			} else {
				time.Sleep(300 * time.Millisecond)
			}
		}
		ws = append(ws, acct)
	}
	for i, a := range ws {
		a.WithdrawTo = ws[(i+1)%len(ws)].RailAddress
	}
	r.env.Withdrawers = ws
	if r.opts.LightningPercent > 0 {
		payee, err := workload.NewPayee(ws[0].RailAddress, r.opts.LightningPercent)
		if err != nil {
			return fmt.Errorf("lightning withdrawals: %w", err)
		}
		r.env.Payee = payee
	}
	if p := r.env.Payee; p != nil {
		r.logf("created %d funded withdrawers; %d%% of withdrawals go to %s Lightning invoices", len(ws), p.Percent, p.Network)
	} else {
		r.logf("created %d funded withdrawers; Spark withdrawals only", len(ws))
	}
	return nil
}

// settleWithdrawals waits until the rail driver has paid or returned every
// withdrawal: a withdrawer is settled once a node, at or past the highest
// acknowledged index, lists nothing open for it twice in a row and none of
// its requests has an unknown outcome; the second listing's index is one
// from which nothing of the withdrawer changes, and the final reads are
// made at or past it.
func (r *run) settleWithdrawals(ctx context.Context) {
	if len(r.env.Withdrawers) == 0 {
		return
	}
	r.wdSettled = map[string]bool{}
	unknown := map[string]bool{}
	for _, w := range checker.Writes(r.rec.Ops(), history.FWithdraw) {
		if w.Outcome == checker.Indeterminate {
			unknown[w.Invoke.Account] = true
		}
	}
	deadline := time.Now().Add(withdrawSettleTimeout)
	for round := 0; time.Now().Before(deadline) && ctx.Err() == nil; round++ {
		minIndex := r.ackedIndex()
		left := 0
		for i, a := range r.env.Withdrawers {
			if r.wdSettled[a.ID] || unknown[a.ID] {
				continue
			}
			left++
			node := r.env.Nodes[(round+i)%len(r.env.Nodes)]
			if v, _, err := r.listWithdrawals(ctx, node, a.APIKey, minIndex); err != nil || openWithdrawals(v) > 0 {
				continue
			}
			if v, at, err := r.listWithdrawals(ctx, node, a.APIKey, minIndex); err == nil && openWithdrawals(v) == 0 {
				r.wdSettled[a.ID] = true
				r.quietIndex = max(r.quietIndex, at)
				left--
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n := len(r.env.Withdrawers) - len(r.wdSettled); n > 0 {
		r.logf("%d of %d withdrawers still had open withdrawals (or a request of unknown outcome) after %v", n, len(r.env.Withdrawers), withdrawSettleTimeout)
	}
}

func openWithdrawals(ws []checker.WithdrawalFinal) int {
	n := 0
	for _, w := range ws {
		if w.State == checker.WithdrawalRequested || w.State == checker.WithdrawalQueued {
			n++
		}
	}
	return n
}

// listWithdrawals reads every page of a withdrawer's withdrawals on node,
// not before minIndex, and the highest X-Raft-Index it was answered with.
func (r *run) listWithdrawals(ctx context.Context, node, apiKey string, minIndex uint64) ([]checker.WithdrawalFinal, uint64, error) {
	var out []checker.WithdrawalFinal
	var at uint64
	before := ""
	for page := 0; page < maxWithdrawalPages; page++ {
		res, p := r.cl.Withdrawals(ctx, node, apiKey, before, withdrawalPageSize, minIndex)
		if p == nil {
			return nil, 0, fmt.Errorf("withdrawals page %d on %s: %d %s %s", page, node, res.Status, res.Code, res.Error)
		}
		at = max(at, res.RaftIndex)
		for _, w := range p.Withdrawals {
			f, err := withdrawalFinal(w)
			if err != nil {
				return nil, 0, fmt.Errorf("withdrawals on %s: %w", node, err)
			}
			out = append(out, f)
		}
		if p.NextBeforeSeq == nil || *p.NextBeforeSeq == "" || len(p.Withdrawals) == 0 {
			return out, at, nil
		}
		before = *p.NextBeforeSeq
	}
	return nil, 0, errors.New("withdrawals: too many pages")
}

func withdrawalFinal(w client.Withdrawal) (checker.WithdrawalFinal, error) {
	amount, fee, err := w.Amounts()
	if err != nil {
		return checker.WithdrawalFinal{}, err
	}
	f := checker.WithdrawalFinal{IdemKey: w.IdempotencyKey, State: w.State, Path: w.Path, AmountMsat: amount, FeeMsat: fee, Seq: w.Seq,
		RequestedTsMs: int64Of(w.RequestedTsMs)}
	if w.RailRef != nil {
		f.RailRef = *w.RailRef
	}
	if w.QueuedReason != nil {
		f.Reason = *w.QueuedReason
	}
	return f, nil
}

// readWithdrawers reads every withdrawer's balances and withdrawals on
// every node, not before the final reads' index, and the payout book.
func (r *run) readWithdrawers(ctx context.Context, final *checker.Final) {
	if len(r.env.Withdrawers) == 0 {
		return
	}
	final.Withdrawers = map[string]*checker.WithdrawerFinal{}
	for _, a := range r.env.Withdrawers {
		wf := &checker.WithdrawerFinal{Settled: r.wdSettled[a.ID]}
		wf.Nodes, wf.Errors = readOnEveryNode(r.env.Nodes, func(node string) (*checker.WithdrawerView, error) {
			v, err := r.withdrawerView(ctx, node, a.APIKey)
			if err == nil {
				r.corruptWithdrawals(node, v)
			}
			return v, err
		})
		for _, node := range r.env.Nodes {
			if wf.Nodes[node] == nil {
				wf.Missing = append(wf.Missing, node)
			}
		}
		final.Withdrawers[a.ID] = wf
	}
	final.SimBook = r.readSimBook()
}

func (r *run) withdrawerView(ctx context.Context, node, apiKey string) (*checker.WithdrawerView, error) {
	mi := r.env.MinIndex
	res, bal := r.cl.AccountBalances(ctx, node, apiKey, mi)
	if bal == nil {
		return nil, fmt.Errorf("account on %s: %d %s %s", node, res.Status, res.Code, res.Error)
	}
	ws, _, err := r.listWithdrawals(ctx, node, apiKey, mi)
	if err != nil {
		return nil, err
	}
	return &checker.WithdrawerView{FreeMsat: bal.FreeMsat, ReservedMsat: bal.ReservedMsat, Withdrawals: ws}, nil
}

// readSimBook reads the shared payout book's files (node/rail/sim_book.go:
// one JSON outcome per executed payout; dot files are unfinished writes).
func (r *run) readSimBook() *checker.SimBook {
	if r.simRail == "" {
		return &checker.SimBook{Error: "the nodes share no payout book (no --sim-rail-dir)"}
	}
	entries, err := os.ReadDir(r.simRail)
	if err != nil {
		return &checker.SimBook{Error: err.Error()}
	}
	book := &checker.SimBook{Read: true, Payouts: map[string]checker.SimPayout{}}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(r.simRail, e.Name()))
		var p checker.SimPayout
		if err == nil {
			err = json.Unmarshal(raw, &p)
		}
		if err != nil {
			return &checker.SimBook{Error: fmt.Sprintf("%s: %v", e.Name(), err)}
		}
		book.Payouts[e.Name()] = p
	}
	return book
}
