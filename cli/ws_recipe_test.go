package cli_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
)

// recipeClient follows SPEC section 6's reconnect recipe: subscribe, take a
// REST snapshot, then keep only stream events whose seq it has not seen
// (anything at or below the snapshot's largest seq is already known).
type recipeClient struct {
	t      *testing.T
	ws     *websocket.Conn
	seen   uint64
	states []string // withdrawal states, in arrival order, after dedupe
}

func (rc *recipeClient) send(v any) {
	if err := rc.ws.WriteJSON(v); err != nil {
		rc.t.Fatal(err)
	}
}

// next reads one frame, or returns nil at the deadline.
func (rc *recipeClient) next(deadline time.Time) map[string]any {
	_ = rc.ws.SetReadDeadline(deadline)
	_, b, err := rc.ws.ReadMessage()
	if err != nil {
		return nil
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		rc.t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

// apply takes one account event the way the recipe says.
func (rc *recipeClient) apply(f map[string]any) {
	if f["op"] != "event" || f["channel"] != "account" {
		return
	}
	seq, err := strconv.ParseUint(f["seq"].(string), 10, 64)
	if err != nil {
		rc.t.Fatalf("account event without a seq: %v", f)
	}
	if seq <= rc.seen {
		return // a duplicate, per the recipe
	}
	rc.seen = seq
	if f["kind"] == "withdrawal" {
		rc.states = append(rc.states, f["data"].(map[string]any)["state"].(string))
	}
}

// fundedAccount signs up through base and takes one faucet grant; it
// returns the account's master key.
func fundedAccount(t *testing.T, base, prefix string) string {
	t.Helper()
	st, m := railCall(t, base, "POST", "/v1/signup", "", prefix+"-signup", map[string]any{})
	if st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	key := m["apiKey"].(string)
	if st, m := railCall(t, base, "POST", "/v1/faucet", key, prefix+"-faucet", map[string]any{}); st != 201 {
		t.Fatalf("faucet: %d %v", st, m)
	}
	return key
}

// subscribeAccount opens base's WebSocket, authenticates with key and
// subscribes to the account channel; the socket closes with the test.
func subscribeAccount(t *testing.T, base, key string) *recipeClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	rc := &recipeClient{t: t, ws: ws}
	rc.send(map[string]any{"op": "auth", "apiKey": key})
	rc.send(map[string]any{"op": "subscribe", "channel": "account"})
	for deadline := time.Now().Add(5 * time.Second); ; {
		fr := rc.next(deadline)
		if fr == nil {
			t.Fatal("no subscription ack")
		}
		if fr["op"] == "subscribed" {
			return rc
		}
	}
}

// TestWithdrawalFramesReachADeduplicatingClient: a client on a follower's
// WebSocket that follows the reconnect recipe sees both the `requested` and
// the `paid` change of a withdrawal (they used to share one seq, so the
// `paid` frame was dropped as a duplicate).
func TestWithdrawalFramesReachADeduplicatingClient(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50*time.Millisecond))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	f := c.Followers()[0]
	base := c.HTTP(f.ID)
	key := fundedAccount(t, base, "recipe")

	rc := subscribeAccount(t, base, key)
	// The REST snapshot: the largest seq any history shows.
	for _, path := range []string{"/v1/deposits", "/v1/withdrawals"} {
		_, page := railCall(t, base, "GET", path, key, "", nil)
		for _, list := range page {
			recs, _ := list.([]any)
			for _, r := range recs {
				if s, err := strconv.ParseUint(r.(map[string]any)["seq"].(string), 10, 64); err == nil {
					rc.seen = max(rc.seen, s)
				}
			}
		}
	}
	if rc.seen == 0 {
		t.Fatal("the snapshot shows no seq: the faucet deposit is missing")
	}

	body := map[string]any{"toAddress": railAddressOf(t, base), "amountMsat": "50000000"}
	if st, m := railCall(t, base, "POST", "/v1/withdrawals", key, "recipe-wd", body); st != 201 {
		t.Fatalf("withdraw: %d %v", st, m)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		fr := rc.next(deadline)
		if fr == nil {
			break
		}
		rc.apply(fr)
		if n := len(rc.states); n > 0 && rc.states[n-1] == "paid" {
			break
		}
	}
	if len(rc.states) != 2 || rc.states[0] != "requested" || rc.states[1] != "paid" {
		t.Fatalf("withdrawal states seen after de-duplication: %v, want [requested paid]", rc.states)
	}
}

// TestFillsReachAFollowersAccountChannel: a market order placed through one
// node reaches the account channel of another node's WebSocket as fill,
// order and position events, and the fill event carries the seq that
// GET /v1/fills shows for the same fill.
func TestFillsReachAFollowersAccountChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50*time.Millisecond))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	fs := c.Followers()
	watch, trade := c.HTTP(fs[0].ID), c.HTTP(fs[1].ID)
	if !clustertest.Poll(15*time.Second, func() bool {
		return everyLiveMember(c, func(id string) bool { _, ok := feedLast(c, id, "BTCUSD"); return ok })
	}) {
		t.Fatal("no price reached every member")
	}
	key := fundedAccount(t, trade, "fills")
	rc := subscribeAccount(t, watch, key)
	order := map[string]any{"marketId": "BTC-PERP", "side": "buy", "type": "market", "contracts": "100", "reduceOnly": false}
	if st, m := railCall(t, trade, "POST", "/v1/orders", key, "fills-order-1", order); st != 201 || m["status"] != "filled" {
		t.Fatalf("order: %d %v", st, m)
	}
	kinds := map[string]string{} // kind -> seq
	for deadline := time.Now().Add(10 * time.Second); len(kinds) < 3; {
		fr := rc.next(deadline)
		if fr == nil {
			break
		}
		if fr["op"] == "event" && fr["channel"] == "account" {
			kinds[fr["kind"].(string)], _ = fr["seq"].(string)
		}
	}
	_, page := railCall(t, watch, "GET", "/v1/fills", key, "", nil)
	fills, _ := page["fills"].([]any)
	if len(fills) != 1 {
		t.Fatalf("fills page: %v", page)
	}
	if seq := fills[0].(map[string]any)["seq"]; kinds["fill"] == "" || kinds["fill"] != seq {
		t.Fatalf("account events %v; the fill event's seq must be the REST fill's %v", kinds, seq)
	}
}
