package httpapi

import (
	"fmt"
	"testing"
)

// Public budgets are per client address, an IPv6 client's /64 counting as
// one; but one site holds a /48 (65,536 /64s, free from tunnel brokers),
// and each /64 had budgets of its own: a read burst, 30 signups, 256
// connections, each 65,536 times over (load review of 2026-11-27). The
// /48 now draws an aggregate bucket too, the budget's account bucket
// (read: five /64s' worth; signup: one /64's). IPv4 addresses have none:
// a /24 is often many unrelated clients.
func TestIPv6SiteSharesAnAggregateBudget(t *testing.T) {
	budgets := tinyRead()
	budgets["read"] = Budget{Name: "read", PerKeyPerMin: 1, KeyBurst: 2, PerAccountPerMin: 1, AccountBurst: 5}
	a := newTestAPIWith(t, []Option{WithBudgets(budgets), WithTrustedProxies([]string{"127.0.0.1"})})
	get := func(ip string) int {
		return a.do(req{method: "GET", path: "/v1/markets", header: map[string]string{"X-Forwarded-For": ip}}).status
	}
	admitted := 0
	for i := 0; i < 10; i++ { // ten /64s of one /48, two reads each
		for j := 0; j < 2; j++ {
			if get(fmt.Sprintf("2001:db8:1:%x::1", i)) == 200 {
				admitted++
			}
		}
	}
	if admitted != 5 {
		t.Fatalf("ten /64s of one /48: %d reads admitted, want the /48's aggregate burst of 5", admitted)
	}
	if st := get("2001:db8:2::1"); st != 200 {
		t.Fatalf("another /48: %d", st)
	}
	for i := 0; i < 10; i++ { // IPv4 addresses of one /24 are separate clients
		for j := 0; j < 2; j++ {
			if st := get(fmt.Sprintf("203.0.113.%d", i)); st != 200 {
				t.Fatalf("IPv4 203.0.113.%d read %d: %d", i, j, st)
			}
		}
	}
}
