package httpapi

import (
	"strconv"
	"testing"
	"time"
)

// The budgets of SPEC section 8, each at its boundaries: the per-key burst
// is admitted in full and one more is refused; the per-account bucket
// admits exactly its per-minute rate across any number of keys once
// drained; a refusal draws nothing and its X-RateLimit-Reset names the
// second at which the budget admits again (the same instant Retry-After
// counts to).
func TestMeterSpecBudgetBoundaries(t *testing.T) {
	spec := []struct {
		name                   string
		perKey, burst, perAcct int
	}{
		{"read", 600, 120, 3000},
		{"order", 60, 20, 180},
		{"withdraw", 10, 5, 20},
	}
	for _, tc := range spec {
		t.Run(tc.name, func(t *testing.T) {
			b := Budgets[tc.name]
			if b.PerKeyPerMin != tc.perKey || b.KeyBurst != tc.burst || b.PerAccountPerMin != tc.perAcct {
				t.Fatalf("budget %+v, SPEC says %d/min, burst %d, %d/min per account", b, tc.perKey, tc.burst, tc.perAcct)
			}
			m := newMeter()
			for i := 0; i < tc.burst; i++ {
				if v := m.take(b, "key:a", "acct:x", t0); !v.ok {
					t.Fatalf("request %d of a burst of %d refused", i+1, tc.burst)
				}
			}
			v := m.take(b, "key:a", "acct:x", t0)
			if v.ok {
				t.Fatalf("request %d admitted past the burst", tc.burst+1)
			}
			if v.limit != tc.perKey {
				t.Fatalf("binding limit %d, want the key's %d", v.limit, tc.perKey)
			}
			// The first admitted instant, in epoch seconds.
			admits := t0.Add(v.retryAfter)
			want := admits.Unix()
			if admits.Nanosecond() != 0 {
				want++
			}
			if v.resetUnix != want {
				t.Fatalf("X-RateLimit-Reset %d on a refusal whose bucket admits at %v (epoch second %d)", v.resetUnix, admits, want)
			}
			if !m.take(b, "key:a", "acct:x", admits).ok {
				t.Fatalf("not admitted at %v, after the Retry-After wait", admits)
			}
			if got := m.peek(b, "key:other", "", t0); got != tc.burst {
				t.Fatalf("another key of the account lost tokens to a refusal: %d", got)
			}

			// Per account: drain the account through fresh keys, then
			// count what a minute admits across fresh keys.
			m = newMeter()
			k := 0
			take := func(at time.Time) bool {
				for {
					v := m.take(b, "key:"+strconv.Itoa(k), "acct:y", at)
					if v.ok || v.limit == tc.perAcct {
						return v.ok
					}
					k++ // this key's own bucket is empty: use another
				}
			}
			for take(t0) {
			}
			admitted := 0
			step := time.Millisecond // divides a minute exactly
			for at := t0.Add(step); !at.After(t0.Add(time.Minute)); at = at.Add(step) {
				if take(at) {
					admitted++
				}
			}
			if admitted != tc.perAcct {
				t.Fatalf("the account admitted %d in the minute after it was drained, SPEC says %d", admitted, tc.perAcct)
			}
		})
	}
}
