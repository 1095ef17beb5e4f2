package checker

import (
	"fmt"
	"sort"

	"github.com/perpd/perpd/jepsen/history"
)

// The venue's books (GET /admin/ledger), sampled on every node after the
// run until every node was seen at the same applied index. Each reading
// comes from one node's state at one index, so:
//
//   - the node's own conservation check (every balance adds up to credited
//     - paid, no account but the house negative) must hold in every
//     reading;
//   - the books it shows must add up from outside too: house + insurance +
//     fee revenue + pending withdrawals + faucet + the programmes'
//     payables + USDx's reserve, yield escrow and hedge + traders =
//     credited - paid (those are all the ledger's accounts);
//   - nodes at the same index must show the same books, field by field;
//   - and at least one index must be seen on every node.
//
// When every account was read in full, every trader settled and no write
// of the run has an unknown outcome (nothing of theirs changes after the
// final reads), the accounts' total at the
// last common index must also equal what the accounts list: free balances
// of the register accounts plus each trader's equity (free + reserved +
// position margin) plus each withdrawer's free and reserved balance
// (when every withdrawer had no open withdrawal left). House and insurance
// are reported, not judged.

// LedgerSample is one GET /admin/ledger reading.
type LedgerSample struct {
	Applied                uint64 `json:"applied"`
	HouseMsat              int64  `json:"houseMsat"`
	InsuranceMsat          int64  `json:"insuranceMsat"`
	FeeRevenueMsat         int64  `json:"feeRevenueMsat"`
	PendingWithdrawalsMsat int64  `json:"pendingWithdrawalsMsat"`
	FaucetMsat             int64  `json:"faucetMsat"`
	ReferralPayableMsat    int64  `json:"referralPayableMsat"`
	PromoterPayableMsat    int64  `json:"promoterPayableMsat"`
	USDxReserveMsat        int64  `json:"usdxReserveMsat"`
	USDxYieldMsat          int64  `json:"usdxYieldMsat"`
	USDxHedgeMsat          int64  `json:"usdxHedgeMsat"`
	TradersMsat            int64  `json:"tradersMsat"`
	CreditedMsat           int64  `json:"creditedMsat"`
	PaidMsat               int64  `json:"paidMsat"`
	OK                     bool   `json:"ok"`
	Error                  string `json:"error,omitempty"`
}

// books is the reading without its index, for comparing nodes.
func (s LedgerSample) books() LedgerSample { s.Applied = 0; return s }

// LedgerReport is what the ledger checker saw.
type LedgerReport struct {
	// CommonIndexes counts the applied indexes every node was seen at;
	// Index is the highest of them and House, Insurance and Accounts the
	// books there.
	CommonIndexes int    `json:"commonIndexes"`
	Index         uint64 `json:"index"`
	HouseMsat     int64  `json:"houseMsat"`
	InsuranceMsat int64  `json:"insuranceMsat"`
	AccountsMsat  int64  `json:"accountsMsat"`
	// AccountsCompared is set when the accounts' total was compared with
	// what the accounts list.
	AccountsCompared bool `json:"accountsCompared"`
}

