package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestLinearizableReadFindsAKeyMintedJustBefore: a key minted through the
// leader and used at once on a follower with X-Consistency: linearizable
// was refused 401 whenever the follower had not yet heard that the mint
// committed (the key was judged before the read index was learned). A
// linearizable read sees every write committed before it arrived, so the
// key is now judged after the leader's commit index is applied. A made-up
// key is still refused 401, after the same wait.
func TestLinearizableReadFindsAKeyMintedJustBefore(t *testing.T) {
	c := readyCluster(t)
	leader, f := c.HTTP(c.Leader().ID), c.HTTP(c.Followers()[0].ID)
	lin := []string{"X-Consistency", "linearizable"}
	for i := range 10 {
		st, _, body := call(t, leader, "POST", "/v1/signup", "", fmt.Sprintf("lin-signup-%d", i), "{}")
		if st != 201 {
			t.Fatalf("signup: %d %s", st, body)
		}
		var su struct{ APIKey, AccountID string }
		if err := json.Unmarshal(body, &su); err != nil || su.APIKey == "" {
			t.Fatalf("signup answer %s: %v", body, err)
		}
		st, _, body = call(t, f, "GET", "/v1/account", su.APIKey, "", "", lin...)
		if st != 200 || !strings.Contains(string(body), su.AccountID) {
			t.Fatalf("round %d: a linearizable read on a follower with a key minted before it: %d %s (want 200)", i, st, body)
		}
	}
	st, _, body := call(t, f, "GET", "/v1/account", "pdk_"+strings.Repeat("cd", 24), "", "", lin...)
	if st != 401 || !strings.Contains(string(body), `"unauthorized"`) {
		t.Fatalf("a made-up key, linearizable: %d %s (want 401)", st, body)
	}
}
