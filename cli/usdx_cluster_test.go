package cli_test

import (
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
)

// TestUSDxAcrossACluster: three members wired as `perpd serve` wires them.
// A new user quotes and mints through one follower (forwarded to the
// leader), stakes and withdraws through the other; every member serves
// the same public state (supply == hedge), the leader's token rail pays
// the withdrawal, and the replicas converge to equal state hashes.
func TestUSDxAcrossACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50*time.Millisecond))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	fs := c.Followers()
	a, b := c.HTTP(fs[0].ID), c.HTTP(fs[1].ID)
	key := fundedAccount(t, a, "usdx")
	var st int
	var q map[string]any
	if !clustertest.Poll(15*time.Second, func() bool {
		st, q = railCall(t, a, "POST", "/v1/usdx/quotes", key, "", map[string]any{"side": "mint", "usdx": "20"})
		return st == 201
	}) {
		t.Fatalf("quote: %d %v", st, q)
	}
	qid := q["quoteId"].(string)
	if st, m := railCall(t, a, "POST", "/v1/usdx/mints", key, qid, map[string]any{"quoteId": qid}); st != 201 || m["state"] != "minted" {
		t.Fatalf("mint: %d %v", st, m)
	}
	if st, m := railCall(t, b, "POST", "/v1/usdx/stake", key, "", map[string]any{"usdx": "5"}); st != 201 || m["susdx"] != "5" {
		t.Fatalf("stake: %d %v", st, m)
	}
	if st, m := railCall(t, b, "POST", "/v1/usdx/withdrawals", key, "cw1", map[string]any{"usdx": "3", "sparkAddress": "sprt1clustertest"}); st != 201 {
		t.Fatalf("withdraw: %d %v", st, m)
	}
	for _, m := range c.Live() {
		_, pub := railCall(t, c.HTTP(m.ID), "GET", "/v1/usdx", "", "", nil)
		h := pub["hedge"].(map[string]any)
		if pub["supply"] != "20" || h["contracts"] != "20" || pub["backingIdentityHolds"] != true || pub["staking"].(map[string]any)["staked"] != "5" {
			t.Fatalf("%s: %v", m.ID, pub)
		}
	}
	var w map[string]any
	if !clustertest.Poll(15*time.Second, func() bool {
		_, page := railCall(t, a, "GET", "/v1/usdx/withdrawals", key, "", nil)
		if l, _ := page["withdrawals"].([]any); len(l) == 1 {
			w = l[0].(map[string]any)
		}
		return w != nil && w["state"] == "paid"
	}) {
		t.Fatalf("withdrawal never paid: %v", w)
	}
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
