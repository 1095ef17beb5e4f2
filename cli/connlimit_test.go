package cli

import (
	"net/netip"
	"testing"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/internal/connlimit"
)

// The public listener of every profile but bench caps an address's
// connections, trusted proxies exempt; every profile caps the total
// below the descriptor limit.
func TestPublicListenerCapsConnections(t *testing.T) {
	l := publicConnLimits(profiles["testnet"], []string{"10.0.0.0/8", "192.0.2.7"})
	if l.PerAddress != cluster.DefaultConnsPerAddress || !l.Plain {
		t.Fatalf("testnet: per address %d plain %v, want %d and true", l.PerAddress, l.Plain, cluster.DefaultConnsPerAddress)
	}
	if want := connlimit.PublicTotal(connlimit.OpenFileLimit()); l.Total != want || (connlimit.OpenFileLimit() > 0 && l.Total <= 0) {
		t.Fatalf("testnet: total %d, want %d", l.Total, want)
	}
	exempt := func(s string) bool {
		for _, p := range l.Exempt {
			if p.Contains(netip.MustParseAddr(s)) {
				return true
			}
		}
		return false
	}
	if !exempt("10.1.2.3") || !exempt("192.0.2.7") || exempt("192.0.2.8") {
		t.Fatalf("trusted proxies are exempt, nothing else: %v", l.Exempt)
	}
	if b := publicConnLimits(profiles["bench"], nil); b.PerAddress != 0 || b.Total != l.Total {
		t.Fatalf("bench: per address %d total %d, want 0 (its clients all dial from loopback) and %d", b.PerAddress, b.Total, l.Total)
	}
}
