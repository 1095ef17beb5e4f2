package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
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

// The body limit behind 413 body_too_large, at its boundary, both with a
// Content-Length and chunked: a body of exactly MaxBodyBytes is read, one
// byte more is refused and mints nothing. Whitespace pads a valid body.
func TestBodyLimitBoundary(t *testing.T) {
	a := newTestAPI(t)
	master, _ := a.signup()
	live := func() int {
		r := a.do(req{method: "GET", path: "/v1/sessions", key: master})
		var out struct{ Sessions []json.RawMessage }
		if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 {
			t.Fatalf("sessions: %d %s", r.status, r.body)
		}
		return len(out.Sessions)
	}
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		status  int
	}{
		{"at the limit", MaxBodyBytes, false, 201},
		{"one past", MaxBodyBytes + 1, false, 413},
		{"at the limit, chunked", MaxBodyBytes, true, 201},
		{"one past, chunked", MaxBodyBytes + 1, true, 413},
	} {
		body := `{"label":"x"}`
		body += strings.Repeat(" ", tc.size-len(body))
		var rd io.Reader = strings.NewReader(body)
		if tc.chunked {
			rd = io.MultiReader(rd) // no length known up front
		}
		hr, err := http.NewRequest("POST", a.http.URL+"/v1/sessions", rd)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set(KeyHeader, master)
		hr.Header.Set(IdemHeader, nextIdem())
		before := live()
		res, err := a.http.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r := resp{status: res.StatusCode, header: res.Header, body: b}
		if r.status != tc.status || (tc.status == 413 && r.code() != "body_too_large") {
			t.Fatalf("%s (%d bytes): %d %s, want %d", tc.name, tc.size, r.status, r.body, tc.status)
		}
		if grew := live() - before; grew != map[bool]int{true: 1, false: 0}[tc.status == 201] {
			t.Fatalf("%s: live keys grew by %d", tc.name, grew)
		}
	}
}
