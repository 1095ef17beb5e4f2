package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/node"
)

// The order benchmarks drive POST /v1/orders into a one-node raft (its
// fsync included) over 16 funded traders at once, so groups form. They
// differ in what stands between the client and the server:
//
//   - BenchmarkPlaceMarketOrderHTTP: httptest.NewRequest and a
//     ResponseRecorder per order, so allocs/op counts the test's request
//     (a 4 KB bufio.Reader, a parsed request) and the recorder's copy of
//     the headers too;
//   - BenchmarkPlaceMarketOrderHTTPServer: the same handler chain with the
//     test's request and writer reused, so what is left is the server's
//     own (plus the fresh header map net/http gives every response);
//   - BenchmarkPlaceMarketOrderHTTPLayer: the Server variant with the node
//     answering at once (no draw, no raft, no apply), so ns/op is the
//     handler chain's own time;
//   - BenchmarkPlaceMarketOrderHTTPLoopback: a real net/http server, with
//     the production timeouts, on loopback keep-alive connections written
//     and read by a client that allocates nothing per order: what the
//     leader's process spends on an order, net/http included.
//
// Each reports cpu-ns/op, the process's user and system CPU per order
// (the one-node raft's included): ns/op is mostly the fsync wait.

// orderBenchTraders is how many traders place orders at once.
const orderBenchTraders = 16

// benchAddr is a free loopback address in the port range this package's
// benchmarks use.
func benchAddr(b *testing.B) string {
	for port := 29500; port < 29600; port++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			addr := l.Addr().String()
			l.Close()
			return addr
		}
	}
	b.Fatal("no free port in 29500-29599")
	return ""
}

// newOrderBench starts a one-node leader with the markets and a price, and
// signs up and funds the traders; it returns the server and their keys.
func newOrderBench(b *testing.B, opts ...Option) (*Server, []string) {
	cfg := node.Config{ID: "n1", DataDir: b.TempDir(), RaftAddr: benchAddr(b), HTTPAddr: "127.0.0.1:1",
		AdminAddr: "127.0.0.1:2", Bootstrap: true, AdminToken: "bench-token", Deployment: "bench",
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: io.Discard})}
	n, err := node.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	n.Start()
	b.Cleanup(func() { _ = n.Shutdown() })
	srv := New(n, cfg.Logger, append([]Option{WithBudgetScale(1000)}, opts...)...)
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
	printMid := func() (*fsm.Result, error) {
		return n.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "BTCUSD", MidQ8: btcStartQ8,
			ConfQ9: 300_000, TsMs: time.Now().UnixMilli()})
	}
	if res, err := printMid(); err != nil || !res.OK() {
		b.Fatalf("print: %v %+v", err, res)
	}
	// A print a second keeps the oracle fresh however long a loaded
	// machine takes over the run (orders refuse a print older than 10 s).
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_, _ = printMid()
			}
		}
	}()
	b.Cleanup(func() { close(stop); <-done })
	keys := make([]string, orderBenchTraders)
	for i := range keys {
		w := serveBench(srv, http.MethodPost, "/v1/signup", "", fmt.Sprintf("s%d", i), "{}")
		var s struct{ APIKey string }
		if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || s.APIKey == "" {
			b.Fatalf("signup %d: %s", w.Code, w.Body)
		}
		keys[i] = s.APIKey
		if w := serveBench(srv, http.MethodPost, "/v1/faucet", s.APIKey, fmt.Sprintf("f%d", i), "{}"); w.Code != http.StatusCreated {
			b.Fatalf("faucet %d: %s", w.Code, w.Body)
		}
	}
	return srv, keys
}

