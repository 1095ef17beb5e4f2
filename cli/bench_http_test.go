package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/cli/loadgen"
	"github.com/perpd/perpd/cluster/clustertest"
)

// etcdGateway answers POST /v3/kv/put as etcd's JSON gateway does, after
// checking the key and value are base64; it counts puts and keys.
type etcdGateway struct {
	mu   sync.Mutex
	keys map[string]bool
	dup  bool
	bad  atomic.Int64
	puts atomic.Int64
}

func (g *etcdGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.puts.Add(1)
	var put struct{ Key, Value string }
	raw, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v3/kv/put" || json.Unmarshal(raw, &put) != nil {
		g.bad.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	k, kerr := base64.StdEncoding.DecodeString(put.Key)
	_, verr := base64.StdEncoding.DecodeString(put.Value)
	if kerr != nil || verr != nil || !strings.HasPrefix(string(k), "bench/") {
		g.bad.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	g.dup = g.dup || g.keys[string(k)]
	g.keys[string(k)] = true
	g.mu.Unlock()
	_, _ = io.WriteString(w, `{"header":{"cluster_id":"1","member_id":"2","revision":"3","raft_term":"4"}}`)
}

// `perpd bench http` (reached through `perpd bench`) against an
// etcd-like server: the puts arrive well formed with unique keys, and the
// table and the JSON result report them.
func TestBenchHTTPAgainstAnHTTPTestServer(t *testing.T) {
	g := &etcdGateway{keys: map[string]bool{}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "etcd.json")
	cmd := benchCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"http", "--label", "etcd", "--url", srv.URL + "/v3/kv/put," + srv.URL + "/v3/kv/put",
		"--concurrency", "8", "--warmup", "200ms", "--duration", "1s", "--out", out,
		"--body", `{"key":"{{b64:bench/{{run}}/{{worker}}/{{seq}}}}","value":"{{b64:value-{{seq}}}}"}`})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("bench http: %v\n%s", err, stdout.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res loadgen.HTTPResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result: %v\n%s", err, raw)
	}
	t.Logf("\n%s", stdout.String())
	if g.bad.Load() != 0 || g.dup {
		t.Fatalf("%d malformed puts, duplicate keys %v", g.bad.Load(), g.dup)
	}
	q := res.Requests
	if res.Label != "etcd" || res.Workers != 8 || res.Config.Method != http.MethodPost || len(res.Config.URLs) != 2 ||
		q.OK == 0 || q.Count != q.OK || len(q.Errors) != 0 || q.OKPerSec <= 0 || q.P99Ms <= 0 {
		t.Fatalf("result %+v", res)
	}
	// The warmup's puts reached the server but are not in the result.
	if q.Count >= g.puts.Load() {
		t.Fatalf("measured %d of %d puts: the warmup was counted", q.Count, g.puts.Load())
	}
	if !strings.Contains(stdout.String(), "etcd: 8 workers") || !strings.Contains(stdout.String(), "ok/s") {
		t.Fatalf("table:\n%s", stdout.String())
	}
}

func TestBenchHTTPRefusesBadFlagsBeforeCallingAnyone(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	for _, args := range [][]string{
		{},
		{"--url", "not a url"},
		{"--url", srv.URL, "--body", "{{nope}}"},
		{"--url", srv.URL, "--body", "{{b64:x"},
		{"--url", srv.URL, "--header", "no colon"},
		{"--url", srv.URL, "--header", "x-api-key: {{key}}"},
		{"--url", srv.URL, "--concurrency", "0"},
		{"--url", srv.URL, "--duration", "0s"},
		{"--url", srv.URL, "--warmup", "-1s"},
		{"--url", srv.URL, "--method", "BREW"},
		{"--url", srv.URL, "--request-timeout", "0s"},
		{"--url", srv.URL, "extra"},
	} {
		cmd := benchCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"http", "--duration", "1s"}, args...))
		began := time.Now()
		if err := cmd.ExecuteContext(context.Background()); err == nil {
			t.Errorf("%v accepted", args)
		}
		if time.Since(began) > 500*time.Millisecond {
			t.Errorf("%v took %v", args, time.Since(began))
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d requests sent by refused runs", n)
	}
}

// `perpd bench http --perpd-signup` and `perpd bench ws` against one
// in-process node of the bench profile, wired as `perpd serve` wires it:
// every order is accepted, and the WebSocket clients receive prices, stats
// and their accounts' events.
func TestBenchHTTPAndWSAgainstABenchNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for a few seconds")
	}
	c := clustertest.Start(t, 1, clustertest.Assemble(Assemble), clustertest.Deployment("bench"))
	base := "http://" + c.Leader().HTTPAddr

	dir := t.TempDir()
	cmd := benchCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"http", "--label", "perpd", "--url", base + "/v1/orders", "--perpd-signup",
		"--concurrency", "4", "--duration", "1500ms", "--out", filepath.Join(dir, "http.json"),
		"--header", "x-api-key: {{key}}", "--header", "idempotency-key: {{uuid}}",
		"--body", `{"marketId":"BTC-PERP","side":"{{alt:buy|sell}}","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}`})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("bench http: %v\n%s", err, stdout.String())
	}
	var h loadgen.HTTPResult
	readJSON(t, filepath.Join(dir, "http.json"), &h)
	if h.Tier != "bench" || h.Requests.OK == 0 || h.Requests.Count != h.Requests.OK || h.Setup[loadgen.OpSignup].OK != 4 {
		t.Fatalf("orders: %+v\n%s", h, stdout.String())
	}

	cmd = benchCmd()
	stdout.Reset()
	cmd.SetOut(&stdout)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"ws", "--nodes", base, "--clients", "20", "--account-clients", "6", "--traders", "2",
		"--order-every", "100ms", "--warmup", "300ms", "--duration", "2s", "--out", filepath.Join(dir, "ws.json")})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("bench ws: %v\n%s", err, stdout.String())
	}
	t.Logf("\n%s", stdout.String())
	var w loadgen.WSResult
	readJSON(t, filepath.Join(dir, "ws.json"), &w)
	if w.ClientsConnected != 20 || len(w.Closed) != 0 || w.Orders.OK == 0 || len(w.Orders.Errors) != 0 {
		t.Fatalf("ws: %+v", w)
	}
	// A frame stamped a fraction of a millisecond after it arrived is the
	// wall clock being slewed under the run (NTP), which the tool counts
	// as 0 ms: a few are tolerated, a systematic lead is not (CI saw 9 of
	// 360 account frames on a loaded 2-core machine).
	for _, ch := range []string{"prices", "stats", "account"} {
		if s := w.Series[ch]; s.Frames == 0 || s.Negatives*20 > s.Frames || s.P99Ms <= 0 {
			t.Errorf("%s: %+v", ch, s)
		}
	}
	// Every client is on prices and stats: their frames come in multiples
	// of the clients (give or take the frames at the window's edges).
	if p := w.Series["prices"].Frames; p < 20 {
		t.Errorf("%d price frames for 20 clients over 2 s", p)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, raw)
	}
}
