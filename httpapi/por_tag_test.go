package httpapi

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/internal/porverify"
	"github.com/perpd/perpd/node"
)

// TestPorProofTagFollowsKeyRotation: an account mints a trade-only bot
// key and a full key, then revokes its signup key (the usual rotation
// after a leak). In the next tree the proof GET /v1/por/proof serves to
// the new key verifies with internal/porverify under the new key, not
// under the revoked one nor the bot's (which cannot read the proof), and
// leaf.tagKeyId names the new key. The revoked key is refused the proof.
func TestPorProofTagFollowsKeyRotation(t *testing.T) {
	clk := &skewClock{start: time.Now()}
	a := newTestAPIWith(t, nil, func(c *node.Config) { c.Clock = clk })
	old, acct := a.signup()
	a.signup() // a second leaf
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: old, idem: nextIdem(), body: "{}"}); r.status != 201 {
		t.Fatalf("faucet: %d %s", r.status, r.body)
	}
	bot, _ := a.mint(old, "trade")
	fresh, freshID := a.mint(old, "read", "trade", "withdraw", "admin-sessions")
	var oldID string
	for _, s := range a.do(req{method: "GET", path: "/v1/sessions", key: old}).json(t)["sessions"].([]any) {
		if m := s.(map[string]any); fmt.Sprint(m["current"]) == "1" {
			oldID = m["keyId"].(string)
		}
	}
	if r := a.do(req{method: "POST", path: "/v1/sessions/revoke", key: fresh, idem: nextIdem(), body: map[string]any{"keyId": oldID}}); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "GET", path: "/v1/por/proof", key: bot}); r.status != 403 {
		t.Fatalf("the bot key read the proof: %d", r.status)
	}
	if r := a.do(req{method: "GET", path: "/v1/por/proof", key: old}); r.status != 401 {
		t.Fatalf("the revoked key read the proof: %d", r.status)
	}

	snap := a.settledPor(clk)
	liab := snap["liability"].(map[string]any)
	total, _ := strconv.ParseInt(liab["totalMsat"].(string), 10, 64)
	ts, _ := strconv.ParseInt(liab["tsMs"].(string), 10, 64)
	pub := porverify.Published{RootHash: liab["rootHash"].(string), TotalMsat: total, LeafCount: int(liab["leafCount"].(float64)),
		RootSaltHex: liab["rootSaltHex"].(string), TsMs: ts}
	r := a.do(req{method: "GET", path: "/v1/por/proof", key: fresh})
	if r.status != 200 {
		t.Fatalf("proof: %d %s", r.status, r.body)
	}
	if _, err := porverify.Check(r.body, pub, old, acct); err == nil || !strings.Contains(err.Error(), "accountTag") {
		t.Fatalf("the revoked key still computes the account's tag: %v", err)
	}
	if _, err := porverify.Check(r.body, pub, bot, acct); err == nil {
		t.Fatal("the bot key computes the account's tag")
	}
	if bal, err := porverify.Check(r.body, pub, fresh, acct); err != nil || bal <= 0 {
		t.Fatalf("the new key's holder: balance %d, %v\n%s", bal, err, r.body)
	}
	if got := r.json(t)["leaf"].(map[string]any)["tagKeyId"]; got != freshID {
		t.Fatalf("tagKeyId %v, want %s", got, freshID)
	}
}
