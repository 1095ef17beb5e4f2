package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/node"
)

// Before this replica applied the genesis, the routes
// that read or write the state answer 503 with Retry-After and propose
// nothing: they used to answer an empty catalogue and take signups into the
// log ahead of the genesis, applied without its rules. The documents and
// /healthz still answer, and everything serves once the genesis lands.
func TestRoutesWaitForTheGenesis(t *testing.T) {
	cfg := testNodeConfig(t)
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Not started: the leader's drivers, which propose the genesis, wait.
	srv := httptest.NewServer(New(n, cfg.Logger))
	t.Cleanup(func() {
		srv.Close()
		_ = n.Shutdown()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !n.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	call := func(method, path, idem string) (int, http.Header, []byte) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("{}")
		}
		req, _ := http.NewRequest(method, srv.URL+path, body)
		req.Header.Set("content-type", "application/json")
		if idem != "" {
			req.Header.Set("idempotency-key", idem)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, b
	}
	// A new leader appends its no-op entry just after it takes office:
	// wait for it (a barrier comes after), or it lands among the calls.
	if err := n.Raft.Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	before := n.Raft.LastIndex()
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/markets"},
		{http.MethodGet, "/v1/markets/BTC-PERP"},
		{http.MethodGet, "/v1/public/ticker"},
		{http.MethodGet, "/por"},
		{http.MethodPost, "/v1/signup"},
	} {
		status, h, b := call(c.method, c.path, "k1")
		var e struct{ Error, Code string }
		_ = json.Unmarshal(b, &e)
		if status != http.StatusServiceUnavailable || e.Code != wire.CodeUnavailable || h.Get("Retry-After") != "1" ||
			h.Get(HeaderNotApplied) != "1" || !strings.Contains(e.Error, "genesis") {
			t.Fatalf("%s %s before the genesis: %d %q retry-after %q: %s", c.method, c.path, status, e.Code, h.Get("Retry-After"), b)
		}
	}
	if after := n.Raft.LastIndex(); after != before {
		t.Fatalf("refused requests reached the log: last index %d -> %d", before, after)
	}
	if status, _, b := call(http.MethodGet, "/openapi.json", ""); status != http.StatusOK {
		t.Fatalf("openapi.json before the genesis: %d %.200s", status, b)
	}
	if status, _, b := call(http.MethodGet, "/healthz", ""); status != http.StatusServiceUnavailable || !strings.Contains(string(b), "genesis") {
		t.Fatalf("healthz before the genesis: %d %s", status, b)
	}

	n.Start()
	for {
		status, _, b := call(http.MethodGet, "/v1/public/ticker", "")
		if status == http.StatusOK {
			break
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline.Add(10*time.Second)) {
			t.Fatalf("after start: %d %s", status, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status, h, b := call(http.MethodPost, "/v1/signup", "k2"); status != http.StatusCreated || h.Get(HeaderNotApplied) != "" {
		t.Fatalf("signup after the genesis: %d %s %v", status, b, h)
	}
	// A 503 given after proposing (no leader took the write in time) may
	// hide a committed write: it must not say "not applied".
	lost := httptest.NewServer(New(n, cfg.Logger, WithProposer(func(context.Context, *fsm.Command) (*fsm.Result, error) {
		return nil, node.ErrUnavailable
	})))
	t.Cleanup(lost.Close)
	req, _ := http.NewRequest(http.MethodPost, lost.URL+"/v1/signup", strings.NewReader("{}"))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("idempotency-key", "k3")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get(HeaderNotApplied) != "" {
		t.Fatalf("a propose timeout answered %d %v: %s", res.StatusCode, res.Header, b)
	}
}

// The description declares X-Not-Applied on every 503 a write can get, so
// a generated client knows the header that tells it a write certainly was
// not applied.
func TestNotAppliedIsDescribedOnEvery503(t *testing.T) {
	a := newTestAPI(t)
	doc := a.srv.OpenAPI()
	seen := 0
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			resp, ok := op.(map[string]any)["responses"].(map[string]any)["503"].(map[string]any)
			if !ok {
				continue
			}
			seen++
			if headers, _ := resp["headers"].(map[string]any); headers[HeaderNotApplied] == nil {
				t.Errorf("%s %s: its 503 does not declare %s", method, path, HeaderNotApplied)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no route declares a 503")
	}
}
