package wsapi

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/perpd/perpd/fsm"
)

// TestNoOldAccountEventAfterReauthAck: once a connection has its
// {op:"unsubscribed", channel:"account"} and the auth acknowledgement of
// another account, no event of the old account follows on it. Before, an
// event the hub had routed to the connection just before the re-auth was
// written after both frames, so the client, now holding another account,
// read the old account's event as its own.
func TestNoOldAccountEventAfterReauthAck(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	other := e.post("/v1/signup", "", "{}")["apiKey"].(string)
	su := e.post("/v1/signup", "", "{}")
	key, account := su["apiKey"].(string), su["accountId"].(string)
	var stop atomic.Bool
	defer stop.Store(true)
	for round := 0; round < 60; round++ {
		c := e.dial()
		send(t, c, map[string]any{"op": "auth", "apiKey": key})
		next(t, c, "auth")
		send(t, c, map[string]any{"op": "subscribe", "channel": "account"})
		next(t, c, "subscribed")
		done := make(chan struct{})
		go func() { // a stream of the old account's events, in small batches
			defer close(done)
			for i := 0; !stop.Load(); i++ {
				e.node.Events.Publish([]fsm.Event{{Kind: "noise", Account: account, Seq: uint64(i + 1), Data: map[string]string{"pad": "x"}}})
				if i%16 == 15 {
					time.Sleep(time.Millisecond)
				}
				if i > 200_000 {
					return
				}
			}
		}()
		// Let events flow, then re-authenticate as the other account.
		next(t, c, "event")
		send(t, c, map[string]any{"op": "auth", "apiKey": other})
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		acked := false
		deadline := time.Time{}
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if acked || errors.As(err, &ce) && ce.Code == CloseResync {
					break // read past the ack for a while, or too slow this round
				}
				t.Fatal(err)
			}
			var f map[string]any
			_ = json.Unmarshal(b, &f)
			switch {
			case f["op"] == "auth":
				acked = true
				deadline = time.Now().Add(30 * time.Millisecond)
				_ = c.SetReadDeadline(deadline)
			case acked && f["op"] == "event":
				t.Fatalf("round %d: the old account's event after the auth ack of another account: %s", round, b)
			}
		}
		stop.Store(true)
		<-done
		stop.Store(false)
		c.Close()
	}
}
