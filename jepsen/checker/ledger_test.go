package checker

import (
	"strings"
	"testing"
)

// books is a consistent reading at index i: the trading fixture's trader
// holds grant - 190 msat, the house 50, fees 140, the insurance fund 0,
// the faucet the rest of what was credited.
func books(i uint64) LedgerSample {
	return LedgerSample{Applied: i, HouseMsat: 50, FeeRevenueMsat: 140, FaucetMsat: 5_000,
		TradersMsat: grant - 190, CreditedMsat: grant + 5_000, OK: true}
}

// ledgerFixture: n1 and n2 both read at index 10, n1 also at 11 (after a
// tick that moved nothing), with the trading fixture's final state.
func ledgerFixture() (*tradingFixture, map[string][]LedgerSample) {
	f := newTradingFixture()
	f.final.Traders["t"].Settled = true
	return f, map[string][]LedgerSample{"n1": {books(10), books(11)}, "n2": {books(10)}}
}

func TestLedgerAcceptsAgreeingBooks(t *testing.T) {
	f, s := ledgerFixture()
	res, rep := Ledger(f.ops, s, []string{"n1", "n2"}, f.final)
	if res.Verdict != Valid || rep.CommonIndexes != 1 || rep.Index != 10 || !rep.AccountsCompared || rep.AccountsMsat != grant-190 {
		t.Fatalf("verdict %s, report %+v: %v", res.Verdict, rep, res.Details)
	}
}

func TestLedgerCatchesPlantedBugs(t *testing.T) {
	cases := []struct {
		name  string
		plant func(s map[string][]LedgerSample)
		want  string
	}{
		{"a node's conservation check fails", func(s map[string][]LedgerSample) {
			s["n2"][0].OK, s["n2"][0].Error = false, "ledger: venue:insurance is negative (-5)"
		}, "n2 at index 10: conservation check failed: ledger: venue:insurance is negative"},
		{"books that do not add up", func(s map[string][]LedgerSample) {
			for _, node := range []string{"n1", "n2"} {
				s[node][0].InsuranceMsat += 7 // the check said ok anyway
			}
		}, "n1 at index 10: the books add up to"},
		{"two nodes at one index disagree", func(s map[string][]LedgerSample) {
			s["n2"][0].HouseMsat, s["n2"][0].InsuranceMsat = 40, 10
		}, "index 10: n1 shows"},
		{"never read at the same index", func(s map[string][]LedgerSample) {
			s["n2"][0].Applied = 12
		}, "never read at the same applied index"},
		{"the accounts hold more than they list", func(s map[string][]LedgerSample) {
			for _, node := range []string{"n1", "n2"} {
				s[node][0].TradersMsat += 9
				s[node][0].HouseMsat -= 9
			}
		}, "the ledger's accounts hold"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, s := ledgerFixture()
			c.plant(s)
			res, _ := Ledger(f.ops, s, []string{"n1", "n2"}, f.final)
			if res.Verdict != Violation || !strings.Contains(strings.Join(res.Details, "\n"), c.want) {
				t.Fatalf("verdict %s, want a violation mentioning %q: %v", res.Verdict, c.want, res.Details)
			}
		})
	}
}

// Books that moved between indexes, and accounts that may still move, are
// not held against each other.
func TestLedgerClaimsNothingUnproven(t *testing.T) {
	f, s := ledgerFixture()
	s["n1"][1].HouseMsat, s["n1"][1].InsuranceMsat = 40, 10 // index 11, n1 only
	f.final.Traders["t"].Settled = false
	f.final.Traders["t"].Nodes["n1"].FreeMsat -= 3 // moved after the ledger's index
	res, rep := Ledger(f.ops, s, []string{"n1", "n2"}, f.final)
	if res.Verdict != Valid || rep.AccountsCompared {
		t.Fatalf("verdict %s, report %+v: %v", res.Verdict, rep, res.Details)
	}
}
