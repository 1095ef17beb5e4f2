package access

import "strings"

// Scope is a bit set of key capabilities. Scopes are independent, not a
// ladder (SPEC section 5): trade does not imply read.
type Scope uint8

// The four scopes of SPEC section 5.
const (
	ScopeRead Scope = 1 << iota
	ScopeTrade
	ScopeWithdraw
	ScopeAdminSessions

	ScopeAll = ScopeRead | ScopeTrade | ScopeWithdraw | ScopeAdminSessions
)

// ScopeNames lists scope names in their canonical order.
var ScopeNames = []string{"read", "trade", "withdraw", "admin-sessions"}

// ParseScope maps a scope name to its bit (0 when unknown).
func ParseScope(name string) Scope {
	for i, n := range ScopeNames {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// Names lists the scopes in s in canonical order.
func (s Scope) Names() []string {
	out := []string{}
	for i, n := range ScopeNames {
		if s&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// Has reports whether s includes every bit of want.
func (s Scope) Has(want Scope) bool { return s&want == want }

func (s Scope) String() string { return strings.Join(s.Names(), ",") }
