package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
)

// testAPI is a one-node cluster with its public API on an httptest server.
type testAPI struct {
	t    testing.TB
	node *node.Node
	srv  *Server
	http *httptest.Server
	// seen records every exchange for the OpenAPI response validation;
	// tests call do from several goroutines at once, so seenMu guards it.
	seenMu sync.Mutex
	seen   []exchange
}

type exchange struct {
	method, path, query string
	status              int
	header              http.Header
	body                []byte
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newTestAPI(t *testing.T, mut ...func(*node.Config)) *testAPI {
	t.Helper()
	return newTestAPIWith(t, nil, mut...)
}

// newTestAPIWith is newTestAPI with server options.
func newTestAPIWith(t testing.TB, opts []Option, mut ...func(*node.Config)) *testAPI {
	t.Helper()
	return newDrivenTestAPI(t, opts, nil, mut...)
}

// newDrivenTestAPI is newTestAPIWith with leader drivers (a rail's),
// registered before the node starts, as `perpd serve` does.
func newDrivenTestAPI(t testing.TB, opts []Option, drivers []func(*node.Node), mut ...func(*node.Config)) *testAPI {
	t.Helper()
	cfg := testNodeConfig(t)
	for _, m := range mut {
		m(&cfg)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drivers {
		n.AddLeaderDriver(d)
	}
	n.Start()
	a := &testAPI{t: t, node: n, srv: New(n, cfg.Logger, opts...)}
	a.http = httptest.NewServer(a.srv)
	t.Cleanup(func() {
		validateExchanges(t, a)
		a.http.Close()
		_ = n.Shutdown()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		ready := false
		n.Machine().Read(func(st *fsm.State, _ uint64) { ready = st.Genesis != nil })
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node never reached genesis")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a
}

// testNodeConfig is the one-node cluster of the test API.
func testNodeConfig(t testing.TB) node.Config {
	return node.Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:1",
		AdminAddr: "127.0.0.1:2", Bootstrap: true, AdminToken: "test-token", CheckInvariants: true,
		TickInterval: 50 * time.Millisecond, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})}
}

// req is one request to the test API.
type req struct {
	method, path string
	key, idem    string
	body         any // string = raw body; otherwise JSON-encoded
	header       map[string]string
	// lines are header lines added after header, in order: a name may
	// repeat, which header cannot say.
	lines [][2]string
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("not a JSON object (%d): %s", r.status, r.body)
	}
	return m
}

func (r resp) code() string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

func (a *testAPI) do(r req) resp {
	a.t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	hr, err := http.NewRequestWithContext(context.Background(), r.method, a.http.URL+r.path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	if r.key != "" {
		hr.Header.Set(KeyHeader, r.key)
	}
	if r.idem != "" {
		hr.Header.Set(IdemHeader, r.idem)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	for _, l := range r.lines {
		hr.Header.Add(l[0], l[1])
	}
	res, err := a.http.Client().Do(hr)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, body: b}
	p, q, _ := strings.Cut(r.path, "?")
	a.seenMu.Lock()
	a.seen = append(a.seen, exchange{method: r.method, path: p, query: q, status: out.status, header: out.header, body: b})
	a.seenMu.Unlock()
	return out
}

// idemCounter is atomic: tests draw keys from several goroutines at once.
var idemCounter atomic.Int64

func nextIdem() string {
	return fmt.Sprintf("idem-%d-%d", time.Now().UnixNano(), idemCounter.Add(1))
}

// signup creates an account and returns its master key and account id.
func (a *testAPI) signup() (key, account string) {
	a.t.Helper()
	r := a.do(req{method: "POST", path: "/v1/signup", idem: nextIdem(), body: map[string]any{}})
	if r.status != 201 {
		a.t.Fatalf("signup: %d %s", r.status, r.body)
	}
	m := r.json(a.t)
	return m["apiKey"].(string), m["accountId"].(string)
}

// mint mints a delegate key with the given scopes.
func (a *testAPI) mint(master string, scopes ...string) (key, keyID string) {
	a.t.Helper()
	r := a.do(req{method: "POST", path: "/v1/sessions", key: master, idem: nextIdem(),
		body: map[string]any{"label": "t", "scopes": scopes}})
	if r.status != 201 {
		a.t.Fatalf("mint %v: %d %s", scopes, r.status, r.body)
	}
	m := r.json(a.t)
	return m["apiKey"].(string), m["keyId"].(string)
}
