package checker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/bits"
	"sort"
	"strings"

	"github.com/perpd/perpd/jepsen/history"
)

// Withdrawals. Withdrawer accounts are funded with faucet grants and then
// only withdraw (workload/withdraw.go): to a Spark address, which the
// simulated rail pays, or to a fresh Lightning invoice the harness signs,
// which the simulated rail returns ("unknown payout invoice"). Each
// request goes under a fresh idempotency key that the listing (GET
// /v1/withdrawals) shows back, so every listed withdrawal is matched
// exactly to the invocation that made it; the invocation records its
// path and, for Lightning, the fee POST /v1/withdrawals/quote answered
// just before (the create answer, {railRef, queued}, carries no fee).
// After the run the harness waits until no withdrawer has an open
// (requested or queued) withdrawal, then reads each withdrawer on every
// node at or past an index from which nothing of it can change, and the
// simulated rail's shared payout book from its directory.
//
// On each node's view of each withdrawer:
//
//   - an acknowledged withdrawal is listed exactly once under its key, with
//     the amount requested, the path it was sent on, the fee of that path
//     (Spark: a flat SparkFeeMsat; Lightning: LightningFeeMsat of the
//     amount, the documented quote) and, when it was quoted, exactly the
//     fee quoted; and the railRef it answered (else lost, or applied
//     twice);
//   - one that certainly failed is not listed; one of unknown outcome at
//     most once; and nothing is listed under a key no invocation sent (so
//     listed <= acknowledged + unknown, matched by key);
//   - no railRef or seq is listed twice; every state is one of requested,
//     queued, paid, returned, and none is open once the withdrawer settled;
//   - money: free = Σ listed deposits (amountMsat - feeMsat)
//     - Σ (amountMsat + feeMsat) over listed withdrawals that are requested,
//     queued or paid (a returned one, whatever its path, counts nothing),
//     and reserved = 0. (fsm/funds: a request moves amount + fee from free
//     to pending withdrawals; paid takes the amount out of the venue and
//     the fee to fee revenue; returned gives amount + fee back to free.)
//     With every grant settled, the listed deposits credit exactly what
//     the acknowledged grants answered.
//
// Across nodes, a settled withdrawer's views are identical (balances and
// every listed withdrawal). Against the payout book (one file per executed
// payout, named by its railRef, holding the rail's outcome and reason):
// every listed paid withdrawal has a book entry saying paid, every
// returned one an entry saying returned, whose reason the listing shows
// as its queuedReason (the rail's last word), and every entry belongs to a
// listed withdrawal in that final state: an entry nobody lists is money
// the rail moved that the venue did not record (a payout made twice under
// a second railRef, or a withdrawal lost after its payout). The book holds
// no amounts, so amounts are checked against the invocations only.
// Against the books (GET /admin/ledger at the last index every node was
// seen at): paid-out equals Σ amountMsat of the listed paid withdrawals
// (only a paid withdrawal debits the ledger; a returned one, every
// Lightning one on the simulated rail, never does) and pending
// withdrawals is 0.

// Withdrawal fees (docs/decisions.md "Withdrawal quote"): Spark a flat
// 10 sats; Lightning 2 sats + 0.1% of the amount rounded up to the msat,
// capped at 5,000 sats.
const (
	SparkFeeMsat            = 10_000
	LightningFeeBaseMsat    = 2_000
	LightningFeePPM         = 1_000
	LightningFeeCapMsat     = 5_000_000
	maxRailReasonBytes      = 300 // the venue keeps at most this much of a rail's reason
	withdrawalPathSpark     = "spark"
	withdrawalPathLightning = "lightning"
)

// LightningFeeMsat is the documented fee of a Lightning withdrawal of
// amountMsat (> 0).
func LightningFeeMsat(amountMsat int64) int64 {
	hi, lo := bits.Mul64(uint64(amountMsat), LightningFeePPM)
	q, r := bits.Div64(hi, lo, 1_000_000)
	if r != 0 {
		q++
	}
	return min(LightningFeeBaseMsat+int64(q), LightningFeeCapMsat)
}

// feeFor is the documented fee of a withdrawal of amountMsat on path.
func feeFor(path string, amountMsat int64) int64 {
	if path == withdrawalPathLightning {
		return LightningFeeMsat(amountMsat)
	}
	return SparkFeeMsat
}

// invokedPath is the path a withdrawal invocation was sent on; histories
// from before Lightning withdrawals name none and sent only Spark ones.
func invokedPath(op history.Op) string {
	if op.Path == "" {
		return withdrawalPathSpark
	}
	return op.Path
}

