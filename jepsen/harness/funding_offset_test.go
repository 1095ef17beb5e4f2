package harness

import (
	"testing"
	"time"
)

// TestFundingOffsetPutsAnHourHalfwayThroughTheFaults: the shifted clock
// reads an exact hour at the middle of the faults, whatever the start.
func TestFundingOffsetPutsAnHourHalfwayThroughTheFaults(t *testing.T) {
	for _, start := range []time.Time{
		time.Date(2026, 11, 27, 8, 25, 19, 878_000_000, time.UTC),
		time.Date(2026, 11, 27, 8, 59, 25, 0, time.UTC), // the middle is 09:00:00 already
		time.Date(2026, 11, 27, 23, 59, 59, 0, time.UTC),
	} {
		for _, faults := range []time.Duration{time.Minute, 4 * time.Minute} {
			off := fundingOffset(start, faults)
			mid := start.Add(fundingSetup + faults/2).Add(off)
			if off < 0 || off > time.Hour || mid.Sub(mid.Truncate(time.Hour)) != 0 {
				t.Errorf("start %v, faults %v: offset %v puts the middle at %v", start, faults, off, mid)
			}
		}
	}
}
