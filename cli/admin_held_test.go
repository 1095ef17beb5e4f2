package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
)

// TestAdminMarketListShowsAHeldPrint: a print more than
// market.PrintJumpFactor from the feed's last is held until the next
// print confirms it, and the markets keep trading at the last one. The
// operator's market list showed only the last print, so a glitching feed
// (or a mistyped pin about to be confirmed) was invisible there; the feed
// now carries the held print, in JSON and in the human table.
func TestAdminMarketListShowsAHeldPrint(t *testing.T) {
	const t0 = int64(1_767_225_600_000)
	m := fsm.NewMachine(fsm.Options{})
	idx := uint64(1)
	apply := func(typ fsm.CmdType, ts int64, payload any) {
		t.Helper()
		c, err := fsm.NewCommand(typ, payload)
		if err != nil {
			t.Fatal(err)
		}
		c.TsMs = ts
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := m.Apply(idx, b); !res.OK() {
			t.Fatalf("type %d: %s", typ, res.Body)
		}
		idx++
	}
	apply(fsm.CmdGenesis, t0, fsm.GenesisPayload{Seed: 1, Deployment: "testnet", FeatureLevel: fsm.FeatureLevel})
	apply(fsm.CmdMarketsGenesis, t0, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue()})
	apply(fsm.CmdOraclePrint, t0+1_000, fsm.OraclePrintPayload{FeedID: "ETHUSD", MidQ8: 3_400 * market.Q8, TsMs: t0 + 1_000})
	apply(fsm.CmdOraclePrint, t0+2_000, fsm.OraclePrintPayload{FeedID: "ETHUSD", MidQ8: 10_000 * market.Q8, TsMs: t0 + 2_000})

	var v AdminMarketsView
	m.Read(func(st *fsm.State, _ uint64) { v = adminMarkets(st) })
	var eth *AdminFeedView
	for i := range v.Feeds {
		if v.Feeds[i].FeedID == "ETHUSD" {
			eth = &v.Feeds[i]
		}
	}
	if eth == nil || eth.Last == nil || int64(eth.Last.MidQ8) != 3_400*market.Q8 {
		t.Fatalf("ETHUSD feed %+v", eth)
	}
	if eth.Held == nil || int64(eth.Held.MidQ8) != 10_000*market.Q8 || int64(eth.Held.TsMs) != t0+2_000 {
		t.Fatalf("the held print is not shown: %+v", eth.Held)
	}
	var out bytes.Buffer
	if err := printMarketsTable(&out, v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "10000.00000000 at 1767225602000") {
		t.Fatalf("the table does not show the held print:\n%s", out.String())
	}
}
