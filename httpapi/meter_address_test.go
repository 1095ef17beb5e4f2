package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// getFrom answers GET /v1/markets (public, read budget) for a client at
// remote, a host:port as the TCP peer.
func (a *testAPI) getFrom(remote string) int {
	r := httptest.NewRequest(http.MethodGet, "/v1/markets", nil)
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	a.srv.ServeHTTP(w, r)
	return w.Code
}

// drainFrom spends the read burst of tinyRead (3) from remote and checks
// that the next request is refused.
func (a *testAPI) drainFrom(remote string) {
	a.t.Helper()
	for i := range 3 {
		if got := a.getFrom(remote); got != http.StatusOK {
			a.t.Fatalf("%s, request %d of the burst: %d", remote, i+1, got)
		}
	}
	if got := a.getFrom(remote); got != http.StatusTooManyRequests {
		a.t.Fatalf("%s past its burst: %d", remote, got)
	}
}

// One client holds a whole IPv6 /64 and picks any source address in it:
// the public budget counts the /64 as one client, as the WebSocket cap
// does (clientaddr.Key), or every address would get a fresh budget, the
// signup flood guard included.
func TestPublicBudgetCountsAnIPv6Slash64AsOneClient(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
	a.drainFrom("[2001:db8:1:1::1]:40000")
	admitted := 0
	for i := 2; i < 12; i++ {
		if a.getFrom(fmt.Sprintf("[2001:db8:1:1::%x]:40000", i)) != http.StatusTooManyRequests {
			admitted++
		}
	}
	if admitted > 0 {
		t.Errorf("one /64 client got %d more requests past its empty budget by changing its source address", admitted)
	}
}

// Clients in different /64s (of different /48 sites: the /64s of one site
// also share an aggregate, TestIPv6SiteSharesAnAggregateBudget), and
// different IPv4 addresses, are different clients with budgets of their
// own; an IPv4-mapped IPv6 peer is its IPv4 address.
func TestPublicBudgetsOfDifferentAddressesAreSeparate(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
	a.drainFrom("[2001:db8:1:1::1]:40000")
	a.drainFrom("[2001:db8:2:2::1]:40000")
	a.drainFrom("203.0.113.7:40000")
	a.drainFrom("203.0.113.8:40000")
	if got := a.getFrom("[::ffff:203.0.113.7]:40000"); got != http.StatusTooManyRequests {
		t.Errorf("203.0.113.7 as an IPv4-mapped IPv6 peer got a fresh budget: %d", got)
	}
}
