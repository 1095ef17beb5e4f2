package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/node"
)

// A member that has joined with an empty data directory and not yet
// received any entry knows no key: it must answer 503 (try again or ask
// another node), never call a valid key invalid with 401.
func TestFreshMemberAnswers503NotUnauthorizedForAnUnknownKey(t *testing.T) {
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})
	n, err := node.New(node.Config{ID: "fresh", DataDir: t.TempDir(), RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:1",
		AdminAddr: "127.0.0.1:2", AdminToken: "t", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	srv := httptest.NewServer(New(n, log))
	t.Cleanup(func() { srv.Close(); _ = n.Shutdown() })
	r, _ := http.NewRequest("GET", srv.URL+"/v1/account", nil)
	r.Header.Set(KeyHeader, "pdk_0123456789abcdef0123456789abcdef0123456789abcdef")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("an unknown key on a member with no state yet: %d, want 503", res.StatusCode)
	}
}