// Withdrawal states (SPEC section 3).
const (
	WithdrawalRequested = "requested"
	WithdrawalQueued    = "queued"
	WithdrawalPaid      = "paid"
	WithdrawalReturned  = "returned"
)

// WithdrawerFinal is a withdrawing account's end state as each node
// listed it.
type WithdrawerFinal struct {
	// Nodes maps a node's address to its complete view; a node whose
	// listings could not all be read is missing (Errors says why).
	Nodes   map[string]*WithdrawerView `json:"nodes"`
	Missing []string                   `json:"missing,omitempty"`
	Errors  []string                   `json:"errors,omitempty"`
	// Settled is set when the harness saw the account with no open
	// withdrawal at an index every view was read at or past: from there
	// on nothing of it changes.
	Settled bool `json:"settled"`
}

// WithdrawerView is one node's answer for a withdrawer.
type WithdrawerView struct {
	FreeMsat     int64             `json:"freeMsat"`
	ReservedMsat int64             `json:"reservedMsat"`
	Withdrawals  []WithdrawalFinal `json:"withdrawals"`
}

// WithdrawalFinal is one listed withdrawal.
type WithdrawalFinal struct {
	IdemKey    string `json:"idempotencyKey"`
	RailRef    string `json:"railRef"`
	State      string `json:"state"`
	Path       string `json:"path"`
	AmountMsat int64  `json:"amountMsat"`
	FeeMsat    int64  `json:"feeMsat"`
	// Reason is the listing's queuedReason: why it waits while queued, why
	// the rail refused it once returned.
	Reason string `json:"reason,omitempty"`
	Seq    string `json:"seq"`
	// RequestedTsMs is the log time it was requested at (0: not read).
	RequestedTsMs int64 `json:"requestedTsMs,omitempty"`
}

// SimBook is the simulated rail's payout book as read from its directory
// (node/rail/sim_book.go): one file per executed payout.
type SimBook struct {
	// Read is false when the directory could not be read; Error says why.
	Read  bool   `json:"read"`
	Error string `json:"error,omitempty"`
	// Payouts are the entries by file name.
	Payouts map[string]SimPayout `json:"payouts"`
}

// SimPayout is one book entry: the rail's outcome of a payout.
type SimPayout struct {
	Status string `json:"Status"`
	Reason string `json:"Reason,omitempty"`
}

// SimBookName is the file the book keeps railRef's outcome in.
func SimBookName(railRef string) string {
	sum := sha256.Sum256([]byte(railRef))
	return hex.EncodeToString(sum[:16]) + ".json"
}

// WithdrawalReport counts what the withdrawal checker saw: the listing
// counts on the first complete node of each withdrawer, Lost and
// Duplicates on its worst node.
type WithdrawalReport struct {
	Acknowledged int   `json:"acknowledged"` // requests acknowledged (or settled applied by a retry)
	Unsettled    int   `json:"unsettled"`    // requests whose outcome stayed unknown
	Listed       int   `json:"listed"`
	Paid         int   `json:"paid"`
	Returned     int   `json:"returned"`
	Open         int   `json:"open"`
	Lightning    int   `json:"lightning"` // listed withdrawals to a Lightning invoice
	PaidMsat     int64 `json:"paidMsat"`
	BookPayouts  int   `json:"bookPayouts"`
	Lost         int   `json:"lost"`
	Duplicates   int   `json:"duplicates"`
}

