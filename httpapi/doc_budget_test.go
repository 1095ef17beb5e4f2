package httpapi

import "testing"

// The served descriptions are the largest public answers (/openapi.json
// about 290 KB) and were unmetered: one client on loopback pulled 390 MB
// a second from a node for 0.3 of a core (load review of 2026-11-27), and
// over a network one client could take a node's whole uplink. They draw
// the read budget of the client address like every other public read;
// /healthz and /deployment (a few dozen bytes, probed by load balancers)
// stay unmetered.
func TestDescriptionsDrawTheAddressReadBudget(t *testing.T) {
	for _, path := range []string{"/openapi.json", "/llms.txt", "/llms-full.txt", "/por/dashboard"} {
		a := newTestAPIWith(t, []Option{WithBudgets(tinyRead())})
		burst := tinyRead()["read"].KeyBurst
		for i := 0; i < burst; i++ {
			if r := a.do(req{method: "GET", path: path}); r.status != 200 {
				t.Fatalf("%s %d: %d", path, i, r.status)
			}
		}
		if r := a.do(req{method: "GET", path: path}); r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s past the address's read budget: %d %s", path, r.status, r.body)
		}
		for _, free := range []string{"/healthz", "/deployment"} {
			if r := a.do(req{method: "GET", path: free}); r.status == 429 || r.header.Get("X-RateLimit-Limit") != "" {
				t.Fatalf("%s with the read budget empty: %d %s", free, r.status, r.body)
			}
		}
	}
}
