package loadgen

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// MaxSamplesPerOp bounds the latencies kept per operation (8 MB each).
// Up to it the percentiles are exact; past it the kept samples are a
// uniform reservoir of every latency seen (Vitter's algorithm R), and the
// maximum stays exact.
const MaxSamplesPerOp = 1 << 20

// Error codes the client gives what has no `code` in its body.
const (
	CodeTransport = "transport"      // no HTTP answer: refused connection, reset, timeout
	CodeMalformed = "malformed_body" // a 2xx whose body is not what the operation returns
)

// opStats is what one operation recorded.
type opStats struct {
	ok      int64
	errors  map[string]int64
	samples []time.Duration // latencies of the ok attempts (all, or a reservoir of them)
	max     time.Duration
}

// recorder collects every trader's measurements. One mutex is enough: a
// record is a few nanoseconds beside the millisecond round trip it follows.
type recorder struct {
	mu         sync.Mutex
	ops        map[string]*opStats
	rng        *rand.Rand
	maxSamples int
}

func newRecorder(seed uint64) *recorder {
	return &recorder{ops: map[string]*opStats{}, rng: rand.New(rand.NewPCG(seed, 0x5eed)), maxSamples: MaxSamplesPerOp}
}

func (r *recorder) op(name string) *opStats {
	s := r.ops[name]
	if s == nil {
		s = &opStats{errors: map[string]int64{}}
		r.ops[name] = s
	}
	return s
}

// ok records an answered attempt and its round trip.
func (r *recorder) ok(name string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.op(name)
	s.ok++
	s.max = max(s.max, d)
	if len(s.samples) < r.maxSamples {
		s.samples = append(s.samples, d)
	} else if j := r.rng.Int64N(s.ok); j < int64(len(s.samples)) {
		s.samples[j] = d
	}
}

// fail records a refused or failed attempt under its code.
func (r *recorder) fail(name, code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.op(name).errors[code]++
}

// OpResult is one operation's line of the result.
type OpResult struct {
	// Count is every attempt: OK plus every error.
	Count int64 `json:"count"`
	OK    int64 `json:"ok"`
	// OKPerSec is OK over the phase the operation ran in (setup or mix).
	OKPerSec float64 `json:"okPerSec"`
	// Latencies of the ok attempts (full HTTP round trips), in ms.
	P50Ms  float64          `json:"p50Ms"`
	P90Ms  float64          `json:"p90Ms"`
	P99Ms  float64          `json:"p99Ms"`
	MaxMs  float64          `json:"maxMs"`
	Errors map[string]int64 `json:"errors"`
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted
// latencies: the smallest sample with at least p% of the samples at or
// below it. Empty: 0.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// summarize turns one operation's record into its result; window is how
// long its phase ran. It sorts s.samples in place.
func summarize(s *opStats, window time.Duration) OpResult {
	out := OpResult{OK: s.ok, Count: s.ok, Errors: map[string]int64{}}
	for code, n := range s.errors {
		out.Errors[code] = n
		out.Count += n
	}
	if window > 0 {
		out.OKPerSec = round3(float64(s.ok) / window.Seconds())
	}
	sort.Slice(s.samples, func(i, j int) bool { return s.samples[i] < s.samples[j] })
	out.P50Ms = ms(Percentile(s.samples, 50))
	out.P90Ms = ms(Percentile(s.samples, 90))
	out.P99Ms = ms(Percentile(s.samples, 99))
	out.MaxMs = ms(s.max)
	return out
}

// ms is d in milliseconds to the microsecond.
func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// opOrder is the order the table lists operations in: setup, then the mix.
var opOrder = []string{OpSignup, OpFaucet, OpLimits, OpMarket, OpLimit, OpCancel, OpRead, OpMarkets}

// orderedOps lists the operations of ops in opOrder, then any others by name.
func orderedOps(ops map[string]OpResult) []string {
	var names []string
	for _, n := range opOrder {
		if _, ok := ops[n]; ok {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range ops {
		if !contains(opOrder, n) {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// WriteTable prints the result as an aligned table, one line per operation.
func (r *Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "perpd bench: %d traders (%d running) on %d node(s), tier %s, mix %s, seed %d\n",
		r.Config.Traders, r.TradersRunning, len(r.Config.Nodes), r.Tier, r.Config.Mix, r.Config.Seed)
	fmt.Fprintf(w, "setup %.1fs, mix %.1fs%s\n", float64(r.SetupMs)/1000, float64(r.DurationMs)/1000, map[bool]string{true: " (interrupted)"}[r.Interrupted])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tcount\tok\tok/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors")
	for _, name := range orderedOps(r.Ops) {
		o := r.Ops[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\n",
			name, o.Count, o.OK, o.OKPerSec, o.P50Ms, o.P90Ms, o.P99Ms, o.MaxMs, errorList(o.Errors))
	}
	return tw.Flush()
}

// errorList writes error counts as "code=n ..." by code, or "-".
func errorList(errs map[string]int64) string {
	if len(errs) == 0 {
		return "-"
	}
	codes := make([]string, 0, len(errs))
	for c := range errs {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s=%d", c, errs[c])
	}
	return strings.Join(parts, " ")
}
