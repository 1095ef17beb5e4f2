package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// sendHeaders sends one request with header lines added in order (a name
// may repeat, which req's map cannot say) and records the exchange.
func (a *testAPI) sendHeaders(method, path, body string, lines [][2]string) resp {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	hr, err := http.NewRequest(method, a.http.URL+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	for _, l := range lines {
		hr.Header.Add(l[0], l[1])
	}
	res, err := a.http.Client().Do(hr)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, body: b}
	a.seenMu.Lock()
	a.seen = append(a.seen, exchange{method: method, path: path, status: out.status, header: out.header, body: b})
	a.seenMu.Unlock()
	return out
}

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
		if r := a.sendHeaders("GET", "/v1/markets", "", hs); r.status != 400 || r.code() != "validation" {
			t.Errorf("%s, public read: %d %s, want 400 validation", name, r.status, r.body)
		}
		keyed := append([][2]string{{KeyHeader, key}}, hs...)
		if r := a.sendHeaders("GET", "/v1/account", "", keyed); r.status != 400 || r.code() != "validation" {
			t.Errorf("%s, keyed read: %d %s, want 400 validation", name, r.status, r.body)
		}
		write := append([][2]string{{KeyHeader, key}, {IdemHeader, nextIdem()}}, hs...)
		if r := a.sendHeaders("POST", "/v1/faucet", "{}", write); r.status != 400 || r.code() != "validation" {
			t.Errorf("%s, write: %d %s, want 400 validation", name, r.status, r.body)
		}
		// An unknown key is still judged first: 401, without a wait.
		unknown := append([][2]string{{KeyHeader, "pdk_not_a_key"}}, hs...)
		if r := a.sendHeaders("GET", "/v1/account", "", unknown); r.status != 401 {
			t.Errorf("%s, unknown key: %d %s, want 401", name, r.status, r.body)
		}
	}
	if free := a.do(req{method: "GET", path: "/v1/account", key: key}).json(t)["freeMsat"]; free != "0" {
		t.Errorf("a refused faucet request credited the account: freeMsat %v", free)
	}
	// One of each is still honoured.
	if r := a.sendHeaders("GET", "/v1/account", "", [][2]string{{KeyHeader, key}, {"X-Min-Index", now}, {"X-Consistency", "linearizable"}}); r.status != 200 {
		t.Errorf("one X-Min-Index and one X-Consistency: %d %s", r.status, r.body)
	}
}
