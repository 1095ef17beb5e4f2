package wsapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// closeWithin reads frames until the connection closes and returns the
// close error; it fails if none comes within d (pings keep arriving on an
// open connection, so the wait is bounded by the deadline, not by quiet).
func closeWithin(t *testing.T, c *websocket.Conn, d time.Duration) *websocket.CloseError {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce
		}
		t.Fatalf("no close frame within %s: %v", d, err)
	}
}

// TestSnapshotRestoreClosesSubscribedSockets: a node whose state is
// replaced by a snapshot (an operator's restore, or a follower that fell
// behind the leader's log and installs its snapshot) skips the entries the
// snapshot covers, and emits none of their events. Its subscribed
// connections are closed with CloseResync. Before, they stayed open and
// silently never saw those events (or a revocation among them).
func TestSnapshotRestoreClosesSubscribedSockets(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.subscribedAccount(c)
	meta, rc, err := e.node.TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := e.node.RestoreSnapshot(meta, rc, nil); err != nil {
		t.Fatal(err)
	}
	ce := closeWithin(t, c, 5*time.Second)
	if ce.Code != CloseResync || ce.Text != ReasonEventsLost {
		t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Text, CloseResync, ReasonEventsLost)
	}
}

// TestEndOfEventStreamClosesSockets: when the node's event bus closes (the
// replica halted, or the node is stopping), every connection is closed
// with CloseResync. Before, the hub stopped and left its connections open:
// no more events and no more pings, and no word that the stream had
// ended, on a halted node that keeps its listeners up for /healthz.
func TestEndOfEventStreamClosesSockets(t *testing.T) {
	e := newEnv(t)
	sub, idle := e.dial(), e.dial()
	e.subscribedAccount(sub)
	send(t, idle, map[string]any{"op": "pong"})
	next(t, idle, "ping")
	e.node.Events.Close()
	for _, c := range []*websocket.Conn{sub, idle} {
		if ce := closeWithin(t, c, 5*time.Second); ce.Code != CloseResync || ce.Text != ReasonStreamEnded {
			t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Text, CloseResync, ReasonStreamEnded)
		}
	}
	// A new connection would be as silent: refused.
	_, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.http.URL, "http")+"/v1/ws", nil)
	if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a connection after the stream ended: %v %+v", err, res)
	}
}