// Ledger judges the ledger readings of nodes (node id -> readings).
func Ledger(ops []history.Op, samples map[string][]LedgerSample, nodes []string, final *Final) (Result, LedgerReport) {
	res := Result{Name: "ledger", Verdict: Valid}
	var rep LedgerReport
	byIndex := map[uint64]map[string]LedgerSample{}
	for _, node := range nodes {
		for _, s := range samples[node] {
			if !s.OK {
				res.Verdict = Violation
				res.addf("%s at index %d: conservation check failed: %s", node, s.Applied, s.Error)
			}
			sum := s.HouseMsat + s.InsuranceMsat + s.FeeRevenueMsat + s.PendingWithdrawalsMsat + s.FaucetMsat +
				s.ReferralPayableMsat + s.PromoterPayableMsat + s.USDxReserveMsat + s.USDxYieldMsat + s.USDxHedgeMsat + s.TradersMsat
			if sum != s.CreditedMsat-s.PaidMsat {
				res.Verdict = Violation
				res.addf("%s at index %d: the books add up to %d msat, credited %d - paid %d is %d",
					node, s.Applied, sum, s.CreditedMsat, s.PaidMsat, s.CreditedMsat-s.PaidMsat)
			}
			if byIndex[s.Applied] == nil {
				byIndex[s.Applied] = map[string]LedgerSample{}
			}
			byIndex[s.Applied][node] = s
		}
	}
	var idx []uint64
	for i := range byIndex {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	for _, i := range idx {
		at := byIndex[i]
		names := sortedMapKeys(at)
		for _, n := range names[1:] {
			if at[n].books() != at[names[0]].books() {
				res.Verdict = Violation
				res.addf("index %d: %s shows %+v, %s shows %+v", i, names[0], at[names[0]].books(), n, at[n].books())
			}
		}
		if len(at) == len(nodes) {
			rep.CommonIndexes++
			s := at[names[0]]
			rep.Index, rep.HouseMsat, rep.InsuranceMsat, rep.AccountsMsat = i, s.HouseMsat, s.InsuranceMsat, s.TradersMsat
		}
	}
	if rep.CommonIndexes == 0 {
		res.Verdict = Violation
		res.addf("the nodes' books were never read at the same applied index (%d nodes)", len(nodes))
		return res, rep
	}
	res.addf("%d indexes read on all %d nodes; at index %d: house %d msat, insurance fund %d msat, accounts %d msat",
		rep.CommonIndexes, len(nodes), rep.Index, rep.HouseMsat, rep.InsuranceMsat, rep.AccountsMsat)
	if listed, why := listedTotal(ops, final); why != "" {
		res.addf("accounts' total not compared with what the accounts list: %s", why)
	} else {
		rep.AccountsCompared = true
		if listed != rep.AccountsMsat {
			res.Verdict = Violation
			res.addf("index %d: the ledger's accounts hold %d msat, the accounts list %d msat", rep.Index, rep.AccountsMsat, listed)
		} else {
			res.addf("the accounts list the same %d msat (register balances, traders' equity and withdrawers' balances)", listed)
		}
	}
	return res, rep
}

// listedTotal is what every account lists at the end: register accounts'
// free balances and traders' equity on the first node. why says what
// prevents the sum.
func listedTotal(ops []history.Op, final *Final) (int64, string) {
	if final == nil {
		return 0, "no final reads"
	}
	for _, w := range Writes(ops, history.FFaucet, history.FOrder, history.FCancel, history.FCancelAfter, history.FWithdraw) {
		if w.Outcome == Indeterminate {
			return 0, fmt.Sprintf("%s op #%d has an unknown outcome", w.Invoke.F, w.Invoke.ID)
		}
	}
	var total int64
	for _, a := range sortedMapKeys(final.Accounts) {
		if tf := final.Traders[a]; tf != nil {
			if !tf.Settled {
				return 0, fmt.Sprintf("trader %s was not settled", a)
			}
			names := sortedMapKeys(tf.Nodes)
			if len(names) == 0 {
				return 0, fmt.Sprintf("trader %s was not read", a)
			}
			v := tf.Nodes[names[0]]
			total += v.FreeMsat + v.ReservedMsat
			for _, p := range v.Positions {
				total += p.MarginMsat
			}
			continue
		}
		if wf := final.Withdrawers[a]; wf != nil {
			// Open withdrawals sit in the ledger's pending withdrawals,
			// not in the account: only a settled withdrawer is counted.
			if !wf.Settled {
				return 0, fmt.Sprintf("withdrawer %s still had open withdrawals", a)
			}
			names := sortedMapKeys(wf.Nodes)
			if len(names) == 0 {
				return 0, fmt.Sprintf("withdrawer %s was not read", a)
			}
			v := wf.Nodes[names[0]]
			total += v.FreeMsat + v.ReservedMsat
			continue
		}
		af := final.Accounts[a]
		if af.FreeMsat == nil {
			return 0, fmt.Sprintf("account %s's balance was not read", a)
		}
		total += *af.FreeMsat
	}
	return total, ""
}
