package cli

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/internal/connlimit"
	"github.com/perpd/perpd/wsapi"
)

// profile is what a deployment name turns on, besides its name reaching
// the state machine's genesis (where only "prod" changes a rule).
type profile struct {
	// budgetScale multiplies every rate budget of the public API.
	budgetScale int
	// signupsPerHour is the genesis signup cap when --signups-per-hour is
	// not given (0: the state machine's default).
	signupsPerHour int
	// payer: the operator may pay deposit invoices from the admin listener.
	payer bool
	// wsPerAddress replaces the WebSocket connections one client address
	// may hold on a node (0: wsapi's MaxConnectionsPerAddress).
	wsPerAddress int
	// wsPerAccount replaces the connections of a node that may subscribe
	// to one account's channel (0: wsapi's MaxAccountConnections).
	wsPerAccount int
	// connsPerAddress replaces the TCP connections one client address may
	// hold on the public listener (0: cluster.DefaultConnsPerAddress;
	// noConnCap: none, only the node's total).
	connsPerAddress int
}

// noConnCap lifts the per-address connection cap of a profile.
const noConnCap = -1

// Bench profile sizes (docs/decisions.md, "Load generator and the bench
// profile"). 1000x every rate budget: one bench trader on loopback sends
// over 200 order-budget writes a second, past the 100/s of a 100x order
// budget, so 1000x (1000/s per key) keeps every trader clear of the meter.
// 10x the signup cap lets a cluster take many bench runs an hour; it
// stays moderate because each signup copies the window of recent signups.
const (
	BenchBudgetScale    = 1000
	BenchSignupsPerHour = 10 * access.DefaultSignupsPerHour
)

// profiles are the deployments this build serves. "prod" is not one: it
// needs a real payment rail (errProdRail).
var profiles = map[string]profile{
	"testnet": {budgetScale: 1, payer: true},
	"local":   {budgetScale: 1, payer: true},
	// bench-ws-fanout's clients all dial from loopback and its account
	// clients share a few traders' accounts: only the node's own cap
	// applies.
	"bench": {budgetScale: BenchBudgetScale, signupsPerHour: BenchSignupsPerHour, payer: true,
		wsPerAddress: wsapi.MaxConnections, wsPerAccount: wsapi.MaxConnections, connsPerAddress: noConnCap},
}

// signupCap is the genesis signup cap serve proposes: the flag's when
// given (non-zero), else the profile's (0 leaves the state machine's).
func (p profile) signupCap(flag int) int {
	if flag != 0 {
		return flag
	}
	return p.signupsPerHour
}

// deploymentProfile checks a --deployment value and returns its profile.
func deploymentProfile(name string) (profile, error) {
	if name == "prod" {
		return profile{}, errProdRail
	}
	p, ok := profiles[name]
	if !ok {
		names := make([]string, 0, len(profiles))
		for n := range profiles {
			names = append(names, n)
		}
		sort.Strings(names)
		return profile{}, fmt.Errorf("--deployment must be %s or prod, not %q", strings.Join(names, ", "), name)
	}
	return p, nil
}

// adminConnLimits is the admin listener's caps for this process's
// descriptor limit (every deployment alike).
func adminConnLimits() *connlimit.Limits {
	l := cluster.AdminConnLimits(connlimit.OpenFileLimit())
	return &l
}

// publicConnLimits are the public listener's connection caps: per client
// address (the profile's; trusted proxies exempt, as they carry many
// clients) and in total, below the process's descriptor limit.
func publicConnLimits(p profile, trustedProxies []string) *connlimit.Limits {
	l := &connlimit.Limits{PerAddress: cluster.DefaultConnsPerAddress, Total: connlimit.PublicTotal(connlimit.OpenFileLimit()), Plain: true}
	switch {
	case p.connsPerAddress == noConnCap:
		l.PerAddress = 0
	case p.connsPerAddress > 0:
		l.PerAddress = p.connsPerAddress
	}
	for _, s := range trustedProxies {
		if pf, err := netip.ParsePrefix(s); err == nil {
			l.Exempt = append(l.Exempt, pf.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap()
			l.Exempt = append(l.Exempt, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return l
}
