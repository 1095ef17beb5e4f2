package checker

import (
	"sort"
	"strings"
	"time"

	"github.com/perpd/perpd/jepsen/history"
)

// LivenessReport is what the liveness checker measured.
type LivenessReport struct {
	// LongestUnavailable is the longest stretch without an acknowledged
	// write while the workload ran.
	LongestUnavailable time.Duration `json:"longestUnavailableNs"`
	// LongestFromNs and LongestToNs bound that stretch.
	LongestFromNs int64 `json:"longestFromNs"`
	LongestToNs   int64 `json:"longestToNs"`
	// SlowestRecovery is the longest time from a heal to the next
	// acknowledged write.
	SlowestRecovery time.Duration `json:"slowestRecoveryNs"`
}

// Liveness measures unavailability from the history: the longest gap
// between acknowledged writes within [fromNs, toNs], and for each heal the
// time to the next acknowledged write. A heal followed by no write within
// bound (with no new fault in between) is a violation.
func Liveness(ops []history.Op, fromNs, toNs int64, bound time.Duration) (Result, LivenessReport) {
	res := Result{Name: "liveness", Verdict: Valid}
	var rep LivenessReport
	var acks, heals, starts []int64
	for _, op := range ops {
		switch {
		case op.Process == history.NemesisProcess && strings.HasSuffix(op.F, "-stop"):
			heals = append(heals, op.TimeNs)
		case op.Process == history.NemesisProcess && strings.HasSuffix(op.F, "-start"):
			starts = append(starts, op.TimeNs)
		case op.Type == history.OK && (op.F == history.FFaucet || op.F == history.FMint):
			acks = append(acks, op.TimeNs)
		}
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i] < acks[j] })
	prev := fromNs
	for _, t := range append(acks, toNs) {
		if t < fromNs || t > toNs {
			continue
		}
		if gap := time.Duration(t - prev); gap > rep.LongestUnavailable {
			rep.LongestUnavailable, rep.LongestFromNs, rep.LongestToNs = gap, prev, t
		}
		prev = t
	}
	for _, h := range heals {
		if h > toNs {
			continue
		}
		next := firstAfter(acks, h)
		nextFault := firstAfter(starts, h)
		if next < 0 {
			if nextFault < 0 && time.Duration(toNs-h) > bound {
				res.Verdict = Violation
				res.addf("no write acknowledged in the %v after the heal at %v", time.Duration(toNs-h).Round(time.Millisecond), time.Duration(h))
			}
			continue
		}
		wait := time.Duration(next - h)
		if nextFault >= 0 && nextFault < next {
			continue // a new fault came first: not this heal's fault
		}
		if wait > rep.SlowestRecovery {
			rep.SlowestRecovery = wait
		}
		if wait > bound {
			res.Verdict = Violation
			res.addf("heal at %v: first acknowledged write %v later (bound %v)", time.Duration(h), wait.Round(time.Millisecond), bound)
		}
	}
	if len(acks) == 0 {
		res.Verdict = Violation
		res.addf("no write was acknowledged during the run")
	}
	res.addf("longest stretch without an acknowledged write: %v (from %v to %v); slowest recovery after a heal: %v",
		rep.LongestUnavailable.Round(time.Millisecond), time.Duration(rep.LongestFromNs).Round(time.Millisecond),
		time.Duration(rep.LongestToNs).Round(time.Millisecond), rep.SlowestRecovery.Round(time.Millisecond))
	return res, rep
}

func firstAfter(sorted []int64, t int64) int64 {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i] > t })
	if i == len(sorted) {
		return -1
	}
	return sorted[i]
}

// Probe records the final liveness probe: how long after the last heal the
// cluster took a write, or that it never did.
func Probe(took time.Duration, ok bool, bound time.Duration) Result {
	res := Result{Name: "liveness-probe", Verdict: Valid}
	if !ok || took > bound {
		res.Verdict = Violation
		res.addf("after the final heal no write was accepted within %v", bound)
		return res
	}
	res.addf("first write accepted %v after the final heal", took.Round(time.Millisecond))
	return res
}
