package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/jepsen/checker"
	"github.com/perpd/perpd/jepsen/workload"

	"github.com/perpd/perpd/jepsen/client"
)

func TestRestorePathHeadsBackToThePlan(t *testing.T) {
	plan := &pricePlan{points: []client.ScriptPoint{{OffsetMs: 0, MidQ8: 100}, {OffsetMs: 4000, MidQ8: 104},
		{OffsetMs: 8000, MidQ8: 99}, {OffsetMs: 12000, MidQ8: 102}}}
	got := restorePath(plan, 90, 7500) // 500 ms before the 8000 point: skipped
	want := []client.ScriptPoint{{OffsetMs: 0, MidQ8: 90}, {OffsetMs: 4500, MidQ8: 102}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("restore path %v, want %v", got, want)
	}
	// Past the plan's end: back to its last price.
	got = restorePath(plan, 90, 20000)
	if len(got) != 2 || got[1].MidQ8 != 102 || got[1].OffsetMs <= 0 {
		t.Fatalf("restore path after the plan %v", got)
	}
}

// fakeMarkets serves GET /v1/markets with one market whose next funding
// boundary is *next.
func fakeMarkets(t *testing.T, next *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `[{"marketId":"BTC-PERP","nextFundingTsMs":"%d"}]`, next.Load())
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// Settled traders stay settled across an hour unless a node actually
// applied a funding boundary during the final reads. (The old check went
// by the clock and unsettled every run whose reads fell within two
// minutes of an hour, which failed the planted-bug test in CI.)
func TestFundingBoundaryUnsettlesOnlyWhenApplied(t *testing.T) {
	var a, b atomic.Int64
	a.Store(1_800_000_000_000)
	b.Store(1_800_000_000_000)
	newRun := func() (*run, *checker.Final) {
		r := &run{cl: client.New(time.Second), opts: Options{Log: io.Discard},
			env: &workload.Env{Nodes: []string{fakeMarkets(t, &a), fakeMarkets(t, &b)}}}
		r.settled = map[string]bool{"acc_1": true}
		final := &checker.Final{Traders: map[string]*checker.TraderFinal{"acc_1": {Settled: true}}}
		return r, final
	}

	r, final := newRun()
	before, why := r.fundingClocks(context.Background())
	if before == nil {
		t.Fatal(why)
	}
	r.checkFrozen(context.Background(), final, before)
	if !final.Traders["acc_1"].Settled {
		t.Fatal("a trader was unsettled though no node moved its funding clock")
	}

	r, final = newRun()
	before, _ = r.fundingClocks(context.Background())
	b.Add(3_600_000) // node b applies the boundary during the reads
	r.checkFrozen(context.Background(), final, before)
	if final.Traders["acc_1"].Settled || len(r.settled) != 0 {
		t.Fatal("a funding boundary applied during the final reads left the trader settled")
	}

	// Nodes that disagree before the reads: nothing to compare against.
	if clocks, why := r.fundingClocks(context.Background()); clocks != nil || !strings.Contains(why, "disagree") {
		t.Fatalf("disagreeing nodes gave %v (%s)", clocks, why)
	}
}
