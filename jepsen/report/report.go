package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
)

// Summary is the run in numbers.
type Summary struct {
	Ops           int `json:"ops"`
	Acknowledged  int `json:"acknowledged"`
	Faults        int `json:"faults"`
	Lost          int `json:"lostWrites"`
	Duplicates    int `json:"duplicateApplies"`
	Unresolved    int `json:"unresolvedWrites"`
	Orders        int `json:"orders"`        // acknowledged order placements
	Fills         int `json:"fills"`         // fills listed at the end
	SwitchCancels int `json:"switchCancels"` // orders canceled by cancel-all-after
	Arms          int `json:"arms"`          // acknowledged cancel-all-after arms
	Triggers      int `json:"triggers"`      // acknowledged trigger and bracket placements
	TriggerFills  int `json:"triggerFills"`  // fills of triggers and bracket legs
	Liquidations  int `json:"liquidations"`  // liquidations listed at the end
	ADLFills      int `json:"adlFills"`      // fills auto-deleveraging made
	FundingFlows  int `json:"fundingFlows"`  // funding flows listed at the end
	Crashes       int `json:"crashes"`       // price crashes and spikes pinned
	// Withdrawals counts acknowledged withdrawal requests; WithdrawalsPaid
	// and WithdrawalsReturned those listed paid and returned at the end.
	Withdrawals         int                       `json:"withdrawals"`
	WithdrawalsPaid     int                       `json:"withdrawalsPaid"`
	WithdrawalsReturned int                       `json:"withdrawalsReturned"`
	WithdrawalReport    *checker.WithdrawalReport `json:"withdrawalReport,omitempty"`
	Ledger              checker.Verdict           `json:"ledger"`        // the venue's books on every node
	InsuranceMsat       int64                     `json:"insuranceMsat"` // the insurance fund at the end
	Linearizable        checker.Verdict           `json:"linearizable"`
	DriftMsat           int64                     `json:"msatDrift"`
	HashesEqual         bool                      `json:"hashesEqual"`
	Unavailable         time.Duration             `json:"longestUnavailabilityNs"`
	Results             []checker.Result          `json:"results"`
	Problems            []string                  `json:"problems,omitempty"`
	Dir                 string                    `json:"dir"`
	Nemeses             []string                  `json:"nemeses"`
	Nodes               int                       `json:"nodes"`
	Duration            time.Duration             `json:"durationNs"`
	Visualizations      []string                  `json:"visualizations,omitempty"`
}

// Failed reports whether any checker found a violation or the run itself
// went wrong (Problems).
func (s *Summary) Failed() bool {
	if len(s.Problems) > 0 {
		return true
	}
	for _, r := range s.Results {
		if r.Verdict == checker.Violation {
			return true
		}
	}
	return false
}

// Line is the one-line summary that ends every run.
func (s *Summary) Line() string {
	verdict := "PASS"
	if s.Failed() {
		verdict = "FAIL"
	}
	ledger := s.Ledger
	if ledger == "" {
		ledger = checker.Skipped
	}
	return fmt.Sprintf("jepsen %s: ops=%d acknowledged=%d faults=%d lost-writes=%d duplicate-applies=%d linearizable=%s msat-drift=%d hashes-equal=%t orders=%d fills=%d caa=%d trig=%d trigfills=%d crashes=%d liq=%d adl=%d fund=%d wd=%d paid=%d ret=%d ledger=%s longest-unavailability=%v (nodes=%d nemesis=%s time=%v report=%s)",
		verdict, s.Ops, s.Acknowledged, s.Faults, s.Lost, s.Duplicates, s.Linearizable, s.DriftMsat, s.HashesEqual,
		s.Orders, s.Fills, s.SwitchCancels, s.Triggers, s.TriggerFills, s.Crashes, s.Liquidations, s.ADLFills, s.FundingFlows, s.Withdrawals, s.WithdrawalsPaid, s.WithdrawalsReturned, ledger,
		s.Unavailable.Round(time.Millisecond), s.Nodes, strings.Join(s.Nemeses, ","), s.Duration.Round(time.Second), s.Dir)
}

// Write stores the summary, the results and the final state in dir.
func Write(dir string, s *Summary, final *checker.Final) error {
	if err := writeJSON(filepath.Join(dir, "results.json"), s); err != nil {
		return err
	}
	if final != nil {
		if err := writeJSON(filepath.Join(dir, "final.json"), final); err != nil {
			return err
		}
	}
	var b strings.Builder
	for _, r := range s.Results {
		fmt.Fprintf(&b, "%-16s %s\n", r.Name, r.Verdict)
		for _, d := range r.Details {
			fmt.Fprintf(&b, "    %s\n", d)
		}
	}
	for _, p := range s.Problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	fmt.Fprintln(&b, s.Line())
	return os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(b.String()), 0o644)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
