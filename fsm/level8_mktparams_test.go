package fsm

// Market parameters and the liquidation penalty, feature level 8 (review
// of 2026-11-27), each tested at level 7 (the old rule, kept for replay)
// and at level 8.

import (
	"fmt"
	mbig "math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// raiseLevel raises the world's cluster to level, as an operator does
// once every node runs the build.
func (w *tradeWorld) raiseLevel(level uint32) {
	w.t.Helper()
	wantOK(w.t, w.at(mustCommand(w.t, CmdNodeMeta, 0, NodeMeta{ID: "n1", Raft: "n1:7000"})))
	wantOK(w.t, w.at(mustCommand(w.t, CmdSetFeatureLevel, 0, FeatureLevelPayload{Level: level, Nodes: []AdvertisedLevel{{"n1", level}}})))
}

// marketRefusedAsIs applies a market change at the current log time and
// checks that it is refused as validation, names the broken bound and
// changes nothing.
func (w *tradeWorld) marketRefusedAsIs(p MarketSetPayload, want string) {
	w.t.Helper()
	before := w.hash()
	res, evs := w.applyEvents(mustCommand(w.t, CmdMarketSet, w.ts, p))
	wantRefused(w.t, res, http.StatusBadRequest, wire.CodeValidation)
	if !strings.Contains(string(res.Body), want) {
		w.t.Fatalf("refusal %s does not say %q", res.Body, want)
	}
	if len(evs) != 0 || w.hash() != before {
		w.t.Fatalf("refused %+v changed the state (%d events)", p, len(evs))
	}
}

// TestDefaultCatalogueFitsTheSpreadCushion: every catalogue market's
// max-size spread into a balanced book (0.02% + 0.0025%) is far below
// what 1% initial over 0.5% maintenance holds, (1% - 0.5%) / 1.01.
func TestDefaultCatalogueFitsTheSpreadCushion(t *testing.T) {
	for _, p := range market.DefaultCatalogue() {
		excess, spread, limit, err := trade.OpenSpreadExcessQ9(&p)
		if err != nil || excess >= 0 || spread != 225_000 || limit != 4_950_495 {
			t.Fatalf("%s: spread %d, limit %d, excess %d, %v", p.MarketID, spread, limit, excess, err)
		}
	}
}

// TestMarketSpreadMustFitTheMarginCushion: validation asked only mmRate <
// imRate and baseSpreadQ9 <= 10%, so BTC-PERP could take a base spread of
// 1.5% at 1% initial margin, after which (from
// trade.LevelOpensAboveMaintenance) no open at its most leverage could
// fill. From LevelSpreadFitsMargin a change is refused, 400 validation,
// saying by how much it passes the bound, and changes nothing; the
// boundary itself is taken and a max-size 100x order fills there.
func TestMarketSpreadMustFitTheMarginCushion(t *testing.T) {
	spread := func(v int64) *int64 { return &v }
	for _, level := range []uint32{LevelSpreadFitsMargin - 1, LevelSpreadFitsMargin} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			wide := MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: spread(15_000_000)}
			if level < LevelSpreadFitsMargin {
				w.setMarket(wide)
				if w.marketParams("BTC-PERP").BaseSpreadQ9 != 15_000_000 {
					t.Fatal("not set")
				}
				return
			}
			// 15,000,000 + 25,000 against (1e7 - 5e6) x 1e9 / 1.01e9 -> 4,950,495.
			w.marketRefusedAsIs(wide, "over by 10074505 q9")
			// Narrowing the cushion instead: maintenance 0.99% leaves 99,009.
			w.marketRefusedAsIs(MarketSetPayload{MarketID: "BTC-PERP", MMRateQ9: spread(9_900_000)}, "over by 125991 q9")
			// One q9 past the boundary, then the boundary itself.
			w.marketRefusedAsIs(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: spread(4_925_496)}, "over by 1 q9")
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: spread(4_925_495)})
			// Usable at its most leverage: a max-size 100x long and short
			// each open into a balanced book.
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, mktOrder("l", "BTC-PERP", "buy", 1_000_000)), trade.StatusFilled)
			created(t, w.order(a, k, mktOrder("c", "BTC-PERP", "sell", 1_000_000)), trade.StatusFilled)
			created(t, w.order(a, k, mktOrder("s", "BTC-PERP", "sell", 1_000_000)), trade.StatusFilled)
			if p := w.position(a, "BTC-PERP"); p.Contracts != 1_000_000 || len(w.liquidations(a).Liquidations) != 0 {
				t.Fatalf("short %+v, liquidations %+v", p, w.liquidations(a))
			}
		})
	}
}

