package wsapi

import (
	"strings"
	"testing"
	"time"
)

// TestReauthKeepsOrEndsAccountChannelOutLoud: a client that rotates its key
// on an open connection (auth again with another key of the same account
// holding read) keeps its account subscription; one that authenticates as
// another account (or with a key without read) is told that the old
// account channel ended, with an unsubscribed frame. Before, either re-auth
// dropped the account subscription without a word: the client, still
// believing itself subscribed, silently missed every later event.
func TestReauthKeepsOrEndsAccountChannelOutLoud(t *testing.T) {
	e := newEnv(t, func(h *Hub) { h.PingEvery = time.Hour })
	c := e.dial()
	master, _ := e.subscribedAccount(c)
	rotated := e.post("/v1/sessions", master, `{"scopes":["read","trade"]}`)["apiKey"].(string)

	send(t, c, map[string]any{"op": "auth", "apiKey": rotated})
	next(t, c, "auth")
	e.post("/v1/faucet", master, "{}")
	if ev := next(t, c, "event"); ev["kind"] != "deposit" || ev["channel"] != "account" {
		t.Fatalf("after a same-account key rotation: %v", ev)
	}

	// Another account's key: the old channel ends, and the client hears so
	// before the new auth ack.
	other := e.post("/v1/signup", "", "{}")["apiKey"].(string)
	send(t, c, map[string]any{"op": "auth", "apiKey": other})
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var sawUnsub bool
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, `"op":"unsubscribed"`) && strings.Contains(s, `"channel":"account"`) {
			sawUnsub = true
		}
		if strings.Contains(s, `"op":"auth"`) {
			break
		}
	}
	if !sawUnsub {
		t.Fatal("authenticating as another account ended the account channel without telling the client")
	}

	// A same-account key without read cannot keep the channel either.
	c2 := e.dial()
	m2, _ := e.subscribedAccount(c2)
	tradeOnly := e.post("/v1/sessions", m2, `{"scopes":["trade"]}`)["apiKey"].(string)
	send(t, c2, map[string]any{"op": "auth", "apiKey": tradeOnly})
	if m := next(t, c2, "unsubscribed"); m["channel"] != "account" {
		t.Fatalf("trade-only re-auth: %v", m)
	}
	next(t, c2, "auth")
}
