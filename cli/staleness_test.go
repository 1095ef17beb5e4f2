package cli_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
)

// tickerAge fetches a node's ticker and returns asOfMs minus the BTC
// market's last print time: how old the price it shows is.
func tickerAge(t *testing.T, base string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/v1/public/ticker")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		AsOfMs  string `json:"asOfMs"`
		Tickers []struct {
			MarketID string `json:"marketId"`
			Last     *struct {
				TsMs string `json:"tsMs"`
			} `json:"last"`
		} `json:"tickers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	asOf, _ := strconv.ParseInt(body.AsOfMs, 10, 64)
	for _, tk := range body.Tickers {
		if tk.MarketID == "BTC-PERP" && tk.Last != nil {
			ts, _ := strconv.ParseInt(tk.Last.TsMs, 10, 64)
			return asOf - ts
		}
	}
	t.Fatal("no BTC-PERP price in the ticker")
	return 0
}

// TestTickerShowsStalenessOnANodeCutOffFromTheLeader: when prints stop
// reaching a node (here its peers are gone, so nothing is committed), the
// ticker's asOfMs keeps moving, so the age of the last price grows instead
// of looking fresh forever.
func TestTickerShowsStalenessOnANodeCutOffFromTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble))
	alone := c.Followers()[0]
	if !clustertest.Poll(15*time.Second, func() bool { _, ok := feedLast(c, alone.ID, "BTCUSD"); return ok }) {
		t.Fatal("no print reached the follower")
	}
	for _, m := range c.Members() {
		if m.ID != alone.ID {
			c.Kill(m.ID)
		}
	}
	time.Sleep(300 * time.Millisecond) // past the ticker cache
	first := tickerAge(t, c.HTTP(alone.ID))
	time.Sleep(2 * time.Second)
	if second := tickerAge(t, c.HTTP(alone.ID)); second-first < 1500 {
		t.Fatalf("the price's age went from %d to %d ms in 2 s with no leader: staleness is hidden", first, second)
	}
}
