package wsapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/perpd/perpd/httpapi"
)

// TestClientFramesAreMetered: a connection's frames that do work (auth,
// subscribe, unsubscribe, unknown ops) draw a per-connection bucket;
// past it each is refused with an error frame, code rate_limited, naming
// its op, and does nothing. Before, one connection could make the node
// read its state and answer as fast as it could send, while the same
// address's REST calls were held to the read budget.
func TestClientFramesAreMetered(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	const frames = 400
	for i := 0; i < frames; i++ {
		op := "subscribe"
		if i%2 == 1 {
			op = "unsubscribe"
		}
		send(t, c, map[string]any{"op": op, "channel": "prices", "feedId": "BTCUSD"})
	}
	send(t, c, map[string]any{"op": "pong"}) // never metered, never answered
	acks, limited := 0, 0
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for acks+limited < frames {
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d acks and %d refusals: %v", acks, limited, err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		// Answered: an ack, or a refusal for the frame's content (this
		// node has no feed BTCUSD: not_found), which read the state.
		switch {
		case m["op"] == "error" && m["code"] == "rate_limited":
			if m["badOp"] != "subscribe" && m["badOp"] != "unsubscribe" {
				t.Fatalf("refusal %v", m)
			}
			limited++
		case m["op"] == "subscribed", m["op"] == "unsubscribed", m["op"] == "error":
			acks++
		}
	}
	if limited == 0 || acks > FrameBurst+10 {
		t.Fatalf("%d frames in a burst: %d answered, %d refused (burst %d)", frames, acks, limited, FrameBurst)
	}
}

// TestUpgradesDrawTheAddressReadBudget: opening a WebSocket draws one read
// token of the client address, like a public REST read; an empty budget
// answers 429 rate_limited with Retry-After. Before, upgrades were free,
// so an address could reconnect (and re-run every handshake and
// subscription) without bound.
func TestUpgradesDrawTheAddressReadBudget(t *testing.T) {
	budgets := map[string]httpapi.Budget{}
	for k, v := range httpapi.Budgets {
		budgets[k] = v
	}
	budgets["read"] = httpapi.Budget{Name: "read", PerKeyPerMin: 1, KeyBurst: 3, PerAccountPerMin: 1, AccountBurst: 3}
	e := newEnvWith(t, []httpapi.Option{httpapi.WithBudgets(budgets)})
	url := "ws" + strings.TrimPrefix(e.http.URL, "http") + "/v1/ws"
	for i := 0; i < 3; i++ {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatalf("upgrade %d: %v", i, err)
		}
		c.Close()
	}
	_, res, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil || res == nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("an upgrade past the read budget: %v %+v", err, res)
	}
	var body map[string]any
	if json.NewDecoder(res.Body).Decode(&body) != nil || body["code"] != "rate_limited" {
		t.Fatalf("refusal body %v", body)
	}
}
