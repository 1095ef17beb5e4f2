package httpapi

import (
	"strconv"
	"testing"
)

// A keyed write on the read budget draws this node's read buckets and
// the leader's write buckets; its X-RateLimit-Remaining is the binding
// budget's (SPEC section 8), the one with fewer tokens left. It showed the
// leader's fuller bucket (119 of 120 while the key's read bucket held
// about 68), so a client pacing on the header ran into 429s.
func TestAnAdmittedWriteShowsTheBindingBudgetsRemaining(t *testing.T) {
	a := newTestAPI(t)
	key, _ := a.signup()
	for i := 0; i < 60; i++ {
		if r := a.do(req{method: "GET", path: "/v1/account", key: key}); r.status != 200 {
			t.Fatalf("read %d: %d %s", i, r.status, r.body)
		}
	}
	r := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, idem: nextIdem(), body: map[string]any{}})
	if r.status != 201 {
		t.Fatalf("invoice: %d %s", r.status, r.body)
	}
	shown, err := strconv.Atoi(r.header.Get("X-RateLimit-Remaining"))
	if err != nil {
		t.Fatalf("X-RateLimit-Remaining %q", r.header.Get("X-RateLimit-Remaining"))
	}
	limits := a.do(req{method: "GET", path: "/v1/limits", key: key})
	if limits.status != 200 {
		t.Fatalf("limits: %d %s", limits.status, limits.body)
	}
	read := limits.json(t)["budgets"].(map[string]any)["read"].(map[string]any)
	left := int(read["remaining"].(float64))
	burst := int(read["burst"].(float64))
	// 62 reads and a write of a burst of 120 (the limits call drew one
	// more); refills during the test add a few tokens at most.
	if shown >= burst-50 || shown < left-5 || shown > left+5 {
		t.Fatalf("the write's X-RateLimit-Remaining is %d; the key's read budget has %d of %d left", shown, left, burst)
	}
}
