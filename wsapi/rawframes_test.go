package wsapi

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestFrameFloodClosesTheConnection: every client frame draws a raw frame
// bucket before it is decoded, whatever it holds; a connection past it is
// closed with 1008 (policy violation). Before (load review of 2026-11-27),
// frames without an op were decoded and dropped unmetered, and refused
// frames were decoded and answered: one connection sending 4 KiB frames
// without an op kept half a core busy on a devnet node (1.4 s of CPU in 3
// s), and a node allows 100 connections per address.
func TestFrameFloodClosesTheConnection(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	junk := `{"x":"` + strings.Repeat("a", MaxFrameBytes-16) + `"}`
	expectFloodClose(t, e.dial(), websocket.TextMessage, []byte(junk), "frames without an op")
}

// expectFloodClose sends RawFrameBurst+200 frames of kind holding payload
// in a burst and fails t unless the node then closes the connection with
// 1008 (policy violation).
func expectFloodClose(t *testing.T, c *websocket.Conn, kind int, payload []byte, what string) {
	t.Helper()
	for i := 0; i < RawFrameBurst+200; i++ {
		if err := c.WriteMessage(kind, payload); err != nil {
			break // closed under us: what is wanted
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
			t.Fatalf("after %d %s, in a burst: %v; want a close 1008", RawFrameBurst+200, what, err)
		}
		return
	}
}

// A client within the raw budget keeps its connection: a burst the size
// of the op budget's, then pongs, stays open.
func TestFramesWithinTheRawBudgetKeepTheConnection(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	for i := 0; i < FrameBurst; i++ {
		send(t, c, map[string]any{"op": "pong"})
	}
	send(t, c, map[string]any{"op": "subscribe", "channel": "nope"})
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, b, err := c.ReadMessage(); err != nil || !strings.Contains(string(b), `"error"`) {
		t.Fatalf("after %d pongs, an answer to a bad subscribe: %s %v", FrameBurst, b, err)
	}
}

// TestBinaryFrameFloodClosesTheConnection: a binary frame is a client
// frame like any other and draws the raw budget. Before (access review of
// 2026-11-29), only text frames (onMessage) and protocol pings and pongs
// (the frame meter) drew it: melody hands binary frames to a handler of
// their own, which the hub never set, so a client could send 4 KiB binary
// frames without end, each read, unmasked and copied by the node, and was
// never closed.
func TestBinaryFrameFloodClosesTheConnection(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	expectFloodClose(t, e.dial(), websocket.BinaryMessage, []byte(strings.Repeat("a", MaxFrameBytes-16)), "binary frames")
	if e.hub.FloodCloses() == 0 {
		t.Fatal("the flood close is not counted")
	}
}

// A few binary frames within the raw budget are ignored (SPEC section 6,
// rule 7: unrecognised frames) and the connection stays open.
func TestBinaryFramesWithinTheRawBudgetAreIgnored(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	for i := 0; i < 8; i++ {
		if err := c.WriteMessage(websocket.BinaryMessage, []byte(`{"op":"subscribe","channel":"nope"}`)); err != nil {
			t.Fatal(err)
		}
	}
	send(t, c, map[string]any{"op": "subscribe", "channel": "nope"})
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil || !strings.Contains(string(b), `"error"`) {
		t.Fatalf("after 8 binary frames, an answer to a bad subscribe: %s %v", b, err)
	}
	// Only the text frame was answered: a binary frame is not read as one.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, b, err := c.ReadMessage(); err == nil {
		t.Fatalf("a binary frame was answered: %s", b)
	}
}
