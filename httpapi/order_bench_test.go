package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/node"
)

// BenchmarkPlaceMarketOrderHTTP measures the leader's whole order path
// minus the socket: routing, the guards, strict decoding, the command, the
// group commit through a one-node raft (its fsync included), apply and the
// answer, over 16 funded traders at once so groups form. allocs/op counts
// everything the node allocates per order, the test's own request
// included.
func BenchmarkPlaceMarketOrderHTTP(b *testing.B) {
	const traders = 16
	cfg := node.Config{ID: "n1", DataDir: b.TempDir(), RaftAddr: freeAddr(b), HTTPAddr: "127.0.0.1:1",
		AdminAddr: "127.0.0.1:2", Bootstrap: true, AdminToken: "bench-token", Deployment: "bench",
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: io.Discard})}
	n, err := node.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	n.Start()
	b.Cleanup(func() { _ = n.Shutdown() })
	srv := New(n, cfg.Logger, WithBudgetScale(1000))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ready := false
		n.Machine().Read(func(st *fsm.State, _ uint64) { ready = st.Genesis != nil })
		if ready {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("node never reached genesis")
		}
	}
	if res, err := n.ProposeInternal(fsm.CmdMarketsGenesis, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue(),
		Anchors: []fsm.FeedAnchor{{FeedID: "BTCUSD", MidQ8: btcStartQ8}}}); err != nil || !res.OK() {
		b.Fatalf("markets genesis: %v %+v", err, res)
	}
	if res, err := n.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "BTCUSD", MidQ8: btcStartQ8,
		ConfQ9: 300_000, TsMs: time.Now().UnixMilli()}); err != nil || !res.OK() {
		b.Fatalf("print: %v %+v", err, res)
	}
	serve := func(method, path, key, idem, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.RemoteAddr = "127.0.0.1:50000"
		if key != "" {
			r.Header.Set("X-Api-Key", key)
		}
		r.Header.Set("Idempotency-Key", idem)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	keys := make([]string, traders)
	for i := range keys {
		w := serve(http.MethodPost, "/v1/signup", "", fmt.Sprintf("s%d", i), "{}")
		var s struct{ APIKey string }
		if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || s.APIKey == "" {
			b.Fatalf("signup %d: %s", w.Code, w.Body)
		}
		keys[i] = s.APIKey
		if w := serve(http.MethodPost, "/v1/faucet", s.APIKey, fmt.Sprintf("f%d", i), "{}"); w.Code != http.StatusCreated {
			b.Fatalf("faucet %d: %s", w.Code, w.Body)
		}
	}
	var next atomic.Int64
	b.SetParallelism(traders / 2) // 2 cores here: 16 workers
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1) - 1
		key := keys[i%traders]
		for seq := 0; pb.Next(); seq++ {
			side := "buy"
			if seq%2 == 1 {
				side = "sell"
			}
			body := `{"marketId":"BTC-PERP","side":"` + side + `","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}`
			if w := serve(http.MethodPost, "/v1/orders", key, fmt.Sprintf("o%d-%d", i, seq), body); w.Code != http.StatusCreated {
				b.Fatalf("order %d: %s", w.Code, w.Body)
			}
		}
	})
}
