package trade

import (
	"fmt"
	"math"
	"testing"
)

// TestIndexIDIsZeroPadded: price index keys are stored in snapshots, so
// they stay fmt's %020d, the largest number included.
func TestIndexIDIsZeroPadded(t *testing.T) {
	for _, no := range []uint64{0, 1, 9, 10, 12345678901234567890, math.MaxUint64} {
		if got, want := indexID(no), fmt.Sprintf("%020d", no); got != want {
			t.Fatalf("indexID(%d) = %q, want %q", no, got, want)
		}
	}
}