// serveBench answers one request the way the tests do.
func serveBench(srv *Server, method, path, key, idem, body string) *httptest.ResponseRecorder {
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

// benchOrderBody is a market order of one contract, buying on even seq and
// selling on odd, so positions stay small.
func benchOrderBody(seq int) string {
	side := "buy"
	if seq%2 == 1 {
		side = "sell"
	}
	return `{"marketId":"BTC-PERP","side":"` + side + `","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}`
}

// cpuNow is the process's user plus system CPU time.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runOrders runs order over the traders in parallel, timed, and reports
// the CPU per order. order gets the worker's trader and the worker's
// sequence number.
func runOrders(b *testing.B, setup func(trader int) func(seq int)) {
	var next atomic.Int64
	b.SetParallelism(orderBenchTraders / 2) // 2 cores here: 16 workers
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNow(b)
	b.RunParallel(func(pb *testing.PB) {
		order := setup(int(next.Add(1)-1) % orderBenchTraders)
		for seq := 0; pb.Next(); seq++ {
			order(seq)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkPlaceMarketOrderHTTP measures the leader's whole order path
// minus the socket: routing, the guards, strict decoding, the command, the
// group commit through a one-node raft (its fsync included), apply and the
// answer. allocs/op counts everything the node allocates per order, the
// test's own request and recorder included.
func BenchmarkPlaceMarketOrderHTTP(b *testing.B) {
	srv, keys := newOrderBench(b)
	runOrders(b, func(trader int) func(int) {
		return func(seq int) {
			if w := serveBench(srv, http.MethodPost, "/v1/orders", keys[trader], fmt.Sprintf("o%d-%d", trader, seq), benchOrderBody(seq)); w.Code != http.StatusCreated {
				b.Fatalf("order %d: %s", w.Code, w.Body)
			}
		}
	})
}

// benchWriter is a reusable http.ResponseWriter. Like net/http's, it
// starts every response with an empty header map of its own.
type benchWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

func (w *benchWriter) reset() {
	w.header, w.code = make(http.Header), 0
	w.body.Reset()
}

// benchBody is a reusable request body.
type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

// benchIdemKeys are the idempotency keys of b.N orders, made before the
// timer starts (the server keeps each as the order id).
func benchIdemKeys(b *testing.B) []string {
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = "o" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkPlaceMarketOrderHTTPServer is BenchmarkPlaceMarketOrderHTTP
// with the test's request and writer reused: allocs/op is the server's.
func BenchmarkPlaceMarketOrderHTTPServer(b *testing.B) {
	srv, keys := newOrderBench(b)
	runServedOrders(b, srv, keys)
}

// BenchmarkPlaceMarketOrderHTTPLayer is BenchmarkPlaceMarketOrderHTTPServer
// with a proposer that answers every order filled, at the applied index,
// without the node: the handler chain alone.
func BenchmarkPlaceMarketOrderHTTPLayer(b *testing.B) {
	var srv *Server
	var direct atomic.Bool // the traders' signups go through the node
	_, keys := newOrderBench(b, func(s *Server) { srv = s }, WithProposer(func(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
		if !direct.Load() {
			return srv.Node.Propose(ctx, cmd)
		}
		return &fsm.Result{Status: http.StatusCreated, Body: []byte(`{"orderId":"o","status":"filled"}`),
			Index: srv.Node.Machine().Applied()}, nil
	}))
	direct.Store(true)
	runServedOrders(b, srv, keys)
}

// runServedOrders places the orders through srv.ServeHTTP with reused
// requests and writers.
func runServedOrders(b *testing.B, srv *Server, keys []string) {
	idem := benchIdemKeys(b)
	var used atomic.Int64
	bodies := [2][]byte{[]byte(benchOrderBody(0)), []byte(benchOrderBody(1))}
	u, err := url.Parse("/v1/orders")
	if err != nil {
		b.Fatal(err)
	}
	runOrders(b, func(trader int) func(int) {
		tmpl := http.Request{Method: http.MethodPost, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Host: "example.com", RemoteAddr: "127.0.0.1:50000", RequestURI: "/v1/orders"}
		idemVal := []string{""}
		tmpl.Header = http.Header{"X-Api-Key": {keys[trader]}, "Idempotency-Key": idemVal,
			"Content-Type": {"application/json"}}
		var r http.Request
		var body benchBody
		w := &benchWriter{}
		return func(seq int) {
			r = tmpl // the server may have replaced the body
			body.Reset(bodies[seq%2])
			r.Body, r.ContentLength = &body, int64(body.Len())
			idemVal[0] = idem[used.Add(1)-1]
			w.reset()
			srv.ServeHTTP(w, &r)
			if w.code != http.StatusCreated {
				b.Fatalf("order %d: %s", w.code, w.body.Bytes())
			}
		}
	})
}

// BenchmarkPlaceMarketOrderHTTPLoopback sends the orders through a real
// net/http server over loopback keep-alive connections, one per worker.
func BenchmarkPlaceMarketOrderHTTPLoopback(b *testing.B) {
	srv, keys := newOrderBench(b)
	l, err := net.Listen("tcp", benchAddr(b))
	if err != nil {
		b.Fatal(err)
	}
	hs := cluster.NewHTTPServer(srv, cluster.DefaultTimeouts, nil)
	go func() { _ = hs.Serve(l) }()
	b.Cleanup(func() { _ = hs.Close() })
	var used atomic.Int64
	bodies := [2]string{benchOrderBody(0), benchOrderBody(1)}
	runOrders(b, func(trader int) func(int) {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		rd := bufio.NewReader(conn)
		head := "POST /v1/orders HTTP/1.1\r\nHost: " + l.Addr().String() + "\r\nUser-Agent: bench\r\nX-Api-Key: " +
			keys[trader] + "\r\nContent-Type: application/json\r\n"
		req := make([]byte, 0, 512)
		var body []byte
		return func(seq int) {
			req = append(req[:0], head...)
			req = append(req, "Idempotency-Key: o"...)
			req = strconv.AppendInt(req, used.Add(1)-1, 10)
			ob := bodies[seq%2]
			req = append(req, "\r\nContent-Length: "...)
			req = strconv.AppendInt(req, int64(len(ob)), 10)
			req = append(req, "\r\n\r\n"...)
			req = append(req, ob...)
			if _, err := conn.Write(req); err != nil {
				b.Fatal(err)
			}
			var code int
			code, body, err = readBenchResponse(rd, body)
			if err != nil {
				b.Fatal(err)
			}
			if code != http.StatusCreated {
				b.Fatalf("order %d: %s", code, body)
			}
		}
	})
}

// readBenchResponse reads one HTTP/1.1 response with a Content-Length into
// buf, without allocating once buf is large enough.
func readBenchResponse(rd *bufio.Reader, buf []byte) (code int, body []byte, err error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return 0, buf, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, buf, fmt.Errorf("status line %q", line)
	}
	for _, d := range line[9:12] {
		code = code*10 + int(d-'0')
	}
	length := -1
	for {
		line, err = rd.ReadSlice('\n')
		if err != nil {
			return 0, buf, err
		}
		if len(line) <= 2 {
			break
		}
		const cl = "content-length:"
		if len(line) > len(cl) && bytes.EqualFold(line[:len(cl)], []byte(cl)) {
			length = 0
			for _, d := range bytes.TrimSpace(line[len(cl):]) {
				length = length*10 + int(d-'0')
			}
		}
	}
	if length < 0 {
		return 0, buf, fmt.Errorf("no Content-Length")
	}
	if cap(buf) < length {
		buf = make([]byte, length)
	}
	buf = buf[:length]
	_, err = io.ReadFull(rd, buf)
	return code, buf, err
}