// Withdrawals checks the withdrawers' end states against the history, each
// other, the payout book and the ledger (see the comment above).
func Withdrawals(ops []history.Op, final *Final) (Result, WithdrawalReport) {
	res := Result{Name: "withdrawals", Verdict: Valid}
	var rep WithdrawalReport
	if final == nil || len(final.Withdrawers) == 0 {
		res.Verdict = Skipped
		res.addf("no withdrawers in this run")
		return res, rep
	}
	_, requests := byAccount(Writes(ops, history.FWithdraw))
	_, grants := byAccount(Writes(ops, history.FFaucet))
	// listed holds every withdrawal the first complete node of each
	// withdrawer lists, by railRef, for the book.
	listed := map[string]WithdrawalFinal{}
	complete, settled := true, true
	for _, a := range sortedMapKeys(final.Withdrawers) {
		wf := final.Withdrawers[a]
		mine := requests[a]
		for _, w := range mine {
			switch w.Outcome {
			case Applied:
				rep.Acknowledged++
			case Indeterminate:
				rep.Unsettled++
			}
		}
		settled = settled && wf.Settled
		names := sortedMapKeys(wf.Nodes)
		if len(names) == 0 {
			complete = false
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: no node's view could be read (%s)", a, strings.Join(wf.Errors, "; "))
			continue
		}
		if !wf.Settled {
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: still had open withdrawals after the run: balances, states and replicas not judged", a)
		}
		credit, creditKnown, trimmed := depositCredit(final.Accounts[a], grants[a])
		switch {
		case !creditKnown && trimmed:
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: the deposit history is at its bound and a grant is unsettled: balance not judged", a)
		case !creditKnown:
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: deposits not listed in full: balance not judged", a)
		}
		if !trimmed { // a trimmed listing's credit is the grants' own
			checkGrantCredit(&res, a, grants[a], credit, creditKnown)
		}
		var worst viewCounts
		for i, node := range names {
			c := checkWithdrawerView(&res, a, node, mine, wf.Nodes[node], wf.Settled, credit, creditKnown)
			worst.lost, worst.dups = max(worst.lost, c.lost), max(worst.dups, c.dups)
			if i == 0 {
				for _, w := range wf.Nodes[node].Withdrawals {
					listed[w.RailRef] = w
					rep.Listed++
					if w.Path == withdrawalPathLightning {
						rep.Lightning++
					}
					switch w.State {
					case WithdrawalPaid:
						rep.Paid++
						rep.PaidMsat += w.AmountMsat
					case WithdrawalReturned:
						rep.Returned++
					default:
						rep.Open++
					}
				}
			}
		}
		rep.Lost += worst.lost
		rep.Duplicates += worst.dups
		if len(wf.Missing) > 0 {
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: not read on %s (%s)", a, strings.Join(wf.Missing, ", "), strings.Join(wf.Errors, "; "))
		}
		compareWithdrawerViews(&res, a, wf, names)
	}
	checkSimBook(&res, &rep, final.SimBook, listed, complete, settled)
	checkPaidOut(&res, final.Ledgers, rep.PaidMsat, complete && settled)
	return res, rep
}

// checkGrantCredit: with every grant of the account settled, its listed
// deposits credit exactly what the acknowledged grants answered.
func checkGrantCredit(res *Result, acct string, ws []Write, credit int64, known bool) {
	if !known {
		return
	}
	var applied int64
	for _, w := range ws {
		switch w.Outcome {
		case Applied:
			applied += w.Msat
		case Indeterminate:
			return
		}
	}
	if applied != credit {
		res.Verdict = Violation
		res.addf("%s: acknowledged grants credit %d msat, listed deposits %d msat", acct, applied, credit)
	}
}

type viewCounts struct{ lost, dups int }

func checkWithdrawerView(res *Result, acct, node string, ws []Write, v *WithdrawerView, settled bool, credit int64, creditKnown bool) viewCounts {
	var c viewCounts
	bad := func(format string, args ...any) {
		res.Verdict = Violation
		res.addf("%s on %s: "+format, append([]any{acct, node}, args...)...)
	}
	byKey := map[string][]WithdrawalFinal{}
	refs, seqs := map[string]int{}, map[string]int{}
	var held int64 // amount + fee of listed withdrawals not returned
	for _, w := range v.Withdrawals {
		byKey[w.IdemKey] = append(byKey[w.IdemKey], w)
		if refs[w.RailRef]++; refs[w.RailRef] == 2 {
			c.dups++
			bad("railRef %s listed more than once", w.RailRef)
		}
		if seqs[w.Seq]++; seqs[w.Seq] == 2 {
			bad("withdrawal seq %s listed more than once", w.Seq)
		}
		switch w.State {
		case WithdrawalPaid, WithdrawalRequested, WithdrawalQueued:
			held += w.AmountMsat + w.FeeMsat
		case WithdrawalReturned:
		default:
			bad("withdrawal %s in unknown state %q", w.RailRef, w.State)
		}
		if settled && (w.State == WithdrawalRequested || w.State == WithdrawalQueued) {
			bad("withdrawal %s is %s after the account was seen with none open", w.RailRef, w.State)
		}
	}
	mine := map[string]bool{}
	for _, w := range ws {
		key := w.Invoke.IdemKey
		mine[key] = true
		got := byKey[key]
		switch w.Outcome {
		case Applied:
			if len(got) == 0 {
				c.lost++
				bad("acknowledged withdrawal op #%d (key %s, railRef %s) is not listed", w.Invoke.ID, key, w.RailRef)
			}
			if len(got) > 1 {
				c.dups += len(got) - 1
				bad("withdrawal op #%d listed %d times", w.Invoke.ID, len(got))
			}
			if len(got) > 0 && w.RailRef != "" && got[0].RailRef != w.RailRef {
				bad("withdrawal op #%d answered railRef %s, listed as %s", w.Invoke.ID, w.RailRef, got[0].RailRef)
			}
		case NotApplied:
			if len(got) > 0 {
				c.dups += len(got)
				bad("withdrawal op #%d certainly failed but is listed", w.Invoke.ID)
			}
		default:
			if len(got) > 1 {
				c.dups += len(got) - 1
				bad("withdrawal op #%d of unknown outcome listed %d times", w.Invoke.ID, len(got))
			}
		}
		for _, g := range got {
			checkListedWithdrawal(bad, w.Invoke, g)
		}
	}
	for _, key := range sortedMapKeys(byKey) {
		if !mine[key] {
			c.dups += len(byKey[key])
			bad("%d withdrawal(s) listed under key %q, which no invocation of this run sent", len(byKey[key]), key)
		}
	}
	if settled && creditKnown {
		if want := credit - held; v.FreeMsat != want || v.ReservedMsat != 0 {
			bad("free %d msat, reserved %d msat; deposits %d - withdrawals held or paid %d = %d msat, reserved 0",
				v.FreeMsat, v.ReservedMsat, credit, held, want)
		}
	}
	return c
}

