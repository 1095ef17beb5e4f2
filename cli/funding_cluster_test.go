package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
)

// TestFundingBoundaryPaysOnEveryNode drives an hourly funding boundary
// through a three-node cluster with real positions (the members' clock
// jumps to it): a 50,000-contract long opened on one follower pays, a
// 20,000-contract short opened on the other receives, at the rate the skew
// gives (longs heavier: positive, longs pay), the payer's amount rounded
// up and the receiver's down; every member lists the same records under
// the same seqs, the long's WebSocket account channel on a follower
// carries its flow, each position's funding clock moves to the boundary,
// and the house book takes exactly the net of the flows, conservation
// holding on every member.
func TestFundingBoundaryPaysOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster and a clock jump to the next hour; skipped with -short")
	}
	clk := &shiftedClock{start: time.Now()}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50*time.Millisecond),
		clustertest.Clock(clk), clustertest.Deployment("bench")) // bench: the polls below stay within the read budget
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fs := c.Followers()
	const midQ8 = 100_000 * market.Q8
	if err := c.Admin(fs[0].ID).Do(ctx, http.MethodPost, "/admin/oracle/pin", map[string]any{"feedId": "BTCUSD", "midQ8": midQ8}, nil); err != nil {
		t.Fatalf("pin: %v", err)
	}
	if !clustertest.Poll(15*time.Second, func() bool {
		return everyLiveMember(c, func(id string) bool { p, _ := feedLast(c, id, "BTCUSD"); return p.MidQ8 == midQ8 })
	}) {
		t.Fatal("the pin did not reach every member")
	}
	longBase, shortBase := c.HTTP(fs[0].ID), c.HTTP(fs[1].ID)
	longKey, shortKey := fundedAccount(t, longBase, "fund-long"), fundedAccount(t, shortBase, "fund-short")
	rc := subscribeAccount(t, shortBase, longKey)
	for _, o := range []struct{ base, key, side, n string }{{longBase, longKey, "buy", "50000"}, {shortBase, shortKey, "sell", "20000"}} {
		body := map[string]any{"marketId": "BTC-PERP", "side": o.side, "type": "market", "contracts": o.n, "reduceOnly": false}
		if st, m := railCall(t, o.base, "POST", "/v1/orders", o.key, "fund-"+o.side, body); st != 201 || m["status"] != "filled" {
			t.Fatalf("%s: %d %v", o.side, st, m)
		}
	}
	var before cli.AdminLedgerView
	if err := c.Admin(c.Leader().ID).Do(ctx, http.MethodGet, "/admin/ledger", nil, &before); err != nil {
		t.Fatal(err)
	}
	_, mk := railCall(t, longBase, "GET", "/v1/markets/BTC-PERP", "", "", nil)
	boundary, _ := strconv.ParseInt(mk["nextFundingTsMs"].(string), 10, 64)
	// skew = 30,000 / 70,000 = 428,571,428 q9; rate = skew x 1e5 / 1e9.
	if mk["skewQ9"] != "428571428" || mk["fundingRateHourlyQ9"] != "42857" {
		t.Fatalf("market before the boundary: %v", mk)
	}
	// Log time follows a clock step of less than a minute in one entry
	// (fsm.MaxClockStepMs); a larger one only by the slow catch-up. So the
	// clock steps 50 s at a time, each step once the log has taken the last.
	logNow := func() (now int64) {
		c.Leader().Node.Machine().Read(func(st *fsm.State, _ uint64) { now = st.NowMs })
		return now
	}
	for logNow() <= boundary {
		target := min(clk.WallMs()+50_000, boundary+200)
		clk.offsetMs.Add(target - clk.WallMs())
		if !clustertest.Poll(10*time.Second, func() bool { return logNow() >= target }) {
			t.Fatalf("log time %d did not follow the clock to %d", logNow(), target)
		}
	}

	// Notionals at the 100,000 mark: 5e10 and 2e10 msat; x 42,857 / 1e9.
	want := map[string]string{longKey: "-2142850", shortKey: "857140"}
	flows := map[string]map[string]any{}
	for _, k := range []string{longKey, shortKey} {
		var page map[string]any
		if !clustertest.Poll(30*time.Second, func() bool {
			_, page = railCall(t, longBase, "GET", "/v1/funding", k, "", nil)
			l, _ := page["funding"].([]any)
			return len(l) == 1
		}) {
			_, mk := railCall(t, longBase, "GET", "/v1/markets/BTC-PERP", "", "", nil)
			t.Fatalf("no funding flow: %v (market %v)", page, mk)
		}
		f := page["funding"].([]any)[0].(map[string]any)
		if f["boundaryTsMs"] != strconv.FormatInt(boundary, 10) || f["rateQ9"] != "42857" || f["marketId"] != "BTC-PERP" ||
			f["flowMsat"] != want[k] || f["paidMsat"] != want[k] {
			t.Fatalf("flow %v, want %s at boundary %d", f, want[k], boundary)
		}
		flows[k] = f
	}
	// Every member lists the same records and positions.
	for _, m := range c.Live() {
		for _, k := range []string{longKey, shortKey} {
			_, page := railCall(t, c.HTTP(m.ID), "GET", "/v1/funding", k, "", nil)
			l, _ := page["funding"].([]any)
			if len(l) != 1 || l[0].(map[string]any)["seq"] != flows[k]["seq"] {
				t.Fatalf("%s lists %v, want seq %v", m.ID, page, flows[k]["seq"])
			}
			pos := positionsOf(t, c.HTTP(m.ID), k)
			if len(pos) != 1 || pos[0]["fundingClockTsMs"] != strconv.FormatInt(boundary, 10) || pos[0]["positionId"] != l[0].(map[string]any)["positionId"] {
				t.Fatalf("%s: positions %v after boundary %d", m.ID, pos, boundary)
			}
		}
		var v cli.AdminLedgerView
		if err := c.Admin(m.ID).Do(ctx, http.MethodGet, "/admin/ledger", nil, &v); err != nil {
			t.Fatal(err)
		}
		if !v.Conservation.OK || int64(v.HouseMsat)-int64(before.HouseMsat) != 2142850-857140 {
			t.Fatalf("%s: ledger %+v, house before %d", m.ID, v, before.HouseMsat)
		}
	}
	// The long's account channel on a follower carries its flow, same seq.
	for deadline := time.Now().Add(10 * time.Second); ; {
		fr := rc.next(deadline)
		if fr == nil {
			t.Fatal("no funding_flow event on the account channel")
		}
		if fr["op"] == "event" && fr["kind"] == "funding_flow" {
			if fr["seq"] != flows[longKey]["seq"] || fr["data"].(map[string]any)["flowMsat"] != want[longKey] {
				t.Fatalf("event %v, record %v", fr, flows[longKey])
			}
			break
		}
	}
}

// positionsOf is GET /v1/positions (an array) through base.
func positionsOf(t *testing.T, base, key string) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/positions", nil)
	req.Header.Set("x-api-key", key)
	req.Header.Set("X-Min-Index", strconv.FormatUint(railMinIndex.Load(), 10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("positions: %v", err)
	}
	return out
}
