package trade

import (
	"testing"

	"github.com/perpd/perpd/fsm/market"
)

// TestSweepWithNothingDueAllocatesNothing: every fill sweeps its market
// (PlaceIn), and almost always no position is due; such a sweep makes no
// auto-deleveraging ranking (it made one, 1 allocation, per order).
func TestSweepWithNothingDueAllocatesNothing(t *testing.T) {
	const nowMs = 1_000_000
	ms, err := market.New(nowMs, market.DefaultCatalogue())
	if err != nil {
		t.Fatal(err)
	}
	mkt := market.DefaultCatalogue()[0]
	if err := ms.ApplyPrint(nowMs, mkt.OracleFeedID, 100_000*market.Q8, 300_000, nowMs); err != nil {
		t.Fatal(err)
	}
	s := NewState()
	// A long liquidated only far below the mid: in the index, not due.
	if err := s.book(mkt.MarketID).liqIndex().Insert("acc_1", 50_000*market.Q8, market.Falling); err != nil {
		t.Fatal(err)
	}
	env := &Env{Market: ms, NowMs: nowMs}
	if got := testing.AllocsPerRun(100, func() { s.sweep(env, mkt.MarketID) }); got != 0 {
		t.Fatalf("a sweep with nothing due makes %v allocations, want 0", got)
	}
	if env.adl != nil {
		t.Fatal("the sweep left a ranking behind")
	}
}
