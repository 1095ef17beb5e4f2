package wsapi

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
)

// The hub's state is touched from many goroutines at once: each
// connection's reader (auth, subscribe, unsubscribe), melody's writers
// and disconnects, the hub's Run loop (every event, pings, revocations).
// This test is that load, for `go test -race` (make race): clients
// connect, authenticate, switch accounts, subscribe and unsubscribe and
// hang up while prints, orders and key revocations stream events and the
// hub pings every 20 ms. Without -race it checks that the hub keeps
// serving a fresh client through it all.
func TestHubUnderConnectionChurnWhileEventsFlow(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = 20 * time.Millisecond })
	res, err := e.node.ProposeInternal(fsm.CmdMarketsGenesis, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue(),
		Anchors: []fsm.FeedAnchor{{FeedID: "BTCUSD", MidQ8: 97_000 * market.Q8}, {FeedID: "ETHUSD", MidQ8: 3_400 * market.Q8}}})
	if err != nil || !res.OK() {
		t.Fatalf("markets genesis: %v %+v", err, res)
	}
	var masters []string
	for range 2 {
		m := e.post("/v1/signup", "", "{}")["apiKey"].(string)
		e.post("/v1/faucet", m, "{}")
		masters = append(masters, m)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	// Events: prints (prices, stats), orders (order, fill, position),
	// minted and revoked keys (session_revoked, which walks every
	// connection).
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := int64(0); !stop.Load(); n++ {
			_, _ = e.node.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "BTCUSD",
				MidQ8: (97_000 + n%20) * market.Q8, ConfQ9: 300_000, TsMs: time.Now().UnixMilli()})
			side := []string{"buy", "sell"}[n%2]
			e.post("/v1/orders", masters[n%2], `{"marketId":"BTC-PERP","side":"`+side+`","type":"market","contracts":"1","reduceOnly":false}`)
			if n%4 == 0 {
				minted := e.post("/v1/sessions", masters[0], `{"scopes":["read"]}`)
				if id, ok := minted["keyId"].(string); ok {
					e.post("/v1/sessions/revoke", masters[0], `{"keyId":"`+id+`"}`)
				}
			}
		}
	}()
	// Clients: each connects, authenticates as one account and then the
	// other, subscribes and unsubscribes, and hangs up without a close
	// frame half of the time.
	var frames atomic.Int64
	url := "ws" + e.http.URL[len("http"):] + "/v1/ws"
	const clients, rounds = 4, 6
	var clientsWG sync.WaitGroup
	for i := range clients {
		clientsWG.Add(1)
		go func() {
			defer clientsWG.Done()
			for r := range rounds {
				c, _, err := websocket.DefaultDialer.Dial(url, nil)
				if err != nil {
					t.Errorf("client %d round %d: %v", i, r, err)
					return
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						if _, _, err := c.ReadMessage(); err != nil {
							return
						}
						frames.Add(1)
					}
				}()
				for _, f := range []string{
					`{"op":"auth","apiKey":"` + masters[(i+r)%2] + `"}`,
					`{"op":"subscribe","channel":"account"}`,
					`{"op":"subscribe","channel":"prices","feedId":"BTCUSD"}`,
					`{"op":"subscribe","channel":"stats","marketId":"BTC-PERP"}`,
					`{"op":"auth","apiKey":"` + masters[(i+r+1)%2] + `"}`,
					`{"op":"subscribe","channel":"account"}`,
					`{"op":"unsubscribe","channel":"prices","feedId":"BTCUSD"}`,
					`{"op":"pong"}`,
				} {
					if err := c.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
						break
					}
					time.Sleep(time.Millisecond)
				}
				time.Sleep(30 * time.Millisecond)
				if r%2 == 0 {
					_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
				}
				_ = c.Close()
				<-done
			}
		}()
	}
	clientsWG.Wait()
	// The hub still serves: a fresh client is told about the next print.
	c := e.dial()
	send(t, c, map[string]any{"op": "subscribe", "channel": "prices", "feedId": "BTCUSD"})
	next(t, c, "subscribed")
	stop.Store(true)
	wg.Wait()
	if _, err := e.node.ProposeInternal(fsm.CmdOraclePrint, fsm.OraclePrintPayload{FeedID: "BTCUSD",
		MidQ8: 97_100 * market.Q8, ConfQ9: 300_000, TsMs: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, c, "event"); m["channel"] != "prices" {
		t.Fatalf("after the churn: %v", m)
	}
	if frames.Load() == 0 {
		t.Fatal("the churning clients received no frame")
	}
	// Every hung-up client is dropped (melody notices a closed socket
	// at its next read).
	for deadline := time.Now().Add(5 * time.Second); e.hub.Connections() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open after the churn, want 1", e.hub.Connections())
		}
	}
}
