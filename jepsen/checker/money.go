package checker

import (
	"sort"

	"github.com/perpd/perpd/jepsen/history"
)

// MoneyReport is what the conservation checker measured.
type MoneyReport struct {
	// DriftMsat is the sum over accounts of expected minus observed free
	// balance, where expected counts every applied grant.
	DriftMsat   int64 `json:"driftMsat"`
	HashesEqual bool  `json:"hashesEqual"`
	// CommonIndexes is how many applied indexes every node was seen at.
	CommonIndexes int `json:"commonIndexes"`
}

// Money checks conservation from outside: each account's final free
// balance equals the sum of its listed deposits and lies within what the acknowledged and unsettled grants allow; and
// every node reports the same state hash at the same applied index.
// Traders are left to Trading, which adds their fills, and withdrawers
// to Withdrawals.
func Money(ops []history.Op, final *Final) (Result, MoneyReport) {
	res := Result{Name: "money", Verdict: Valid}
	var rep MoneyReport
	writes := Writes(ops, history.FFaucet)
	grant := grantMsat(writes)
	ids, perAcct := byAccount(writes)
	for _, a := range ids {
		if final.Traders[a] != nil || final.Withdrawers[a] != nil {
			// Fills move traders' balances (checker.Trading), withdrawals
			// withdrawers' (checker.Withdrawals).
			continue
		}
		var applied int64
		open := int64(0)
		for _, w := range perAcct[a] {
			switch w.Outcome {
			case Applied:
				applied += w.Msat
			case Indeterminate:
				open++
			}
		}
		fin := final.Accounts[a]
		if fin == nil || fin.FreeMsat == nil {
			res.Verdict = worse(res.Verdict, Unknown)
			res.addf("%s: final balance unreadable", a)
			continue
		}
		free := *fin.FreeMsat
		rep.DriftMsat += applied - free
		if free < applied || free > applied+open*grant {
			res.Verdict = Violation
			res.addf("%s: free balance %d msat, acknowledged grants credit %d msat (+ up to %d unsettled of %d)",
				a, free, applied, open, grant)
		}
		// Past the history's bound the grants themselves were just
		// compared with the balance; below it every deposit is listed.
		if credit, known, trimmed := depositCredit(fin, perAcct[a]); known && !trimmed && credit != free {
			res.Verdict = Violation
			res.addf("%s: free balance %d msat but listed deposits credit %d msat", a, free, credit)
		}
	}
	hashRes, equal, common := Hashes(final.Samples)
	rep.HashesEqual, rep.CommonIndexes = equal, common
	res.Verdict = worse(res.Verdict, hashRes.Verdict)
	res.Details = append(res.Details, hashRes.Details...)
	return res, rep
}

// Hashes compares state hashes across nodes at every applied index more
// than one node was sampled at. It needs at least one index every node was
// seen at: otherwise the replicas never converged while sampled.
func Hashes(samples map[string][]StateSample) (Result, bool, int) {
	res := Result{Name: "state-hashes", Verdict: Valid}
	if len(samples) == 0 {
		res.Verdict = Unknown
		res.addf("no state samples")
		return res, false, 0
	}
	byIndex := map[uint64]map[string]string{} // index -> node -> hash
	for node, ss := range samples {
		for _, s := range ss {
			if byIndex[s.Applied] == nil {
				byIndex[s.Applied] = map[string]string{}
			}
			if prev, ok := byIndex[s.Applied][node]; ok && prev != s.Hash {
				res.Verdict = Violation
				res.addf("node %s reported two hashes at index %d", node, s.Applied)
			}
			byIndex[s.Applied][node] = s.Hash
		}
	}
	var idx []uint64
	for i := range byIndex {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	equal, common := true, 0
	for _, i := range idx {
		hashes := byIndex[i]
		if len(hashes) == len(samples) {
			common++
		}
		var first, firstNode string
		for _, n := range sortedKeys(hashes) {
			h := hashes[n]
			if first == "" {
				first, firstNode = h, n
			} else if h != first {
				equal = false
				res.Verdict = Violation
				res.addf("index %d: %s has hash %.12s, %s has %.12s", i, firstNode, first, n, h)
			}
		}
	}
	if common == 0 {
		equal = false
		res.Verdict = worse(res.Verdict, Violation)
		res.addf("replicas never reported the same applied index while sampled: not converged")
	}
	return res, equal, common
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
