package checker

import (
	"strings"

	"github.com/perpd/perpd/jepsen/history"
)

// WriteCounts sums what the durability checker found.
type WriteCounts struct {
	Acknowledged int `json:"acknowledged"`
	Lost         int `json:"lost"`
	Duplicates   int `json:"duplicates"`
	Unresolved   int `json:"unresolved"`
}

// LostWrites checks that every applied deposit and minted key is present
// in the final listings exactly once, and nothing that certainly failed is.
//
// Deposits are matched by count, since a faucet grant's railRef is chosen
// by the state machine and not returned: an account with A applied grants
// and U unsettled ones must list between A and A+U distinct deposits, with
// no seq or railRef listed twice; a listing at DepositsKept (the node
// dropped its oldest records) leaves the count to the balance checkers
// (depositCredit). Keys are matched exactly: each mint is
// labelled with its idempotency key.
func LostWrites(ops []history.Op, final *Final) (Result, WriteCounts) {
	res := Result{Name: "lost-writes", Verdict: Valid}
	var c WriteCounts
	ids, deposits := byAccount(Writes(ops, history.FFaucet))
	for _, a := range ids {
		checkDeposits(&res, &c, a, deposits[a], final.Accounts[a])
	}
	ids, mints := byAccount(Writes(ops, history.FMint))
	for _, a := range ids {
		checkKeys(&res, &c, a, mints[a], final.Accounts[a])
	}
	return res, c
}

func checkDeposits(res *Result, c *WriteCounts, acct string, ws []Write, fin *AccountFinal) {
	applied, open := 0, 0
	for _, w := range ws {
		switch w.Outcome {
		case Applied:
			applied++
		case Indeterminate:
			open++
		}
	}
	c.Acknowledged += applied
	c.Unresolved += open
	if fin == nil || !fin.DepositsComplete {
		res.Verdict = worse(res.Verdict, Unknown)
		res.addf("%s: deposits could not be listed in full; %d applied grants unchecked", acct, applied)
		return
	}
	seqs, refs := map[string]int{}, map[string]int{}
	dups := 0
	for _, d := range fin.Deposits {
		seqs[d.Seq]++
		refs[d.RailRef]++
		if seqs[d.Seq] > 1 || refs[d.RailRef] > 1 {
			dups++
			res.addf("%s: deposit seq %s railRef %s listed more than once", acct, d.Seq, d.RailRef)
		}
	}
	listed := len(seqs)
	switch {
	case listed > DepositsKept:
		res.Verdict = Violation
		res.addf("%s: %d deposits listed, past the %d a node keeps", acct, listed, DepositsKept)
	case listed < applied && listed == DepositsKept:
		// The node dropped the oldest records: the listing cannot count
		// the grants, the account's balance does (depositCredit).
		res.addf("%s: %d grants acknowledged, the history keeps the newest %d deposits: the grants are judged by the balance",
			acct, applied, DepositsKept)
	case listed < applied:
		c.Lost += applied - listed
		res.Verdict = Violation
		res.addf("%s: %d grants acknowledged, only %d deposits listed: %d lost", acct, applied, listed, applied-listed)
	}
	if listed > applied+open {
		dups += listed - applied - open
		res.addf("%s: %d deposits listed for %d applied and %d unsettled grants: %d applied twice or from nowhere",
			acct, listed, applied, open, listed-applied-open)
	}
	if dups > 0 {
		c.Duplicates += dups
		res.Verdict = Violation
	}
}

// DepositsKept is how many deposit records a node keeps per account
// (fsm/funds.MaxDepositsPerAccount): with that many listed, older ones may
// be gone, and the listing no longer accounts for every grant.
const DepositsKept = 500

// depositCredit is what an account's deposits credited, for the checkers
// that compare it with a balance: the sum of its listed deposits, or, once
// the listing is at DepositsKept (the oldest records dropped), the sum its
// acknowledged grants answered, known only when none of the account's
// grants is unsettled (ws are its faucet writes). trimmed says which.
func depositCredit(af *AccountFinal, ws []Write) (credit int64, known, trimmed bool) {
	if af == nil || !af.DepositsComplete {
		return 0, false, false
	}
	if len(af.Deposits) < DepositsKept {
		for _, d := range af.Deposits {
			credit += d.CreditedMsat
		}
		return credit, true, false
	}
	for _, w := range ws {
		switch w.Outcome {
		case Applied:
			credit += w.Msat
		case Indeterminate:
			return 0, false, true
		}
	}
	return credit, true, true
}

func checkKeys(res *Result, c *WriteCounts, acct string, ws []Write, fin *AccountFinal) {
	if fin == nil || !fin.SessionsComplete {
		res.Verdict = worse(res.Verdict, Unknown)
		res.addf("%s: sessions could not be listed; %d mints unchecked", acct, len(ws))
		return
	}
	byLabel := map[string][]Session{}
	for _, s := range fin.Sessions {
		byLabel[s.Label] = append(byLabel[s.Label], s)
	}
	mine := map[string]bool{}
	for _, w := range ws {
		label := w.Invoke.IdemKey
		mine[label] = true
		got := byLabel[label]
		switch w.Outcome {
		case Applied:
			c.Acknowledged++
			if len(got) == 0 {
				c.Lost++
				res.Verdict = Violation
				res.addf("%s: minted key %s (op #%d) is missing", acct, w.KeyID, w.Invoke.ID)
			} else if w.KeyID != "" && got[0].KeyID != w.KeyID {
				res.Verdict = Violation
				c.Lost++
				res.addf("%s: op #%d minted key %s but the listing shows %s under its label", acct, w.Invoke.ID, w.KeyID, got[0].KeyID)
			}
			if len(got) > 1 {
				c.Duplicates += len(got) - 1
				res.Verdict = Violation
				res.addf("%s: mint op #%d applied %d times", acct, w.Invoke.ID, len(got))
			}
		case NotApplied:
			if len(got) > 0 {
				c.Duplicates += len(got)
				res.Verdict = Violation
				res.addf("%s: mint op #%d failed but its key is listed", acct, w.Invoke.ID)
			}
		default:
			c.Unresolved++
			if len(got) > 1 {
				c.Duplicates += len(got) - 1
				res.Verdict = Violation
				res.addf("%s: unsettled mint op #%d applied %d times", acct, w.Invoke.ID, len(got))
			}
		}
	}
	for label, got := range byLabel {
		if strings.HasPrefix(label, "jepsen-mint-") && !mine[label] {
			c.Duplicates += len(got)
			res.Verdict = Violation
			res.addf("%s: key labelled %s was never minted by this run", acct, label)
		}
	}
}