// checkListedWithdrawal holds a listed withdrawal g to the invocation that
// made it: its amount, its path, the documented fee of that path and
// amount, and the fee quoted for it, if any.
func checkListedWithdrawal(bad func(string, ...any), inv history.Op, g WithdrawalFinal) {
	amount := g.AmountMsat
	if inv.Msat != nil {
		amount = *inv.Msat
		if g.AmountMsat != amount {
			bad("withdrawal op #%d asked for %d msat, listed with %d msat", inv.ID, amount, g.AmountMsat)
		}
	}
	path := invokedPath(inv)
	if g.Path != path {
		bad("withdrawal op #%d was sent on %s, listed with path %q", inv.ID, path, g.Path)
	}
	if want := feeFor(path, amount); g.FeeMsat != want {
		bad("withdrawal %s (%s, %d msat) listed with fee %d msat, the %s fee is %d msat", g.RailRef, path, amount, g.FeeMsat, path, want)
	}
	if inv.FeeMsat != nil && g.FeeMsat != *inv.FeeMsat {
		bad("withdrawal %s was quoted a fee of %d msat, listed with %d msat", g.RailRef, *inv.FeeMsat, g.FeeMsat)
	}
}

// compareWithdrawerViews: a settled withdrawer looks the same on every
// node; an unsettled one at least agrees on every withdrawal's amount,
// fee, path and key per railRef.
func compareWithdrawerViews(res *Result, acct string, wf *WithdrawerFinal, names []string) {
	if len(names) < 2 {
		return
	}
	first := wf.Nodes[names[0]]
	for _, n := range names[1:] {
		v := wf.Nodes[n]
		if wf.Settled {
			if a, b := viewKey(first), viewKey(v); a != b {
				res.Verdict = Violation
				res.addf("%s: settled, yet %s and %s list different withdrawals or balances:\n      %s\n      %s", acct, names[0], n, a, b)
			}
			continue
		}
		at := map[string]WithdrawalFinal{}
		for _, w := range first.Withdrawals {
			at[w.RailRef] = w
		}
		for _, w := range v.Withdrawals {
			if f, ok := at[w.RailRef]; ok && (f.IdemKey != w.IdemKey || f.Path != w.Path || f.AmountMsat != w.AmountMsat || f.FeeMsat != w.FeeMsat) {
				res.Verdict = Violation
				res.addf("%s: withdrawal %s differs between %s and %s: %+v vs %+v", acct, w.RailRef, names[0], n, f, w)
			}
		}
	}
}

func viewKey(v *WithdrawerView) string {
	ws := append([]WithdrawalFinal(nil), v.Withdrawals...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].RailRef < ws[j].RailRef })
	var b strings.Builder
	fmt.Fprintf(&b, "free=%d reserved=%d", v.FreeMsat, v.ReservedMsat)
	for _, w := range ws {
		fmt.Fprintf(&b, " [%s %s %s %s %d+%d %q seq %s]", w.RailRef, w.IdemKey, w.State, w.Path, w.AmountMsat, w.FeeMsat, w.Reason, w.Seq)
	}
	return b.String()
}

