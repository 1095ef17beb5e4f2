package wsapi

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestPingFloodClosesTheConnection: protocol pings draw the raw frame
// budget. Before, the WebSocket library answered every ping with a pong
// outside any budget: 6 bytes in, a pong written out, as fast as the
// client's link allowed.
func TestPingFloodClosesTheConnection(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	var pongs atomic.Int64
	c.SetPongHandler(func(string) error { pongs.Add(1); return nil })
	readErr := make(chan error, 1)
	go func() {
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				readErr <- err
				return
			}
		}
	}()
	sent := 0
	for ; sent < 4*RawFrameBurst; sent++ {
		if err := c.WriteControl(websocket.PingMessage, []byte("x"), time.Now().Add(time.Second)); err != nil {
			break // closed under us: what is wanted
		}
	}
	select {
	case <-readErr:
	case <-time.After(5 * time.Second):
		t.Fatalf("%d pings at once (%d answered) left the connection open; the raw burst is %d", sent, pongs.Load(), RawFrameBurst)
	}
	if n := pongs.Load(); n > RawFrameBurst {
		t.Fatalf("%d pongs for a raw burst of %d", n, RawFrameBurst)
	}
	if e.hub.FloodCloses() != 1 {
		t.Fatalf("flood closes %d, want 1", e.hub.FloodCloses())
	}
}

// Pings within the raw budget are answered and the connection stays.
func TestPingsWithinTheRawBudgetAreAnswered(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	pongs := make(chan struct{}, 64)
	c.SetPongHandler(func(string) error { pongs <- struct{}{}; return nil })
	go func() {
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}()
	for i := 0; i < 32; i++ {
		if err := c.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-pongs:
		case <-time.After(5 * time.Second):
			t.Fatalf("ping %d was not answered", i)
		}
	}
	send(t, c, map[string]any{"op": "subscribe", "channel": "prices"})
	if e.hub.FloodCloses() != 0 {
		t.Fatal("pings within the budget closed the connection")
	}
}

// frameMeter finds every frame of a masked client stream whatever the
// read boundaries: short, 16-bit and 64-bit lengths, empty payloads.
func TestFrameMeterFollowsHeadersAcrossReads(t *testing.T) {
	frame := func(opcode byte, n int) []byte {
		b := []byte{0x80 | opcode}
		switch {
		case n < 126:
			b = append(b, 0x80|byte(n))
		case n < 1<<16:
			b = append(b, 0x80|126)
			b = binary.BigEndian.AppendUint16(b, uint16(n))
		default:
			b = append(b, 0x80|127)
			b = binary.BigEndian.AppendUint64(b, uint64(n))
		}
		b = append(b, 1, 2, 3, 4) // mask key
		return append(b, bytes.Repeat([]byte{0x89}, n)...)
	}
	want := []byte{opPing, 0x1, opPong, 0x2, opPing, 0x1, 0x8}
	sizes := []int{0, 125, 5, 126, 70_000, 1 << 16, 2}
	var stream []byte
	for i, op := range want {
		stream = append(stream, frame(op, sizes[i])...)
	}
	for _, chunk := range []int{1, 2, 3, 7, 13, 4096, len(stream)} {
		var f frameMeter
		var got []byte
		for rest := stream; len(rest) > 0; {
			k := min(chunk, len(rest))
			if !f.scan(rest[:k], func(op byte) bool { got = append(got, op); return true }) {
				t.Fatal("refused with an accepting check")
			}
			rest = rest[k:]
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("reads of %d bytes: opcodes %x, want %x", chunk, got, want)
		}
	}
	var f frameMeter
	if f.scan(append(frame(0x1, 3), frame(opPing, 0)...), func(op byte) bool { return op != opPing }) {
		t.Fatal("a refused frame was not reported")
	}
}
