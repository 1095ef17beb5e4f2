package wsapi

import (
	"strings"
	"testing"
	"time"
)

// TestRefusedReauthSaysTheConnectionKeepsItsIdentity: an auth frame that
// is refused (a key that is not valid, no key at all, over the frame
// budget) changes nothing, like every refused frame: the connection keeps
// its earlier authentication and account subscription. The refusal says
// so, in accountId (the account the connection still acts for; absent
// when it is not authenticated) and in its text. Before, the refusal was
// the bare "API key is not valid" a never-authenticated connection gets:
// a client that had just tried to leave account A could not tell whether
// the account events still arriving were A's or whether its socket was
// now unauthenticated.
func TestRefusedReauthSaysTheConnectionKeepsItsIdentity(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	master, account := e.subscribedAccount(c)

	for _, frame := range []map[string]any{
		{"op": "auth", "apiKey": "pdk_not_a_key"},
		{"op": "auth"},
	} {
		send(t, c, frame)
		m := next(t, c, "error")
		if m["badOp"] != "auth" || m["accountId"] != account || !strings.Contains(m["error"].(string), "still authenticated as "+account) {
			t.Fatalf("%v on a connection authenticated as %s: %v", frame, account, m)
		}
	}
	// What the refusal said is true: the account channel still delivers.
	e.post("/v1/faucet", master, "{}")
	if ev := next(t, c, "event"); ev["channel"] != "account" || ev["kind"] != "deposit" {
		t.Fatalf("after a refused re-auth: %v", ev)
	}

	// A connection that never authenticated is told it is not.
	c2 := e.dial()
	send(t, c2, map[string]any{"op": "auth", "apiKey": "pdk_not_a_key"})
	if m := next(t, c2, "error"); m["accountId"] != nil || m["code"] != "unauthorized" || strings.Contains(m["error"].(string), "still") {
		t.Fatalf("refused auth on an unauthenticated connection: %v", m)
	}
}
