package httpapi

import (
	"testing"
	"time"

	"github.com/perpd/perpd/fsm/access"
)

// signupRoute is the route table's signup row.
func signupRoute(t *testing.T, a *testAPI) *Route {
	t.Helper()
	for _, r := range a.srv.Routes {
		if r.Path == "/v1/signup" {
			return r
		}
	}
	t.Fatal("no signup route")
	return nil
}

// One address cannot take the venue's hourly signup cap. Signups are
// capped venue-wide per rolling hour (3,000) for the state's sake; they
// drew the order budget of the client address (60 a minute, 3,600 an
// hour), so one address could take every signup of the hour and lock
// every newcomer out until it passed (load review of 2026-11-27). Now an
// address gets at most a thirtieth of the cap in an hour.
func TestOneAddressCannotTakeTheSignupCap(t *testing.T) {
	a := newTestAPI(t)
	b := a.srv.budgets[signupRoute(t, a).Budget]
	m := newMeter()
	now := time.Now()
	admitted := 0
	for s := 0; s < 3600; s++ { // one request a second for an hour
		if m.take(b, "ip:203.0.113.7", "", now.Add(time.Duration(s)*time.Second)).ok {
			admitted++
		}
	}
	if admitted > access.DefaultSignupsPerHour/30 {
		t.Fatalf("one address signed up %d times in an hour (budget %q); the venue's cap is %d an hour", admitted, b.Name, access.DefaultSignupsPerHour)
	}
}

// The signup budget is per address and drawn at the leader: an address
// past it is refused 429 with Retry-After while another still signs up.
func TestSignupBudgetIsPerAddress(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithTrustedProxies([]string{"127.0.0.1"})})
	b := a.srv.budgets[signupRoute(t, a).Budget]
	signup := func(ip string) resp {
		return a.do(req{method: "POST", path: "/v1/signup", idem: nextIdem(), body: map[string]any{}, header: map[string]string{"X-Forwarded-For": ip}})
	}
	for i := 0; i < b.KeyBurst; i++ {
		if r := signup("203.0.113.7"); r.status != 201 {
			t.Fatalf("signup %d of a burst of %d: %d %s", i+1, b.KeyBurst, r.status, r.body)
		}
	}
	r := signup("203.0.113.7")
	if r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("signup past the address's burst: %d %s", r.status, r.body)
	}
	if r := signup("203.0.113.8"); r.status != 201 {
		t.Fatalf("another address: %d %s", r.status, r.body)
	}
}
