package cli_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/trade"
)

// orderOn reads an order from member id's state.
func orderOn(c *clustertest.Cluster, id, acct, orderID string) (trade.Order, bool) {
	m := c.Member(id)
	if m.Node == nil {
		return trade.Order{}, false
	}
	var o trade.Order
	var ok bool
	m.Node.Machine().Read(func(st *fsm.State, _ uint64) {
		if p, found := st.Trade.Order(acct, orderID); found {
			o, ok = *p, true
		}
	})
	return o, ok
}

// TestCancelAllAfterFiresAcrossALeaderChange arms the switch through a
// follower, kills the leader at once, and expects the resting order to be
// canceled at the deadline (in log time) on every replica: the survivors
// and the old leader once it is back.
func TestCancelAllAfterFiresAcrossALeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50*time.Millisecond))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	if !clustertest.Poll(15*time.Second, func() bool {
		return everyLiveMember(c, func(id string) bool { _, ok := feedLast(c, id, "ETHUSD"); return ok })
	}) {
		t.Fatal("no ETH print reached every member")
	}
	f := c.Followers()[0]
	base := c.HTTP(f.ID)
	st, m := railCall(t, base, "POST", "/v1/signup", "", "caa-signup", map[string]any{})
	if st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	key, acct := m["apiKey"].(string), m["accountId"].(string)
	if st, m := railCall(t, base, "POST", "/v1/faucet", key, "caa-faucet", map[string]any{}); st != 201 {
		t.Fatalf("faucet: %d %v", st, m)
	}
	// A buy limit at half the price, on the tick grid, rests.
	p, _ := feedLast(c, f.ID, "ETHUSD")
	var tick int64
	f.Node.Machine().Read(func(st *fsm.State, _ uint64) { tick = st.Market.MarketsByID["ETH-PERP"].Params.TickSizeQ8 })
	limit := p.MidQ8 / 2 / tick * tick
	body := map[string]any{"marketId": "ETH-PERP", "side": "buy", "type": "limit", "contracts": "1",
		"reduceOnly": false, "limitPriceQ8": strconv.FormatInt(limit, 10)}
	if st, m := railCall(t, base, "POST", "/v1/orders", key, "far-buy", body); st != 201 || m["status"] != "resting" {
		t.Fatalf("limit order: %d %v", st, m)
	}
	st, m = railCall(t, base, "POST", "/v1/cancel-all-after", key, "caa-arm", map[string]any{"timeoutMs": "3000"})
	if st != 200 || m["armed"] != true {
		t.Fatalf("arm through a follower: %d %v", st, m)
	}
	deadline, err := strconv.ParseInt(m["deadlineTsMs"].(string), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	old := c.Leader().ID
	c.Kill(old)
	if _, err := c.WaitLeader(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	canceledAtDeadline := func(id string) bool {
		o, ok := orderOn(c, id, acct, "far-buy")
		return ok && o.Status == trade.StatusCanceled && o.Reason == trade.ReasonCancelAllAfter && o.UpdatedTsMs >= deadline
	}
	if !clustertest.Poll(20*time.Second, func() bool { return everyLiveMember(c, canceledAtDeadline) }) {
		t.Fatal("the survivors did not cancel the resting order at the deadline")
	}
	c.Restart(old)
	if !clustertest.Poll(20*time.Second, func() bool { return canceledAtDeadline(old) }) {
		t.Fatal("the old leader, back, does not show the cancel")
	}
	if err := c.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Every replica canceled at the same entry: the same seq and log time.
	want, _ := orderOn(c, old, acct, "far-buy")
	for _, mem := range c.Live() {
		if o, _ := orderOn(c, mem.ID, acct, "far-buy"); o.Seq != want.Seq || o.UpdatedTsMs != want.UpdatedTsMs {
			t.Fatalf("%s canceled at seq %d / %d ms, %s at seq %d / %d ms", mem.ID, o.Seq, o.UpdatedTsMs, old, want.Seq, want.UpdatedTsMs)
		}
	}
	if st, m := railCall(t, c.HTTP(old), "GET", "/v1/account", key, "", nil); st != 200 || m["reservedMsat"] != "0" {
		t.Fatalf("account after the switch: %d %v", st, m)
	}
}
