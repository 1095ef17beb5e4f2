package wsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
)

// subscribedAccount signs up, authenticates c and subscribes it to the
// account channel; it returns the master key and account id.
func (e *wsEnv) subscribedAccount(c *websocket.Conn) (key, account string) {
	su := e.post("/v1/signup", "", "{}")
	key, account = su["apiKey"].(string), su["accountId"].(string)
	send(e.t, c, map[string]any{"op": "auth", "apiKey": key})
	next(e.t, c, "auth")
	send(e.t, c, map[string]any{"op": "subscribe", "channel": "account"})
	next(e.t, c, "subscribed")
	return key, account
}

// readUntilClose reads frames until the connection ends and returns the
// event frames' data ids and the close error.
func readUntilClose(t *testing.T, c *websocket.Conn) ([]int, *websocket.CloseError) {
	t.Helper()
	var ids []int
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ids, ce
			}
			t.Fatalf("connection ended without a close frame after %d events: %v", len(ids), err)
		}
		var f struct {
			Op   string `json:"op"`
			Data struct {
				ID int `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &f)
		if f.Op == "event" {
			ids = append(ids, f.Data.ID)
		}
	}
}

type bulky struct {
	ID  int    `json:"id"`
	Pad string `json:"pad"`
}

// A client that stops reading is closed with CloseResync once its send
// buffer is full, after every frame queued before; it never sees a gap.
func TestSlowClientIsClosedForResync(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.setSendBuffer(8) })
	c := e.dial()
	_, account := e.subscribedAccount(c)
	pad := strings.Repeat("x", 32<<10)
	id := 0
	// The client reads nothing while events pile up: first in the socket
	// buffers, then in the hub's send queue, which then overflows.
	if !clustertest.Poll(20*time.Second, func() bool {
		batch := make([]fsm.Event, 16)
		for i := range batch {
			batch[i] = fsm.Event{Kind: "deposit", Account: account, Seq: uint64(id + 1), Data: bulky{ID: id, Pad: pad}}
			id++
		}
		e.node.Events.Publish(batch)
		return e.hub.SlowConsumerCloses() > 0
	}) {
		t.Fatalf("no slow-consumer close after %d events", id)
	}
	ids, ce := readUntilClose(t, c)
	if ce.Code != CloseResync || ce.Text != ReasonSlowConsumer {
		t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Text, CloseResync, ReasonSlowConsumer)
	}
	for i, got := range ids {
		if got != i {
			t.Fatalf("event %d carries id %d: a frame was skipped", i, got)
		}
	}
	if len(ids) == 0 || len(ids) >= id {
		t.Fatalf("received %d of %d events before the close", len(ids), id)
	}
}

// When the hub falls behind the node's event bus and loses events, every
// connection with a subscription is closed with CloseResync; one without
// subscriptions stays, and new subscribers get events again.
func TestBusOverflowClosesSubscribedSockets(t *testing.T) {
	stalled, release := make(chan struct{}), make(chan struct{})
	first := true
	e := newEnv(t, func(h *Hub) {
		h.beforeBatch = func() {
			if first {
				first = false
				close(stalled)
				<-release
			}
		}
	})
	sub, idle := e.dial(), e.dial()
	e.subscribedAccount(sub)
	send(t, idle, map[string]any{"op": "pong"})
	e.node.Events.Publish([]fsm.Event{{Kind: "noise"}})
	<-stalled // the hub blocks on that batch
	for i := 0; i <= 4096+10; i++ {
		e.node.Events.Publish([]fsm.Event{{Kind: "noise"}})
	}
	close(release)
	_, ce := readUntilClose(t, sub)
	if ce.Code != CloseResync || ce.Text != ReasonEventsLost {
		t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Text, CloseResync, ReasonEventsLost)
	}
	if e.hub.EventLossCloses() != 1 || e.node.Events.Dropped() == 0 {
		t.Fatalf("loss closes %d, bus drops %d", e.hub.EventLossCloses(), e.node.Events.Dropped())
	}
	send(t, idle, map[string]any{"op": "teleport"})
	next(t, idle, "error")
	// The hub resubscribed: a new connection gets account events.
	c := e.dial()
	key, _ := e.subscribedAccount(c)
	e.post("/v1/faucet", key, "{}")
	if ev := next(t, c, "event"); ev["kind"] != "deposit" {
		t.Fatalf("event after resubscribe: %v", ev)
	}
}

// A revocation ends the account channel when it applies (on the
// session_revoked event), not at the next 15 s re-check.
func TestRevocationEndsAccountChannelAtOnce(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	signup := e.post("/v1/signup", "", "{}")
	master := signup["apiKey"].(string)
	minted := e.post("/v1/sessions", master, `{"scopes":["read"]}`)
	c, other := e.dial(), e.dial()
	for _, k := range []*websocket.Conn{c, other} {
		key := minted["apiKey"]
		if k == other {
			key = master
		}
		send(t, k, map[string]any{"op": "auth", "apiKey": key})
		next(t, k, "auth")
		send(t, k, map[string]any{"op": "subscribe", "channel": "account"})
		next(t, k, "subscribed")
	}
	e.post("/v1/sessions/revoke", master, `{"keyId":"`+minted["keyId"].(string)+`"}`)
	if m := next(t, c, "error"); m["code"] != "unauthorized" || !strings.Contains(m["error"].(string), "revoked") {
		t.Fatalf("revocation not applied to the channel: %v", m)
	}
	// The revoked connection gets no more account events; the master's does.
	e.post("/v1/faucet", master, "{}")
	if ev := next(t, other, "event"); ev["kind"] != KindSessionRevoked || ev["seq"] == nil ||
		!strings.Contains(fmt.Sprint(ev["data"]), minted["keyId"].(string)) {
		t.Fatalf("master connection: %v", ev)
	}
	if ev := next(t, other, "event"); ev["kind"] != "deposit" {
		t.Fatalf("master connection: %v", ev)
	}
	send(t, c, map[string]any{"op": "teleport"})
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"event"`) {
			t.Fatalf("revoked key still receives account events: %s", b)
		}
		if strings.Contains(string(b), "teleport") {
			break // every frame sent before this one was read
		}
	}
}
