package cluster

import "github.com/perpd/perpd/internal/connlimit"

// DefaultConnsPerAddress is the public listener's per-address cap: the
// WebSocket cap of an address (100) plus room for its REST keep-alives.
const DefaultConnsPerAddress = 256

// AdminConnsPerAddress is the admin listener's per-address cap. Its
// clients are operators, a metrics scraper and the other members, whose
// node-to-node client holds at most node.PeerConnsPerHost connections to
// it; every member of a one-host cluster calls from the same loopback
// address, so loopback is exempt (AdminConnLimits).
const AdminConnsPerAddress = 512

// adminConnsMax is the most connections the admin listener holds at once.
const adminConnsMax = 2048

// AdminConnLimits bounds the admin listener for a process allowed nofile
// open descriptors. The listener is mutual TLS and should be firewalled to
// the members and the operators (docs/deploy.md), but a connection costs a
// descriptor before its handshake fails, so it is capped all the same:
// per address, and in total at half the descriptors the public listener
// leaves in reserve (at most adminConnsMax).
func AdminConnLimits(nofile uint64) connlimit.Limits {
	l := connlimit.Limits{PerAddress: AdminConnsPerAddress, Exempt: connlimit.Loopback}
	if reserve := connlimit.Reserve(nofile); reserve > 0 {
		l.Total = min(reserve, 2*adminConnsMax) / 2
	}
	return l
}
