package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

// freshMember serves the API of a member that has joined with an empty
// data directory and not yet received any entry: it is behind, and knows
// no key.
func freshMember(t *testing.T, opts ...Option) *httptest.Server {
	t.Helper()
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
	n, err := node.New(node.Config{ID: "fresh", DataDir: t.TempDir(), RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:1",
		AdminAddr: "127.0.0.1:2", AdminToken: "t", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	srv := httptest.NewServer(New(n, log, opts...))
	t.Cleanup(func() { srv.Close(); _ = n.Shutdown() })
	return srv
}

// accountWithUnknownKey answers GET /v1/account with a key srv does not
// know.
func accountWithUnknownKey(t *testing.T, srv *httptest.Server) int {
	t.Helper()
	r, _ := http.NewRequest("GET", srv.URL+"/v1/account", nil)
	r.Header.Set(KeyHeader, "pdk_0123456789abcdef0123456789abcdef0123456789abcdef")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// A member that has joined with an empty data directory and not yet
// received any entry knows no key: it must answer 503 (try again or ask
// another node), never call a valid key invalid with 401.
func TestFreshMemberAnswers503NotUnauthorizedForAnUnknownKey(t *testing.T) {
	if got := accountWithUnknownKey(t, freshMember(t)); got != http.StatusServiceUnavailable {
		t.Fatalf("an unknown key on a member with no state yet: %d, want 503", got)
	}
}

// A lagging node waits for the log before it refuses an unknown key, and
// that wait comes before any key's budget: it is drawn from the client
// address's public read budget, so made-up keys cannot keep a lagging
// node's goroutines waiting without limit.
func TestUnknownKeyOnALaggingNodeDrawsTheAddressBudget(t *testing.T) {
	srv := freshMember(t, WithBudgets(tinyRead()))
	for i := range 3 { // tinyRead's burst
		if got := accountWithUnknownKey(t, srv); got != http.StatusServiceUnavailable {
			t.Fatalf("unknown key %d within the address's burst: %d, want 503", i+1, got)
		}
	}
	if got := accountWithUnknownKey(t, srv); got != http.StatusTooManyRequests {
		t.Fatalf("unknown key past the address's burst: %d, want 429", got)
	}
}
