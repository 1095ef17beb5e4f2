package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAPIKeyGivenTwiceIsRefused: two x-api-key headers on one request were
// read as the first, the second ignored, while a proxy, a gateway's own
// meter or an audit log that keeps the last saw another caller (another
// account, even). As with idempotency-key, a credential given twice is
// refused: 401 unauthorized, nothing applied, whichever comes first and
// whether or not the two agree.
func TestAPIKeyGivenTwiceIsRefused(t *testing.T) {
	a := newTestAPI(t)
	alice, _ := a.signup()
	bob, _ := a.signup()
	for _, second := range []string{bob, "pdk_not_a_key", alice} {
		hr, err := http.NewRequest("POST", a.http.URL+"/v1/faucet", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Add(KeyHeader, alice)
		hr.Header.Add(KeyHeader, second)
		hr.Header.Set(IdemHeader, "grant-1")
		res, err := a.http.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if r := (resp{status: res.StatusCode, body: b}); r.status != 401 || r.code() != "unauthorized" {
			t.Fatalf("two x-api-key headers: %d %s, want 401 unauthorized", r.status, r.body)
		}
	}
	// Nothing was applied: neither account holds a grant.
	for _, k := range []string{alice, bob} {
		if free := a.do(req{method: "GET", path: "/v1/account", key: k}).json(t)["freeMsat"]; free != "0" {
			t.Fatalf("an account was credited by a refused request: freeMsat %v", free)
		}
	}
}
