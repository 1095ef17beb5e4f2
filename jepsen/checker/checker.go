package checker

import (
	"fmt"
	"sort"

	"github.com/perpd/perpd/jepsen/history"
)

// Verdict is a checker's conclusion.
type Verdict string

// Verdicts. Unknown means the checker could not decide (a timeout, a final
// read that failed); it is reported but is not a violation.
const (
	Valid     Verdict = "ok"
	Violation Verdict = "violation"
	Unknown   Verdict = "unknown"
	Skipped   Verdict = "skipped"
)

// Result is one checker's report.
type Result struct {
	Name    string   `json:"name"`
	Verdict Verdict  `json:"verdict"`
	Details []string `json:"details,omitempty"`
}

func (r *Result) addf(format string, args ...any) {
	const maxDetails = 200 // a broken run must not write a gigabyte report
	if len(r.Details) < maxDetails {
		r.Details = append(r.Details, fmt.Sprintf(format, args...))
	} else if len(r.Details) == maxDetails {
		r.Details = append(r.Details, "... more details omitted")
	}
}

// worse keeps the more serious of two verdicts.
func worse(a, b Verdict) Verdict {
	rank := map[Verdict]int{Skipped: 0, Valid: 1, Unknown: 2, Violation: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// Final is what the harness read from the cluster after healing.
type Final struct {
	// Accounts by id.
	Accounts map[string]*AccountFinal `json:"accounts"`
	// Samples are (applied index, state hash) readings per node id, taken
	// repeatedly while the cluster settled.
	Samples map[string][]StateSample `json:"samples"`
	// Traders are the trading accounts' end states, by account id (their
	// balances and deposits are in Accounts too).
	Traders map[string]*TraderFinal `json:"traders,omitempty"`
	// Ledgers are GET /admin/ledger readings per node id, taken like
	// Samples (nil when the build has no such route).
	Ledgers map[string][]LedgerSample `json:"ledgers,omitempty"`
	// Withdrawers are the withdrawing accounts' end states, by account id
	// (their deposits are in Accounts too); SimBook is the simulated
	// rail's shared payout book (withdrawals.go).
	Withdrawers map[string]*WithdrawerFinal `json:"withdrawers,omitempty"`
	SimBook     *SimBook                    `json:"simBook,omitempty"`
	// MarketFunding is each market's funding history (GET
	// /v1/markets/{id}/funding, oldest first) by node id, then market id
	// (logtime.go).
	MarketFunding map[string]map[string][]FundingEntry `json:"marketFunding,omitempty"`
	// LogTimeOriginMs is the nodes' base calendar (Unix ms, the run's
	// --clock-offset included) at the history's time 0, which log time
	// must keep up with (logtime.go); 0: unknown, not checked.
	LogTimeOriginMs int64 `json:"logTimeOriginMs,omitempty"`
}

// AccountFinal is one account's end state.
type AccountFinal struct {
	FreeMsat *int64    `json:"freeMsat,omitempty"`
	Deposits []Deposit `json:"deposits"`
	Sessions []Session `json:"sessions"`
	// Complete is false when a listing could not be read in full.
	DepositsComplete bool     `json:"depositsComplete"`
	SessionsComplete bool     `json:"sessionsComplete"`
	Errors           []string `json:"errors,omitempty"`
}

// Deposit is one listed deposit.
type Deposit struct {
	Seq          string `json:"seq"`
	RailRef      string `json:"railRef"`
	CreditedMsat int64  `json:"creditedMsat"`
	// TsMs is the log time it was credited at (0: not read).
	TsMs int64 `json:"tsMs,omitempty"`
}

// Session is one listed key.
type Session struct {
	KeyID string `json:"keyId"`
	Label string `json:"label"`
	// CreatedTsMs is the log time it was minted at (0: not read).
	CreatedTsMs int64 `json:"createdTsMs,omitempty"`
}

// StateSample is one /admin/state reading.
type StateSample struct {
	Applied uint64 `json:"applied"`
	Hash    string `json:"hash"`
}

// Outcome is what became of a write, once retries are taken into account.
type Outcome int

// Write outcomes.
const (
	NotApplied Outcome = iota
	Applied
	Indeterminate
)

// Write is one client write (faucet grant, key mint) and its fate.
type Write struct {
	Invoke  history.Op
	Outcome Outcome
	// Msat is the credited amount (faucet) when known.
	Msat  int64
	KeyID string
	// RailRef is what an acknowledged withdrawal answered.
	RailRef string
	// OrderStatus is what an acknowledged order or cancel answered.
	OrderStatus string
	// Armed and DeadlineTsMs are what an acknowledged cancel-all-after
	// call answered.
	Armed        *bool
	DeadlineTsMs *int64
	// CallNs is the invocation time; ReturnNs the earliest time the write
	// is known to have taken effect by (its ack, or the ack of the retry
	// that settled it). Indeterminate writes have no ReturnNs.
	CallNs, ReturnNs int64
	// Resolved is true when a retry settled an unknown outcome.
	Resolved bool
}

// inconclusiveCodes are refusals a node gives before looking at the
// idempotency key (metering, overload, and unauthorized from a replica
// that has not applied the account's signup yet, such as a member
// re-joining from a snapshot): they say nothing about whether an earlier
// attempt with that key was applied.
var inconclusiveCodes = map[string]bool{"rate_limited": true, "unavailable": true, "unauthorized": true, "": true}

// conclusiveFail reports whether a failed attempt proves that nothing was
// applied under its idempotency key.
func conclusiveFail(op *history.Op) bool {
	return op.Type == history.Fail && op.Status >= 400 && op.Status < 500 && !inconclusiveCodes[op.Code]
}

// Settles reports whether a retry's completion settles the write it
// retried: an acknowledgement (the original answer or a first apply) or a
// refusal the state machine gave after looking at the idempotency key.
//
// An acknowledgement settles whenever it came: the state machine stores a
// success under the key, so whichever of the original and its retries is
// applied first takes effect, once, and every later one (the original
// still in flight included) is answered the stored result. The effect
// thus happened between the original's invocation and the retry's answer.
// A refusal is not stored (fsm/machine.go), so it proves nothing about an
// original that may still be in flight: it settles only a retry sent after
// the faults healed (the harness's final resolution), never one sent
// while the clients ran (Op.InRun).
func Settles(done history.Op) bool {
	return done.Type == history.OK || (!done.InRun && conclusiveFail(&done))
}

// Writes settles every write of the functions fs: a write that failed
// conclusively was not applied, an acknowledged one was, and one with an
// unknown outcome takes the outcome of the first retry that settled it.
func Writes(ops []history.Op, fs ...string) []Write {
	want := map[string]bool{}
	for _, f := range fs {
		want[f] = true
	}
	pairs := history.Pairs(ops)
	settled := map[int]history.Pair{}
	for _, p := range pairs {
		r := p.Invoke.Resolves
		if r == 0 || p.Done == nil {
			continue
		}
		if _, have := settled[r]; have {
			continue
		}
		if Settles(*p.Done) {
			settled[r] = p
		}
	}
	var out []Write
	for _, p := range pairs {
		if !want[p.Invoke.F] || p.Invoke.Resolves != 0 {
			continue
		}
		w := Write{Invoke: p.Invoke, CallNs: p.Invoke.TimeNs}
		switch {
		case p.Done != nil && p.Done.Type == history.OK:
			w.Outcome, w.ReturnNs = Applied, p.Done.TimeNs
			w.fill(p.Done)
		case p.Done != nil && p.Done.Type == history.Fail:
			w.Outcome = NotApplied
		default:
			w.Outcome = Indeterminate
			if s, ok := settled[p.Invoke.ID]; ok {
				w.Resolved = true
				if s.Done.Type == history.OK {
					w.Outcome, w.ReturnNs = Applied, s.Done.TimeNs
					w.fill(s.Done)
				} else {
					w.Outcome = NotApplied
				}
			}
		}
		out = append(out, w)
	}
	return out
}

func (w *Write) fill(done *history.Op) {
	if done.Msat != nil {
		w.Msat = *done.Msat
	}
	w.KeyID = done.KeyID
	w.RailRef = done.RailRef
	w.OrderStatus = done.OrderStatus
	w.Armed, w.DeadlineTsMs = done.Armed, done.DeadlineTsMs
}

// byAccount groups writes by account, accounts sorted.
func byAccount(ws []Write) ([]string, map[string][]Write) {
	m := map[string][]Write{}
	for _, w := range ws {
		m[w.Invoke.Account] = append(m[w.Invoke.Account], w)
	}
	var ids []string
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, m
}

// grantMsat is the most common credited amount, used for faucet writes
// whose amount is unknown (the faucet grants a fixed amount). 0 when none
// is known.
func grantMsat(ws []Write) int64 {
	count := map[int64]int{}
	best, bestN := int64(0), 0
	for _, w := range ws {
		if w.Outcome == Applied && w.Msat > 0 {
			count[w.Msat]++
			if n := count[w.Msat]; n > bestN || (n == bestN && w.Msat < best) {
				best, bestN = w.Msat, n
			}
		}
	}
	return best
}
