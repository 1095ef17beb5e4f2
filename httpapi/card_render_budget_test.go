package httpapi

import (
	"testing"
)

// Rendering a share card that is not cached costs about 50 ms of CPU and
// 13 MB of allocations, 500 times a plain read, and the read budget let
// one address ask for 10 a second (120 at once): cycling through more
// handles than the cache keeps made every one a render, half a core per
// address, and every node's renders wait on one lock. Renders (cache
// misses only) draw a budget of their own, per address and per node;
// cached cards and 304s stay free.
func TestShareCardRendersDrawARenderBudget(t *testing.T) {
	// The address's bucket refills one render every 60/CardRendersPerMin
	// seconds: under the race detector a render takes about half a second,
	// so the burst's renders took long enough for a token to come back
	// and a sixth card rendered. The burst is what this test counts, so
	// its refill is slowed to one a minute.
	saved := cardRenderBudget
	cardRenderBudget.PerKeyPerMin = 1
	t.Cleanup(func() { cardRenderBudget = saved })
	a := newTestAPI(t)
	n := CardRendersBurst + 3
	var handles []string
	for i := 0; i < n; i++ {
		key, _ := a.signup()
		if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: key, idem: nextIdem(), body: map[string]any{"displayName": "Card"}}); r.status != 200 {
			t.Fatalf("settings: %d %s", r.status, r.body)
		}
		handles = append(handles, a.do(req{method: "GET", path: "/v1/leaderboard/me", key: key}).json(t)["handle"].(string))
	}
	cards.mu.Lock()
	cards.cards = map[string]cachedCard{}
	cards.mu.Unlock()
	rendered, refused := 0, 0
	for _, h := range handles {
		r := a.do(req{method: "GET", path: "/v1/leaderboard/trader/" + h + "/og.png"})
		switch {
		case r.status == 200:
			rendered++
		case r.status == 429 && r.code() == "rate_limited" && r.header.Get("Retry-After") != "":
			// A refusal carries no validator or cache permission of the
			// card: a shared cache that stored this 429 under the card's
			// ETag (public) would serve it after every 304.
			if et, cc := r.header.Get("ETag"), r.header.Get("Cache-Control"); et != "" || cc != "" {
				t.Fatalf("the refusal of %s carries ETag %q, Cache-Control %q", h, et, cc)
			}
			refused++
		default:
			t.Fatalf("card of %s: %d %s", h, r.status, r.body)
		}
	}
	if rendered != CardRendersBurst || refused != n-CardRendersBurst {
		t.Fatalf("%d cards not cached, from one address: %d rendered, %d refused; want %d and %d",
			n, rendered, refused, CardRendersBurst, n-CardRendersBurst)
	}
	// A cached card costs no render: it is served with the budget empty.
	if r := a.do(req{method: "GET", path: "/v1/leaderboard/trader/" + handles[0] + "/og.png"}); r.status != 200 {
		t.Fatalf("a cached card with the render budget empty: %d %s", r.status, r.body)
	}
}
