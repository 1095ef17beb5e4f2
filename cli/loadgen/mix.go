package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// The operations of the mix. Every trader also runs signup and faucet once,
// refreshes its market view (OpMarkets) now and then, and the first one
// reads its limits (OpLimits); those are measured too but not weighted.
const (
	OpMarket  = "market" // a small market order, alternating buy and sell per market
	OpLimit   = "limit"  // a limit order 2-5% away from the mid, on the tick
	OpCancel  = "cancel" // DELETE one of the trader's own resting orders
	OpRead    = "read"   // GET /v1/positions, /v1/fills or /v1/account
	OpSignup  = "signup"
	OpFaucet  = "faucet"
	OpLimits  = "limits"
	OpMarkets = "markets"
)

// MixOps are the weighted operations, in the order a mix is written.
var MixOps = []string{OpMarket, OpLimit, OpCancel, OpRead}

// DefaultMix is the mix `perpd bench` runs when --mix is not given.
const DefaultMix = "market=40,limit=30,cancel=15,read=15"

// MaxWeight bounds one weight, so the sum of four always fits an int.
const MaxWeight = 1_000_000

// Mix is the relative weight of each operation of MixOps; an operation
// left out of the mix string weighs 0.
type Mix map[string]int

// ParseMix reads "name=weight,...": names from MixOps, each at most once,
// weights whole numbers from 0 to MaxWeight, not all zero. A mix that
// cancels but places no limit orders is refused: it would have nothing to
// cancel.
func ParseMix(s string) (Mix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("mix is empty; write it like %q", DefaultMix)
	}
	m := Mix{}
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		name, w = strings.TrimSpace(name), strings.TrimSpace(w)
		if !ok || name == "" {
			return nil, fmt.Errorf("mix entry %q is not name=weight", part)
		}
		if !isMixOp(name) {
			return nil, fmt.Errorf("mix names unknown operation %q (known: %s)", name, strings.Join(MixOps, ", "))
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("mix names %q twice", name)
		}
		n, err := strconv.Atoi(w)
		if w == "" || strings.Trim(w, "0123456789") != "" || err != nil || n > MaxWeight {
			return nil, fmt.Errorf("mix weight %q of %s is not a whole number from 0 to %d", w, name, MaxWeight)
		}
		m[name] = n
	}
	if m.total() == 0 {
		return nil, fmt.Errorf("mix %q weighs nothing: give some operation a positive weight", s)
	}
	if m[OpCancel] > 0 && m[OpLimit] == 0 {
		return nil, fmt.Errorf("mix cancels but places no limit orders: there would be nothing to cancel")
	}
	return m, nil
}

func isMixOp(name string) bool {
	for _, op := range MixOps {
		if op == name {
			return true
		}
	}
	return false
}

func (m Mix) total() int {
	t := 0
	for _, op := range MixOps {
		t += m[op]
	}
	return t
}

// String writes the mix as ParseMix reads it, every operation named.
func (m Mix) String() string {
	parts := make([]string, 0, len(MixOps))
	for _, op := range MixOps {
		parts = append(parts, op+"="+strconv.Itoa(m[op]))
	}
	return strings.Join(parts, ",")
}

// pick draws an operation with probability weight/total.
func (m Mix) pick(r *rand.Rand) string {
	x := r.IntN(m.total())
	for _, op := range MixOps {
		if x < m[op] {
			return op
		}
		x -= m[op]
	}
	panic("loadgen: mix pick past the total")
}
