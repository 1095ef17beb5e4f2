package loadgen

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func msd(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentileIsNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, msd(i))
	}
	for p, want := range map[float64]int{50: 50, 90: 90, 99: 99, 100: 100, 1: 1, 0.5: 1, 99.5: 100} {
		if got := Percentile(s, p); got != msd(want) {
			t.Errorf("p%v of 1..100 ms = %v, want %v", p, got, msd(want))
		}
	}
	ten := s[:10] // 1..10 ms
	if Percentile(ten, 50) != msd(5) || Percentile(ten, 90) != msd(9) || Percentile(ten, 99) != msd(10) {
		t.Errorf("1..10 ms: p50 %v p90 %v p99 %v", Percentile(ten, 50), Percentile(ten, 90), Percentile(ten, 99))
	}
	if Percentile(s[:1], 50) != msd(1) || Percentile(s[:1], 99) != msd(1) {
		t.Error("one sample is every percentile")
	}
	if Percentile(nil, 50) != 0 {
		t.Error("no samples: 0")
	}
}

func TestSummaryCountsErrorsAndSortsSamples(t *testing.T) {
	r := newRecorder(1)
	for _, v := range []int{30, 10, 20, 40} {
		r.ok("market", msd(v))
	}
	r.fail("market", "rate_limited")
	r.fail("market", "rate_limited")
	r.fail("market", CodeTransport)
	got := summarize(r.ops["market"], 2*time.Second)
	if got.Count != 7 || got.OK != 4 || got.OKPerSec != 2 {
		t.Fatalf("count %d ok %d ok/s %v, want 7, 4, 2", got.Count, got.OK, got.OKPerSec)
	}
	if got.P50Ms != 20 || got.P90Ms != 40 || got.P99Ms != 40 || got.MaxMs != 40 {
		t.Fatalf("latencies %+v", got)
	}
	if len(got.Errors) != 2 || got.Errors["rate_limited"] != 2 || got.Errors[CodeTransport] != 1 {
		t.Fatalf("errors %v", got.Errors)
	}
	if none := summarize(&opStats{errors: map[string]int64{}}, 0); none.Count != 0 || none.OKPerSec != 0 || none.Errors == nil {
		t.Fatalf("an empty record: %+v (errors must be {} not null)", none)
	}
}

func TestSamplesAreBoundedAndTheMaxExact(t *testing.T) {
	r := newRecorder(1)
	r.maxSamples = 100
	rng := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 10_000; i++ {
		r.ok("read", time.Duration(1+rng.IntN(1000))*time.Microsecond)
	}
	r.ok("read", time.Second)
	s := r.ops["read"]
	if len(s.samples) != 100 || s.ok != 10_001 || s.max != time.Second {
		t.Fatalf("kept %d samples of %d, max %v", len(s.samples), s.ok, s.max)
	}
	// The reservoir stays a sample of the whole stream: its median is
	// near the stream's (500 µs), not stuck on the first 100.
	got := summarize(s, time.Second)
	if got.P50Ms < 0.35 || got.P50Ms > 0.65 || got.MaxMs != 1000 {
		t.Fatalf("p50 %v ms max %v ms", got.P50Ms, got.MaxMs)
	}
}

func TestTableListsEveryOperation(t *testing.T) {
	res := &Result{Config: ResultConfig{Nodes: []string{"http://a"}, Traders: 2, Mix: Mix{OpMarket: 1}}, TradersRunning: 2, Tier: "bench",
		Ops: map[string]OpResult{
			OpMarket: {Count: 3, OK: 2, Errors: map[string]int64{"rate_limited": 1}},
			OpSignup: {Count: 2, OK: 2, Errors: map[string]int64{}},
			"zzz":    {Count: 1, OK: 1, Errors: map[string]int64{}},
		}}
	var b bytes.Buffer
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	iSignup, iMarket, iZ := strings.Index(out, "\nsignup"), strings.Index(out, "\nmarket"), strings.Index(out, "\nzzz")
	if iSignup < 0 || iMarket < iSignup || iZ < iMarket || !strings.Contains(out, "rate_limited=1") {
		t.Fatalf("table:\n%s", out)
	}
}
