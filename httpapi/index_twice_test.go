package httpapi

import "testing"

// TestReadBarrierHeaderGivenTwiceIsRefused: two X-Min-Index headers were
// read as the first and the second ignored (a barrier the client asked
// for silently dropped, or a proxy's added one overridden); two
// X-Consistency headers likewise. As with a doubled x-api-key or
// idempotency-key, a header given twice is refused, whichever comes first
// and whether or not the two agree: 400 validation, on reads (public and
// keyed) and on writes, with nothing applied.
func TestReadBarrierHeaderGivenTwiceIsRefused(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	now, ahead := "1", "18446744073709551615"
	pairs := map[string][][2]string{
		"X-Min-Index agreeing":         {{"X-Min-Index", now}, {"X-Min-Index", now}},
		"X-Min-Index, then far ahead":  {{"X-Min-Index", now}, {"X-Min-Index", ahead}},
		"X-Min-Index, far ahead first": {{"X-Min-Index", ahead}, {"X-Min-Index", now}},
		"X-Min-Index, then malformed":  {{"X-Min-Index", now}, {"X-Min-Index", "abc"}},
		"X-Consistency, two values":    {{"X-Consistency", "default"}, {"X-Consistency", "linearizable"}},
	}
	for name, hs := range pairs {
		if r := a.do(req{method: "GET", path: "/v1/markets", lines: hs}); r.status != 400 || r.code() != "validation" {
			t.Errorf("%s, public read: %d %s, want 400 validation", name, r.status, r.body)
		}
		if r := a.do(req{method: "GET", path: "/v1/account", key: key, lines: hs}); r.status != 400 || r.code() != "validation" {
			t.Errorf("%s, keyed read: %d %s, want 400 validation", name, r.status, r.body)
		}
		if r := a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: nextIdem(), body: "{}", lines: hs}); r.status != 400 || r.code() != "validation" {
			t.Errorf("%s, write: %d %s, want 400 validation", name, r.status, r.body)
		}
		// An unknown key is still judged first: 401, without a wait.
		if r := a.do(req{method: "GET", path: "/v1/account", key: "pdk_not_a_key", lines: hs}); r.status != 401 {
			t.Errorf("%s, unknown key: %d %s, want 401", name, r.status, r.body)
		}
	}
	if free := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t)["freeMsat"]; free != "0" {
		t.Errorf("a refused faucet request credited the account: freeMsat %v", free)
	}
	// One of each is still honoured.
	if r := a.do(req{method: "GET", path: "/v1/account", key: key, lines: [][2]string{{"X-Min-Index", now}, {"X-Consistency", "linearizable"}}}); r.status != 200 {
		t.Errorf("one X-Min-Index and one X-Consistency: %d %s", r.status, r.body)
	}
}