// TestMarketPastTheCushionKeepsTrading: a market set past the bound before
// the level keeps its parameters at the raise, may be halted, resumed and
// brought back toward the bound, never taken further past it.
func TestMarketPastTheCushionKeepsTrading(t *testing.T) {
	v := func(x int64) *int64 { return &x }
	w := newTradeWorldAt(t, LevelSpreadFitsMargin-1)
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: v(15_000_000)})
	w.raiseLevel(LevelSpreadFitsMargin)
	if w.marketParams("BTC-PERP").BaseSpreadQ9 != 15_000_000 {
		t.Fatal("the raise changed the market")
	}
	halted, live := market.StatusHalted, market.StatusLive
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", Status: &live, TakerFeeQ9: v(400_000)})
	w.marketRefusedAsIs(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: v(15_000_001)}, "over by 10074506 q9")
	w.marketRefusedAsIs(MarketSetPayload{MarketID: "BTC-PERP", MMRateQ9: v(5_000_001)}, "over by 10074506 q9")
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: v(10_000_000)}) // closer, still past
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: v(200_000)})    // within
	w.marketRefusedAsIs(MarketSetPayload{MarketID: "BTC-PERP", BaseSpreadQ9: v(10_000_000)}, "over by 5074505 q9")
}

// TestGenesisCatalogueMustFitTheSpreadCushion: from the level a catalogue
// with a market past the bound is refused whole and lists nothing; below
// it the catalogue is listed as it was.
func TestGenesisCatalogueMustFitTheSpreadCushion(t *testing.T) {
	for _, level := range []uint32{LevelSpreadFitsMargin - 1, LevelSpreadFitsMargin} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			r := newReplica(t)
			wantOK(t, r.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: level, Seed: 42, Deployment: "testnet"})))
			g := defaultMarketsGenesis()
			g.Markets[1].BaseSpreadQ9 = 15_000_000 // ETH-PERP
			before := r.hash()
			res := r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, g))
			if level < LevelSpreadFitsMargin {
				wantOK(t, res)
				return
			}
			wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
			if !strings.Contains(string(res.Body), "ETH-PERP") || !strings.Contains(string(res.Body), "over by 10074505 q9") {
				t.Fatalf("refusal %s", res.Body)
			}
			if r.hash() != before {
				t.Fatal("a refused catalogue changed the state")
			}
			wantOK(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())))
		})
	}
}

// TestLiquidationPenaltyRoundsOnceInTheVenuesFavour: with an odd
// maintenance rate (5,000,001, valid) the penalty rate was 5,000,001 / 2 =
// 2,500,000 in integer division, half a q9 unit short of the stated
// mmRate / 2. From trade.LevelExactPenalty the penalty is the closed
// notional x 5,000,001 / 2e9 rounded up once.
func TestLiquidationPenaltyRoundsOnceInTheVenuesFavour(t *testing.T) {
	for _, level := range []uint32{trade.LevelExactPenalty - 1, trade.LevelExactPenalty} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			mm := int64(5_000_001)
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", MMRateQ9: &mm})
			a, k := w.account(btcBTC)
			created(t, w.order(a, k, levered(mktOrder("l", "BTC-PERP", "buy", 100_000), 20)), trade.StatusFilled)
			p := w.marketParams("BTC-PERP")
			lvl, _, ok := trade.LiqLevel(&p, w.position(a, "BTC-PERP"))
			if !ok {
				t.Fatal("no liquidation level")
			}
			w.print("BTCUSD", lvl)
			l := w.liquidations(a).Liquidations
			if len(l) != 1 || !l[0].Partial {
				t.Fatalf("liquidations %+v", l)
			}
			notional, err := trade.NotionalMsat(&p, int64(l[0].ClosedContracts), int64(l[0].ExecPriceQ8))
			if err != nil {
				t.Fatal(err)
			}
			ceil := func(num, den *mbig.Int) int64 {
				q, m := new(mbig.Int).DivMod(num, den, new(mbig.Int))
				if m.Sign() != 0 {
					q.Add(q, mbig.NewInt(1))
				}
				return q.Int64()
			}
			old := ceil(mbig.NewInt(0).Mul(mbig.NewInt(notional), mbig.NewInt(mm/2)), mbig.NewInt(market.Q9))
			exact := ceil(mbig.NewInt(0).Mul(mbig.NewInt(notional), mbig.NewInt(mm)), mbig.NewInt(2*market.Q9))
			if exact <= old {
				t.Fatalf("the case does not show the rounding: exact %d, old %d", exact, old)
			}
			want := exact
			if level < trade.LevelExactPenalty {
				want = old
			}
			if got := int64(l[0].PenaltyMsat); got != want {
				t.Fatalf("penalty %d on a notional of %d at mmRate %d: want %d (truncated rate %d, exact %d)", got, notional, mm, want, old, exact)
			}
		})
	}
}
