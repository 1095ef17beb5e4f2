package trade

import (
	"fmt"
	"math"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
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

// TestAccountLedgerNames: the names an account keeps are the ledger's,
// for each market apart, whichever is asked first.
func TestAccountLedgerNames(t *testing.T) {
	a := &Account{}
	for range 2 {
		for _, mkt := range []string{"BTC-PERP", "ETH-PERP", "BTC-PERP"} {
			if got, want := a.ledgerMargin("acc_1", mkt), ledger.Margin("acc_1", mkt); got != want {
				t.Fatalf("margin name %q, want %q", got, want)
			}
		}
		if got, want := a.ledgerFree("acc_1"), ledger.Free("acc_1"); got != want {
			t.Fatalf("free name %q, want %q", got, want)
		}
		if got, want := a.ledgerReserved("acc_1"), ledger.Reserved("acc_1"); got != want {
			t.Fatalf("reserved name %q, want %q", got, want)
		}
	}
	if len(a.marginNames) != 2 {
		t.Fatalf("%d margin names kept for 2 markets", len(a.marginNames))
	}
}
