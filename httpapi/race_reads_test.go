package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/wsapi"
)

// Reads are served from the node's applied state while raft applies the
// next entries (docs/architecture.md, Read path): a view that kept a
// reference into the state past Machine.Read, or a handler cache written
// without its lock, is a data race that only shows with readers and the
// applier at once. This test is that load, for `go test -race` (make
// race): traders place and cancel orders and the oracle prints while
// readers walk every GET route that reads the state, each of them several
// times. Without -race it only checks that every read answers 200.
func TestEveryReadRouteWhileEntriesApply(t *testing.T) {
	a := newTestAPIWith(t, []Option{WithBudgetScale(MaxBudgetScale)})
	a.listMarkets()
	a.freshPrices()
	const traders = 3
	keys := make([]string, traders)
	handles := make([]string, traders)
	for i := range keys {
		keys[i], _ = a.tradingAccount()
		if r := a.do(req{method: "POST", path: "/v1/leaderboard/settings", key: keys[i], idem: nextIdem(),
			body: map[string]any{"displayName": fmt.Sprintf("Racer %d", i)}}); r.status != 200 {
			t.Fatalf("settings: %d %s", r.status, r.body)
		}
		handles[i] = a.do(req{method: "GET", path: "/v1/leaderboard/me", key: keys[i]}).json(t)["handle"].(string)
		for j, side := range []string{"buy", "sell"} {
			if r := a.do(req{method: "POST", path: "/v1/orders", key: keys[i], idem: fmt.Sprintf("seed-%d-%d", i, j),
				body: orderBody("ETH-PERP", side, "market", "5", nil)}); r.status != 201 {
				t.Fatalf("seed order: %d %s", r.status, r.body)
			}
		}
	}

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		failure string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		if failure == "" {
			failure = fmt.Sprintf(format, args...)
		}
		mu.Unlock()
		stop.Store(true)
	}
	client := a.http.Client()
	call := func(method, path, key, idem, body string) (int, string) {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		hr, err := http.NewRequestWithContext(context.Background(), method, a.http.URL+path, rd)
		if err != nil {
			return 0, err.Error()
		}
		if key != "" {
			hr.Header.Set(KeyHeader, key)
		}
		if idem != "" {
			hr.Header.Set(IdemHeader, idem)
		}
		res, err := client.Do(hr)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	// Writers: every trader trades and rests and cancels limit orders on
	// both markets; the oracle prints new mids (fills, funding clocks,
	// triggers, candles, the ticker's last price all move).
	for i, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				mkt := []string{"ETH-PERP", "BTC-PERP"}[n%2]
				side := []string{"buy", "sell"}[(n/2)%2]
				if st, body := call("POST", "/v1/orders", key, nextIdem(),
					fmt.Sprintf(`{"marketId":%q,"side":%q,"type":"market","contracts":"1","reduceOnly":false}`, mkt, side)); st != 201 {
					fail("trader %d market order: %d %s", i, st, body)
					return
				}
				id := fmt.Sprintf("rest-%d-%d", i, n)
				if st, body := call("POST", "/v1/orders", key, id,
					`{"marketId":"ETH-PERP","side":"buy","type":"limit","contracts":"1","reduceOnly":false,"limitPriceQ8":"100000000000"}`); st != 201 {
					fail("trader %d limit order: %d %s", i, st, body)
					return
				}
				if n%2 == 0 {
					if st, body := call("DELETE", "/v1/orders/"+id, key, id, ""); st != 200 {
						fail("trader %d cancel: %d %s", i, st, body)
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := int64(0); !stop.Load(); n++ {
			now := time.Now().UnixMilli()
			_, _ = a.node.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "BTCUSD", MidQ8: btcStartQ8 + n%50*btcStartQ8/1000, ConfQ9: 300_000, TsMs: now})
			_, _ = a.node.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "ETHUSD", MidQ8: ethStartQ8 - n%50*ethStartQ8/1000, ConfQ9: 300_000, TsMs: now})
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// Beside them, what else reads the state or the events while entries
	// apply: raft snapshots (the shadow machine replays and encodes the
	// log next to the live one), state hashes, and a WebSocket hub that
	// renders every event for a connection on each channel.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, rc, err := a.node.TakeSnapshot(); err == nil {
				_ = rc.Close()
			}
			if _, _, err := a.node.StateHash(context.Background()); err != nil {
				fail("state hash: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	hubCtx, stopHub := context.WithCancel(context.Background())
	defer stopHub()
	hub := wsapi.New(a.node, hclog.NewNullLogger())
	go hub.Run(hubCtx)
	wsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hub.ServeClient(w, r, "127.0.0.1") }))
	defer wsSrv.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(wsSrv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, f := range []string{`{"op":"auth","apiKey":"` + keys[0] + `"}`, `{"op":"subscribe","channel":"account"}`,
		`{"op":"subscribe","channel":"prices","feedId":"BTCUSD"}`, `{"op":"subscribe","channel":"prices","feedId":"ETHUSD"}`,
		`{"op":"subscribe","channel":"stats","marketId":"ETH-PERP"}`, `{"op":"subscribe","channel":"stats","marketId":"BTC-PERP"}`} {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	var frames atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return // closed at the end
			}
			frames.Add(1)
		}
	}()

	// Readers: every GET route that reads the state, each a few times.
	paths := []string{"/healthz", "/v1/account", "/v1/deposits", "/v1/sessions", "/v1/limits", "/v1/referral",
		"/v1/referral/earnings", "/v1/referral/referees", "/v1/promoter", "/v1/promoter/codes", "/v1/promoter/stats",
		"/v1/promoter/earnings", "/v1/leaderboard", "/v1/leaderboard/me", "/v1/leaderboard/trader/" + handles[0],
		"/v1/markets", "/v1/markets/ETH-PERP", "/v1/markets/ETH-PERP/funding", "/v1/markets/ETH-PERP/stats24h",
		"/v1/markets/BTC-PERP/candles?interval=60", "/v1/public/ticker", "/v1/orders", "/v1/orders?status=accepted",
		"/v1/orders/rest-0-1", "/v1/positions", "/v1/fills", "/v1/withdrawals", "/v1/funding", "/v1/liquidations",
		"/v1/usdx", "/v1/usdx/unstakes", "/v1/usdx/history", "/v1/usdx/withdrawals", "/v1/usdx/freezes",
		"/v1/usdx/activity", "/v1/por/proof"}
	const readers, rounds = 3, 4
	var readersWG sync.WaitGroup
	for r := range readers {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			for round := range rounds {
				for _, p := range paths {
					if stop.Load() {
						return
					}
					st, body := call("GET", p, keys[(r+round)%traders], "", "")
					// 404: an order not placed yet, no Proof of Reserves
					// tree yet (the first is built after a minute of log
					// time).
					if st != 200 && st != 404 {
						fail("GET %s: %d %s", p, st, body)
						return
					}
				}
			}
		}()
	}
	readersWG.Wait()
	stop.Store(true)
	_ = ws.Close()
	wg.Wait()
	if failure != "" {
		t.Fatal(failure)
	}
	if frames.Load() == 0 {
		t.Fatal("the WebSocket connection received no frame")
	}
	a.seen = nil // thousands of exchanges; the routes' own tests check the description
}
