package cli

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/wsapi"
)

// TestGracefulStopClosesWebSocketsWithResync: stopping `perpd serve`
// (SIGTERM and Ctrl-C cancel the context runServe serves under) must close
// every open WebSocket with 4000 and the stream-ended reason, the close the
// AsyncAPI description and llms-full.txt promise, before the process lets
// go of the listener. Before, the hub's melody instance was closed with an
// empty close frame (1005, no status) racing the process's exit (1006,
// unexpected EOF), so a client keyed on 4000 never ran the resync recipe.
func TestGracefulStopClosesWebSocketsWithResync(t *testing.T) {
	httpAddr := clustertest.FreeAddr(t)
	cmd := serveCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--data", t.TempDir(), "--bootstrap", "--http", httpAddr, "--raft", clustertest.FreeAddr(t),
		"--admin", clustertest.FreeAddr(t), "--log-level", "error"})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- cmd.ExecuteContext(ctx) }()

	// A client subscribed to a feed, as a new user's first socket is. The
	// feed exists from genesis: retry until the node has applied it.
	var ws *websocket.Conn
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no subscription to prices/BTCUSD within 15 s")
		}
		if ws == nil {
			c, _, err := websocket.DefaultDialer.Dial("ws://"+httpAddr+"/v1/ws", nil)
			if err != nil {
				continue
			}
			ws = c
			defer ws.Close()
		}
		if err := ws.WriteJSON(map[string]any{"op": "subscribe", "channel": "prices", "feedId": "BTCUSD"}); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		var f map[string]any
		for f["op"] != "subscribed" && f["op"] != "error" {
			if err := ws.ReadJSON(&f); err != nil {
				t.Fatal(err)
			}
		}
		if f["op"] == "subscribed" {
			break
		}
	}

	// What SIGTERM does. serve returns only after the close frame is on
	// the wire: a process exits right after, and a frame still queued
	// then never reaches the client (1006).
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return after the stop")
	}
	_ = ws.SetReadDeadline(time.Now().Add(2 * time.Second))
	var ce *websocket.CloseError
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue // frames queued before the close
		}
		if !errors.As(err, &ce) {
			t.Fatalf("the stop ended the socket without a close frame: %v", err)
		}
		break
	}
	if ce.Code != wsapi.CloseResync || ce.Text != wsapi.ReasonStreamEnded {
		t.Fatalf("closed with %d %q; want %d %q", ce.Code, ce.Text, wsapi.CloseResync, wsapi.ReasonStreamEnded)
	}
}
