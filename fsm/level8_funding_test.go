package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// Feature level 8, funding review (2026-11-27). Each test runs at level 7
// (the old behaviour, kept for replay) and at level 8.

// TestFundingFrameCarriesTheOracleStampAndStaleness: SPEC section 6 rule
// 5 has every stats frame carry the oracle timestamp and a staleness
// input. The funding frame named its mark (here a print 2,001 ms before
// the boundary) without that print's time; from LevelFundingFrameStamped
// it carries oracleTsMs and the market's stalenessMs (10,000).
func TestFundingFrameCarriesTheOracleStampAndStaleness(t *testing.T) {
	for _, level := range []uint32{LevelFundingFrameStamped - 1, LevelFundingFrameStamped} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			boundary := (w.ts/market.FundingIntervalMs + 1) * market.FundingIntervalMs
			w.walkTo(boundary - 3000)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			printTs := w.ts
			var frame *FundingBoundaryView
			for _, ev := range w.walkTo(boundary + 1000) {
				if ev.Kind == "funding" && ev.Channel == "stats" && ev.Selector == "BTC-PERP" {
					v := ev.Data.(FundingBoundaryView)
					frame = &v
				}
			}
			if frame == nil || frame.MarkQ8 == nil || *frame.MarkQ8 != wire.Int(usdQ8(100_000)) {
				t.Fatalf("funding frame %+v", frame)
			}
			if level < LevelFundingFrameStamped {
				if frame.OracleTsMs != nil || frame.StalenessMs != nil {
					t.Fatalf("below the level the frame changed: %+v", frame)
				}
				return
			}
			if frame.OracleTsMs == nil || int64(*frame.OracleTsMs) != printTs || frame.StalenessMs == nil || *frame.StalenessMs != 10_000 {
				t.Fatalf("frame %+v, want oracleTsMs %d and stalenessMs 10000", frame, printTs)
			}
		})
	}
}
