package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
)

// feedLast reads member id's last print of a feed.
func feedLast(c *clustertest.Cluster, id, feed string) (market.Print, bool) {
	m := c.Member(id)
	if m.Node == nil {
		return market.Print{}, false
	}
	var p market.Print
	var ok bool
	m.Node.Machine().Read(func(st *fsm.State, _ uint64) { p, ok = st.Market.FeedLast(feed) })
	return p, ok
}

// everyLiveMember reports whether cond holds for every running member.
func everyLiveMember(c *clustertest.Cluster, cond func(id string) bool) bool {
	for _, m := range c.Live() {
		if !cond(m.ID) {
			return false
		}
	}
	return true
}

// TestMarketsAndOracleAcrossFailover runs three members wired exactly as
// `perpd serve` wires them: the catalogue is listed once, prints reach
// every member, an admin pin sent to a follower holds the price, survives
// the leader's crash, and an unpin continues from the pinned price.
func TestMarketsAndOracleAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble))
	const waitFor = 15 * time.Second
	if !clustertest.Poll(waitFor, func() bool {
		return everyLiveMember(c, func(id string) bool { _, ok := feedLast(c, id, "BTCUSD"); return ok })
	}) {
		t.Fatal("no print reached every member")
	}
	var markets int
	c.Leader().Node.Machine().Read(func(st *fsm.State, _ uint64) { markets = len(st.Market.MarketsByID) })
	if markets != 2 {
		t.Fatalf("%d markets listed, want the default catalogue's 2", markets)
	}

	const pinQ8 = 50_000 * market.Q8
	follower := c.Followers()[0].ID
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.Admin(follower).Do(ctx, http.MethodPost, "/admin/oracle/pin", map[string]string{"feedId": "BTCUSD", "midQ8": "5000000000000"}, nil); err != nil {
		t.Fatalf("pin through a follower: %v", err)
	}
	if !clustertest.Poll(waitFor, func() bool {
		return everyLiveMember(c, func(id string) bool { p, _ := feedLast(c, id, "BTCUSD"); return p.MidQ8 == pinQ8 })
	}) {
		t.Fatal("the pin did not reach every member's prints")
	}

	old := c.Leader().ID
	before, _ := feedLast(c, follower, "BTCUSD")
	c.Kill(old)
	if _, err := c.WaitLeader(waitFor); err != nil {
		t.Fatal(err)
	}
	if !clustertest.Poll(waitFor, func() bool {
		return everyLiveMember(c, func(id string) bool {
			p, _ := feedLast(c, id, "BTCUSD")
			return p.TsMs > before.TsMs+500 && p.MidQ8 == pinQ8
		})
	}) {
		t.Fatal("the new leader did not keep printing the pinned price")
	}

	if err := c.Admin(follower).Do(ctx, http.MethodPost, "/admin/oracle/unpin", map[string]string{"feedId": "BTCUSD"}, nil); err != nil {
		t.Fatalf("unpin: %v", err)
	}
	var after market.Print
	if !clustertest.Poll(waitFor, func() bool {
		after, _ = feedLast(c, follower, "BTCUSD")
		return after.MidQ8 != pinQ8
	}) {
		t.Fatal("unpinned feed never moved")
	}
	if after.MidQ8 < 49_500*market.Q8 || after.MidQ8 > 50_500*market.Q8 {
		t.Fatalf("after unpin the price went to %d, not on from 50,000", after.MidQ8)
	}

	var set map[string]any
	if err := c.Admin(follower).Do(ctx, http.MethodPost, "/admin/market/set", map[string]string{"marketId": "ETH-PERP", "status": "halted"}, &set); err != nil || set["status"] != "halted" {
		t.Fatalf("market set: %v %v", err, set)
	}
	err := c.Admin(follower).Do(ctx, http.MethodPost, "/admin/market/set", map[string]string{"marketId": "ETH-PERP", "mmRateQ9": "0"}, nil)
	if err == nil {
		t.Fatal("an invalid parameter was accepted")
	}
	c.Restart(old)
	if err := c.WaitConverged(waitFor); err != nil {
		t.Fatal(err)
	}
}