// checkSimBook matches the payout book with the listed withdrawals
// (listed, by railRef). complete says every withdrawer was read, so an
// entry nobody lists is a violation rather than unknown; settled that no
// withdrawal was open.
func checkSimBook(res *Result, rep *WithdrawalReport, book *SimBook, listed map[string]WithdrawalFinal, complete, settled bool) {
	if book == nil || !book.Read {
		res.Verdict = worse(res.Verdict, Unknown)
		why := "not read"
		if book != nil && book.Error != "" {
			why = book.Error
		}
		res.addf("payout book not checked: %s", why)
		return
	}
	rep.BookPayouts = len(book.Payouts)
	byName := map[string]WithdrawalFinal{}
	for _, ref := range sortedMapKeys(listed) {
		w := listed[ref]
		name := SimBookName(ref)
		byName[name] = w
		p, ok := book.Payouts[name]
		switch {
		case w.State == WithdrawalPaid && !ok:
			res.Verdict = Violation
			res.addf("withdrawal %s is paid but the rail's book has no payout for it", ref)
		case w.State == WithdrawalPaid && p.Status != WithdrawalPaid:
			res.Verdict = Violation
			res.addf("withdrawal %s is paid but the rail's book says %s (%s)", ref, p.Status, p.Reason)
		case w.State == WithdrawalReturned && !ok:
			res.Verdict = Violation
			res.addf("withdrawal %s is returned but the rail's book has no outcome for it", ref)
		case w.State == WithdrawalReturned && p.Status != WithdrawalReturned:
			res.Verdict = Violation
			res.addf("withdrawal %s is returned (credited back) but the rail's book says %s: paid and refunded", ref, p.Status)
		case w.State == WithdrawalReturned && p.Reason != "" && len(p.Reason) <= maxRailReasonBytes && w.Reason != p.Reason:
			res.Verdict = Violation
			res.addf("withdrawal %s is returned with reason %q, the rail's book says %q", ref, w.Reason, p.Reason)
		}
	}
	for _, name := range sortedMapKeys(book.Payouts) {
		p := book.Payouts[name]
		w, ok := byName[name]
		switch {
		case !ok && complete:
			res.Verdict = Violation
			res.addf("the rail's book has a %s payout (%s) that no listed withdrawal accounts for: paid twice or lost", p.Status, name)
		case !ok:
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("the rail's book has a %s payout (%s) no read listing shows (some withdrawer was not read)", p.Status, name)
		case w.State == WithdrawalRequested || w.State == WithdrawalQueued:
			v := Unknown
			if settled {
				v = Violation
			}
			res.Verdict = worse(res.Verdict, v)
			res.addf("the rail's book says %s for withdrawal %s, still listed %s", p.Status, w.RailRef, w.State)
		}
	}
}

// checkPaidOut compares the ledger's paid-out and pending withdrawals at
// the last index every node was seen at with the listings; judged only
// when every withdrawer was read and settled.
func checkPaidOut(res *Result, ledgers map[string][]LedgerSample, paidMsat int64, judge bool) {
	if len(ledgers) == 0 {
		return
	}
	if !judge {
		res.addf("ledger's paid-out not compared: not every withdrawer was read and settled")
		return
	}
	byIndex := map[uint64]map[string]LedgerSample{}
	for node, ss := range ledgers {
		for _, s := range ss {
			if byIndex[s.Applied] == nil {
				byIndex[s.Applied] = map[string]LedgerSample{}
			}
			byIndex[s.Applied][node] = s
		}
	}
	var at uint64
	found := false
	for i, m := range byIndex {
		if len(m) == len(ledgers) && (!found || i > at) {
			at, found = i, true
		}
	}
	if !found {
		res.addf("ledger's paid-out not compared: no index seen on every node")
		return
	}
	s := byIndex[at][sortedMapKeys(byIndex[at])[0]]
	if s.PaidMsat != paidMsat || s.PendingWithdrawalsMsat != 0 {
		res.Verdict = Violation
		res.addf("index %d: the ledger paid out %d msat with %d msat pending; the listed paid withdrawals sum to %d msat with none open",
			at, s.PaidMsat, s.PendingWithdrawalsMsat, paidMsat)
		return
	}
	res.addf("index %d: the ledger's paid-out %d msat is the listed paid withdrawals' sum", at, paidMsat)
}