// TestMarketAdminRoutesRefuseBadInput: every operator route answers bad
// input with {error, code} and changes nothing.
func TestMarketAdminRoutesRefuseBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	c := clustertest.Start(t, 1, clustertest.Assemble(cli.Assemble))
	m := c.Members()[0]
	if !clustertest.Poll(15*time.Second, func() bool { _, ok := feedLast(c, m.ID, "ETHUSD"); return ok }) {
		t.Fatal("no print")
	}
	call := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+m.AdminAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	var hash string
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/admin/oracle/pin", `{"feedId":"BTCUSD","midQ8":"1","extra":1}`, 400, "validation"},
		{"/admin/oracle/pin", `{"feedId":"BTCUSD","midQ8":1.5}`, 400, "validation"},
		{"/admin/oracle/pin", `{"feedId":"BTCUSD","midQ8":"0"}`, 400, "validation"},
		{"/admin/oracle/pin", `{"feedId":"SOLUSD","midQ8":"1"}`, 404, "not_found"},
		{"/admin/oracle/pin", `not json`, 400, "validation"},
		{"/admin/oracle/script", `{"feedId":"BTCUSD","mode":"cubic","points":[{"offsetMs":"0","midQ8":"1"}]}`, 400, "validation"},
		{"/admin/oracle/script", `{"feedId":"BTCUSD","mode":"step","points":[]}`, 400, "validation"},
		{"/admin/oracle/unpin", `{"feedId":"SOLUSD"}`, 404, "not_found"},
		{"/admin/market/set", `{"marketId":"SOL-PERP","status":"halted"}`, 404, "not_found"},
		{"/admin/market/set", `{"marketId":"BTC-PERP","status":"paused"}`, 400, "validation"},
		{"/admin/market/set", `{"marketId":"BTC-PERP","tickSize":"1"}`, 400, "validation"},
		{"/admin/market/set", `{"marketId":"BTC-PERP","underlying":"ETH"}`, 409, "conflict"},
	} {
		// Prints keep landing, so compare the market book's parameters and
		// overrides rather than the whole state.
		hash = marketConfig(c, m.ID)
		st, out := call(http.MethodPost, tc.path, c.Token, tc.body)
		if st != tc.status || out["code"] != tc.code || out["error"] == "" {
			t.Errorf("%s %s: %d %v, want %d %s", tc.path, tc.body, st, out, tc.status, tc.code)
		}
		if marketConfig(c, m.ID) != hash {
			t.Errorf("%s %s: a refusal changed the markets", tc.path, tc.body)
		}
	}
	if st, _ := call(http.MethodPost, "/admin/oracle/pin", "wrong", `{"feedId":"BTCUSD","midQ8":"1"}`); st != 401 {
		t.Errorf("pin with a wrong token: %d", st)
	}
	st, out := call(http.MethodGet, "/admin/market/list", c.Token, "")
	if ms, _ := out["markets"].([]any); st != 200 || len(ms) != 2 {
		t.Fatalf("list: %d %v", st, out)
	}
}

// marketConfig fingerprints every market's parameters and every feed's
// override.
func marketConfig(c *clustertest.Cluster, id string) string {
	var b []byte
	c.Member(id).Node.Machine().Read(func(st *fsm.State, _ uint64) {
		type cfg struct {
			P market.Params
			O *market.Override
		}
		var all []cfg
		for _, v := range st.Market.Markets() {
			o, ok := st.Market.FeedOverride(v.OracleFeedID)
			c := cfg{P: v.Params}
			if ok {
				c.O = &o
			}
			all = append(all, c)
		}
		b, _ = json.Marshal(all)
	})
	return string(b)
}
