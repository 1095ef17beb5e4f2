package fsm

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

const (
	// mktLaunchMs is 2026-01-01T00:30:00Z: half an hour before a funding
	// boundary, and late enough for 90 days of seeded history.
	mktLaunchMs int64 = 1_767_225_600_000 + 30*60_000
	hourMs      int64 = 3_600_000
	btcAnchorQ8 int64 = 97_000 * market.Q8
	ethAnchorQ8 int64 = 3_400 * market.Q8
)

func defaultMarketsGenesis() MarketsGenesisPayload {
	return MarketsGenesisPayload{Markets: market.DefaultCatalogue(),
		Anchors: []FeedAnchor{{FeedID: "BTCUSD", MidQ8: btcAnchorQ8}, {FeedID: "ETHUSD", MidQ8: ethAnchorQ8}}}
}

// newMarketReplica is a replica past genesis with the default catalogue.
func newMarketReplica(t testing.TB) *replica {
	t.Helper()
	r := newReplica(t)
	wantOK(t, r.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 42, Deployment: "testnet"})))
	wantOK(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())))
	return r
}

func printAt(t testing.TB, entryTs int64, feed string, midQ8, tsMs int64) *Command {
	return mustCommand(t, CmdOraclePrint, entryTs, OraclePrintPayload{FeedID: feed, MidQ8: midQ8, ConfQ9: 300_000, TsMs: tsMs})
}

// applyEvents applies cmd at the replica's next index and returns its events.
func (r *replica) applyEvents(cmd *Command) (*Result, []Event) {
	r.t.Helper()
	b, err := cmd.Encode()
	if err != nil {
		r.t.Fatal(err)
	}
	res, evs := r.m.Apply(r.next, b)
	r.next++
	return res, evs
}

func (r *replica) market() *market.State {
	var s *market.State
	r.m.Read(func(st *State, _ uint64) { s = st.Market })
	return s
}

func TestMarketsGenesisListsTheCatalogueOnce(t *testing.T) {
	r := newReplica(t)
	wantRefused(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())), http.StatusConflict, wire.CodeConflict)
	wantOK(t, r.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 42, Deployment: "testnet"})))

	bad := []MarketsGenesisPayload{
		{},
		{Markets: append(market.DefaultCatalogue(), market.DefaultCatalogue()[0])},
		{Markets: market.DefaultCatalogue(), Anchors: []FeedAnchor{{FeedID: "SOLUSD", MidQ8: 1}}},
		{Markets: market.DefaultCatalogue(), Anchors: []FeedAnchor{{FeedID: "BTCUSD", MidQ8: 1}, {FeedID: "BTCUSD", MidQ8: 2}}},
		{Markets: market.DefaultCatalogue(), Anchors: []FeedAnchor{{FeedID: "BTCUSD", MidQ8: 0}}},
		{Markets: []market.Params{{MarketID: "X"}}},
	}
	before := r.hash()
	for i, p := range bad {
		wantRefused(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, p)), http.StatusBadRequest, wire.CodeValidation)
		if r.hash() != before {
			t.Fatalf("bad catalogue %d changed the state", i)
		}
	}

	res := r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis()))
	wantOK(t, res)
	var out MarketsGenesisResult
	if err := res.Decode(&out); err != nil || !reflect.DeepEqual(out.Markets, []string{"BTC-PERP", "ETH-PERP"}) {
		t.Fatalf("genesis answered %s", res.Body)
	}
	s := r.market()
	for id, anchor := range map[string]int64{"BTC-PERP": btcAnchorQ8, "ETH-PERP": ethAnchorQ8} {
		day, err := s.Candles(id, market.Interval1d, market.CandleLimitMax, mktLaunchMs)
		if err != nil || len(day) != market.SeedDays {
			t.Fatalf("%s: %d daily bars (%v), want %d seeded", id, len(day), err, market.SeedDays)
		}
		if last := day[len(day)-1]; !last.Seeded || last.CQ8 != anchor || last.Prints != 0 {
			t.Fatalf("%s: last seeded bar %+v does not close at the anchor %d", id, last, anchor)
		}
		if m := s.MarketsByID[id]; m.NextFundingTsMs != mktLaunchMs+30*60_000 {
			t.Fatalf("%s: first funding boundary %d", id, m.NextFundingTsMs)
		}
	}

	listed := r.hash()
	again := mustCommand(t, CmdMarketsGenesis, mktLaunchMs, MarketsGenesisPayload{Markets: market.DefaultCatalogue()[:1]})
	wantRefused(t, r.apply(again), http.StatusConflict, wire.CodeConflict)
	if r.hash() != listed {
		t.Fatal("a second markets genesis changed the state")
	}
}

func TestSeededHistoryFollowsTheGenesisSeed(t *testing.T) {
	a, b := newMarketReplica(t), newMarketReplica(t)
	if a.hash() != b.hash() {
		t.Fatal("same genesis, different states")
	}
	c := newReplica(t)
	wantOK(t, c.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 43, Deployment: "testnet"})))
	wantOK(t, c.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())))
	da, _ := a.market().Candles("BTC-PERP", market.Interval1d, 10, mktLaunchMs)
	dc, _ := c.market().Candles("BTC-PERP", market.Interval1d, 10, mktLaunchMs)
	if reflect.DeepEqual(da, dc) {
		t.Fatal("another genesis seed drew the same history")
	}
}

func TestPrintsApplyAndEmitPriceAndStatsEvents(t *testing.T) {
	r := newMarketReplica(t)
	ts := mktLaunchMs + 1_000
	res, evs := r.applyEvents(printAt(t, ts, "BTCUSD", 97_001*market.Q8, ts))
	wantOK(t, res)
	if lp, ok := r.market().LastPrint("BTC-PERP"); !ok || lp.MidQ8 != 97_001*market.Q8 || lp.TsMs != ts {
		t.Fatalf("last print %+v %v", lp, ok)
	}
	if len(evs) != 2 {
		t.Fatalf("events %+v, want a price and a stats event", evs)
	}
	pe, ok := evs[0].Data.(PriceEvent)
	if evs[0].Channel != "prices" || evs[0].Selector != "BTCUSD" || !ok ||
		pe.MidQ8 != wire.Int(97_001*market.Q8) || pe.TsMs != wire.Int(ts) || pe.StalenessMs != 10_000 {
		t.Fatalf("price event %+v", evs[0])
	}
	se, ok := evs[1].Data.(StatsEvent)
	if evs[1].Channel != "stats" || evs[1].Selector != "BTC-PERP" || !ok || se.MarkQ8 == nil ||
		*se.MarkQ8 != wire.Int(97_001*market.Q8) || *se.OracleTsMs != wire.Int(ts) || se.StalenessMs != 10_000 ||
		se.NextFundingTsMs != wire.Int(mktLaunchMs+30*60_000) || se.Status != "live" {
		t.Fatalf("stats event %+v", evs[1])
	}
	if _, err := json.Marshal(evs); err != nil {
		t.Fatalf("events must encode for the WebSocket layer: %v", err)
	}
}

func TestOutOfOrderPrintRefusedAndChangesNothing(t *testing.T) {
	r := newMarketReplica(t)
	ts := mktLaunchMs + 5_000
	wantOK(t, r.apply(printAt(t, ts, "BTCUSD", btcAnchorQ8, ts)))
	// Every refused entry carries the state's own time, so the refusal is
	// the only thing that could change the hash.
	before := r.hash()
	for _, tc := range []struct {
		name         string
		feed         string
		mid, printTs int64
		status       int
		code         string
	}{
		{"same timestamp", "BTCUSD", btcAnchorQ8 + 1, ts, http.StatusConflict, wire.CodeConflict},
		{"older timestamp", "BTCUSD", btcAnchorQ8 + 1, ts - 1, http.StatusConflict, wire.CodeConflict},
		{"beyond the future tolerance", "BTCUSD", btcAnchorQ8, ts + market.PrintFutureToleranceMs + 1, http.StatusConflict, wire.CodeConflict},
		{"unknown feed", "SOLUSD", 1, ts + 1, http.StatusNotFound, wire.CodeNotFound},
		{"zero price", "BTCUSD", 0, ts + 1, http.StatusBadRequest, wire.CodeValidation},
		{"price above the book's bound", "BTCUSD", market.PriceQ8Max + 1, ts + 1, http.StatusBadRequest, wire.CodeValidation},
	} {
		res, evs := r.applyEvents(printAt(t, ts, tc.feed, tc.mid, tc.printTs))
		wantRefused(t, res, tc.status, tc.code)
		if len(evs) != 0 || r.hash() != before {
			t.Fatalf("%s: a refused print changed the state or emitted %v", tc.name, evs)
		}
	}
	// On the tolerance boundary the print is accepted.
	wantOK(t, r.apply(printAt(t, ts, "BTCUSD", btcAnchorQ8, ts+market.PrintFutureToleranceMs)))
}

// TestPricesAreDeterministicAcrossReplicas feeds one entry stream to three
// machines, one entry at a time, in batches, and through a snapshot
// round trip: answers, events and state hashes must agree.
func TestPricesAreDeterministicAcrossReplicas(t *testing.T) {
	var entries [][]byte
	add := func(c *Command) {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, b)
	}
	add(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 7, Deployment: "testnet"}))
	add(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis()))
	for i := int64(1); i <= 400; i++ {
		ts := mktLaunchMs + i*20_000 // crosses several funding boundaries
		add(tickAt(ts))
		add(printAt(t, ts, "BTCUSD", btcAnchorQ8+i*market.Q8, ts))
		add(printAt(t, ts, "ETHUSD", ethAnchorQ8-i*market.Q8, ts-1))
		if i%50 == 0 {
			st := market.StatusReduceOnly
			add(mustCommand(t, CmdMarketSet, ts, MarketSetPayload{MarketID: "ETH-PERP", Status: &st}))
			add(mustCommand(t, CmdOraclePin, ts, OraclePinPayload{FeedID: "BTCUSD", MidQ8: 1}))
			add(printAt(t, ts, "BTCUSD", 1, ts)) // refused: not newer
		}
	}

	single, batched, restored := newReplica(t), NewMachine(Options{CheckInvariants: true}), NewMachine(Options{CheckInvariants: true})
	var evSingle, evBatched []Event
	for _, e := range entries {
		_, evs := single.m.Apply(single.next, e)
		single.next++
		evSingle = append(evSingle, evs...)
	}
	for start := 0; start < len(entries); start += 37 {
		end := min(start+37, len(entries))
		idx := make([]uint64, end-start)
		for i := range idx {
			idx[i] = uint64(start + i + 1)
		}
		_, evs := batched.ApplyBatch(idx, entries[start:end])
		evBatched = append(evBatched, evs...)
		restored.ApplyBatch(idx, entries[start:end])
		snap, err := restored.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		restored = NewMachine(Options{CheckInvariants: true})
		if err := restored.Restore(snap); err != nil {
			t.Fatal(err)
		}
	}
	want := single.hash()
	for name, m := range map[string]*Machine{"batched": batched, "restored": restored} {
		if _, h, _ := m.StateHash(); h != want {
			t.Fatalf("%s replica diverged", name)
		}
	}
	a, _ := json.Marshal(evSingle)
	b, _ := json.Marshal(evBatched)
	if string(a) != string(b) || len(evSingle) < 1600 {
		t.Fatalf("event streams differ or are short (%d events)", len(evSingle))
	}
	if f, _ := single.market().Funding("BTC-PERP"); len(f) != 2 {
		t.Fatalf("BTC-PERP funding history %+v, want the boundaries at 01:00 and 02:00", f)
	}
}

// TestFundingBoundariesRecordedByTicksOnly: with no trading and no prints,
// the leader's ticks alone record every hourly boundary.
func TestFundingBoundariesRecordedByTicksOnly(t *testing.T) {
	r := newMarketReplica(t)
	s := r.market()
	// Skew the BTC book 3:1 long, as the trading engine would.
	if err := s.AddOpenInterest("BTC-PERP", market.Long, 300); err != nil {
		t.Fatal(err)
	}
	if err := s.AddOpenInterest("BTC-PERP", market.Short, 100); err != nil {
		t.Fatal(err)
	}
	var funding []FundingBoundaryView
	for ts := mktLaunchMs + 10*60_000; ts <= mktLaunchMs+5*hourMs; ts += 10 * 60_000 {
		for _, ev := range r.advanceTo(ts) {
			if ev.Kind == "funding" && ev.Selector == "BTC-PERP" {
				funding = append(funding, ev.Data.(FundingBoundaryView))
			}
		}
	}
	got, _ := r.market().Funding("BTC-PERP")
	if len(got) != 5 || len(funding) != 5 {
		t.Fatalf("%d boundaries recorded, %d events, want 5", len(got), len(funding))
	}
	for i, f := range got {
		wantTs := mktLaunchMs + 30*60_000 + int64(i)*hourMs
		if f.TsMs != wantTs || f.SkewQ9 != 500_000_000 || f.RateQ9 != 50_000 {
			t.Fatalf("boundary %d = %+v, want ts %d skew 0.5 rate capped at 50000", i, f, wantTs)
		}
		if funding[i].BoundaryTsMs != wire.Int(wantTs) || funding[i].MarkQ8 != nil || !funding[i].MarkStale {
			t.Fatalf("funding event %d = %+v (no print: mark null and stale)", i, funding[i])
		}
	}
	// A gap of three hours records the latest boundary and counts the rest.
	// One entry can move log time only MaxClockStepMs, so the gap is a
	// stretch in which no tick was proposed: the boundaries fall due at once
	// when a single tick lands past them. Stand in for that by jumping the
	// state's clock, as a leader that was down for hours would see it.
	r.m.Read(func(st *State, _ uint64) { st.NowMs = mktLaunchMs + 8*hourMs + 1 - MaxClockStepMs })
	res, evs := r.applyEvents(tickAt(mktLaunchMs + 8*hourMs + 1))
	wantOK(t, res)
	if len(evs) != 2 || evs[0].Data.(FundingBoundaryView).SkippedBoundaries != 2 {
		t.Fatalf("after a gap: %+v", evs)
	}
}

func TestMarketSetIsValidatedAndPartial(t *testing.T) {
	r := newMarketReplica(t)
	ts := mktLaunchMs
	halted := market.StatusHalted
	res := r.apply(mustCommand(t, CmdMarketSet, ts, MarketSetPayload{MarketID: "BTC-PERP", Status: &halted}))
	wantOK(t, res)
	var v MarketView
	if err := res.Decode(&v); err != nil || v.Status != "halted" || v.TickSizeQ8 != 50_000_000 || v.LastPrice != nil {
		t.Fatalf("set answered %s", res.Body)
	}
	tick := int64(100_000_000)
	wantOK(t, r.apply(mustCommand(t, CmdMarketSet, ts, MarketSetPayload{MarketID: "BTC-PERP", TickSizeQ8: &tick})))
	if p := r.market().MarketsByID["BTC-PERP"].Params; p.TickSizeQ8 != tick || p.Status != market.StatusHalted || p.TakerFeeQ9 != 500_000 {
		t.Fatalf("a partial update touched other fields: %+v", p)
	}

	before := r.hash()
	big, mm, dp, mult, zero := int64(100_000_001), int64(10_000_000), int64(9), int64(1), int64(0)
	bogus, eth, quanto := market.Status("open"), "ETH", market.Quanto
	for _, tc := range []struct {
		name   string
		p      MarketSetPayload
		status int
		code   string
	}{
		{"unknown market", MarketSetPayload{MarketID: "SOL-PERP", Status: &halted}, http.StatusNotFound, wire.CodeNotFound},
		{"nothing to change", MarketSetPayload{MarketID: "BTC-PERP"}, http.StatusBadRequest, wire.CodeValidation},
		{"unknown status", MarketSetPayload{MarketID: "BTC-PERP", Status: &bogus}, http.StatusBadRequest, wire.CodeValidation},
		{"maintenance not below initial", MarketSetPayload{MarketID: "BTC-PERP", MMRateQ9: &mm}, http.StatusBadRequest, wire.CodeValidation},
		{"fee above 10%", MarketSetPayload{MarketID: "BTC-PERP", TakerFeeQ9: &big, BaseSpreadQ9: &big}, http.StatusBadRequest, wire.CodeValidation},
		{"priceDp above 8", MarketSetPayload{MarketID: "BTC-PERP", PriceDp: &dp}, http.StatusBadRequest, wire.CodeValidation},
		{"zero staleness", MarketSetPayload{MarketID: "BTC-PERP", OracleStalenessMs: &zero}, http.StatusBadRequest, wire.CodeValidation},
		{"multiplier on an inverse market", MarketSetPayload{MarketID: "BTC-PERP", QuantoMultiplierMsat: &mult}, http.StatusBadRequest, wire.CodeValidation},
		{"underlying is immutable", MarketSetPayload{MarketID: "BTC-PERP", Underlying: &eth}, http.StatusConflict, wire.CodeConflict},
		{"contract type is immutable", MarketSetPayload{MarketID: "BTC-PERP", ContractType: &quanto, QuantoMultiplierMsat: &mult}, http.StatusConflict, wire.CodeConflict},
		{"multiplier is immutable", MarketSetPayload{MarketID: "ETH-PERP", QuantoMultiplierMsat: &mult}, http.StatusConflict, wire.CodeConflict},
	} {
		res, evs := r.applyEvents(mustCommand(t, CmdMarketSet, ts, tc.p))
		wantRefused(t, res, tc.status, tc.code)
		if len(evs) != 0 || r.hash() != before {
			t.Fatalf("%s: refused set changed the state", tc.name)
		}
	}
}

func TestCheckMarketOpen(t *testing.T) {
	r := newMarketReplica(t)
	ts := mktLaunchMs + 1_000
	check := func(id string, now int64) *wire.Refusal {
		var ref *wire.Refusal
		r.m.Read(func(st *State, _ uint64) { ref = checkMarketOpen(st, id, now) })
		return ref
	}
	want := func(name string, ref *wire.Refusal, status int, code string) {
		t.Helper()
		if status == 0 {
			if ref != nil {
				t.Fatalf("%s: refused %v", name, ref)
			}
			return
		}
		if ref == nil || ref.Status != status || ref.Code != code {
			t.Fatalf("%s: got %v, want %d %s", name, ref, status, code)
		}
	}
	want("no print yet", check("BTC-PERP", ts), http.StatusBadRequest, wire.CodeOracleStale)
	want("unknown market", check("SOL-PERP", ts), http.StatusBadRequest, wire.CodeValidation)
	wantOK(t, r.apply(printAt(t, ts, "BTCUSD", btcAnchorQ8, ts)))
	want("fresh print", check("BTC-PERP", ts), 0, "")
	want("exactly oracleStalenessMs old", check("BTC-PERP", ts+10_000), 0, "")
	want("one ms past oracleStalenessMs", check("BTC-PERP", ts+10_001), http.StatusBadRequest, wire.CodeOracleStale)
	want("other feed has no print", check("ETH-PERP", ts), http.StatusBadRequest, wire.CodeOracleStale)

	ro := market.StatusReduceOnly
	wantOK(t, r.apply(mustCommand(t, CmdMarketSet, ts, MarketSetPayload{MarketID: "BTC-PERP", Status: &ro})))
	want("reduce_only is the caller's check", check("BTC-PERP", ts), 0, "")
	halted := market.StatusHalted
	wantOK(t, r.apply(mustCommand(t, CmdMarketSet, ts, MarketSetPayload{MarketID: "BTC-PERP", Status: &halted})))
	want("halted", check("BTC-PERP", ts), http.StatusBadRequest, wire.CodeMarketHalted)
	want("halted wins over stale", check("BTC-PERP", ts+60_000), http.StatusBadRequest, wire.CodeMarketHalted)
}

func TestOracleOverridesAreReplicatedAndValidated(t *testing.T) {
	r := newMarketReplica(t)
	ts := mktLaunchMs + 2_000
	res := r.apply(mustCommand(t, CmdOraclePin, ts, OraclePinPayload{FeedID: "BTCUSD", MidQ8: 50_000 * market.Q8}))
	wantOK(t, res)
	o, ok := r.market().FeedOverride("BTCUSD")
	if !ok || o.Mode != market.OverridePin || o.StartMs != ts || o.SetIndex != r.next-1 || o.Points[0].MidQ8 != 50_000*market.Q8 {
		t.Fatalf("pin stored as %+v %v", o, ok)
	}
	var v FeedOverrideView
	if err := res.Decode(&v); err != nil || v.Override == nil || v.Override.Mode != "pin" {
		t.Fatalf("pin answered %s", res.Body)
	}

	pts := []market.OverridePoint{{OffsetMs: 0, MidQ8: 100}, {OffsetMs: 1_000, MidQ8: 200}}
	wantOK(t, r.apply(mustCommand(t, CmdOracleScript, ts+1, OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverrideLinear, Points: pts})))
	if o, _ := r.market().FeedOverride("BTCUSD"); o.Mode != market.OverrideLinear || o.StartMs != ts+1 || len(o.Points) != 2 {
		t.Fatalf("script replaced the pin as %+v", o)
	}

	before := r.hash()
	tooMany := make([]market.OverridePoint, market.OverridePointsMax+1)
	for i := range tooMany {
		tooMany[i] = market.OverridePoint{OffsetMs: int64(i), MidQ8: 1}
	}
	for _, tc := range []struct {
		name   string
		cmd    *Command
		status int
		code   string
	}{
		{"pin an unknown feed", mustCommand(t, CmdOraclePin, ts+1, OraclePinPayload{FeedID: "SOLUSD", MidQ8: 1}), http.StatusNotFound, wire.CodeNotFound},
		{"pin at zero", mustCommand(t, CmdOraclePin, ts+1, OraclePinPayload{FeedID: "BTCUSD"}), http.StatusBadRequest, wire.CodeValidation},
		{"pin above the bound", mustCommand(t, CmdOraclePin, ts+1, OraclePinPayload{FeedID: "BTCUSD", MidQ8: market.PriceQ8Max + 1}), http.StatusBadRequest, wire.CodeValidation},
		{"script mode pin", mustCommand(t, CmdOracleScript, ts+1, OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverridePin, Points: pts[:1]}), http.StatusBadRequest, wire.CodeValidation},
		{"script without points", mustCommand(t, CmdOracleScript, ts+1, OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverrideStep}), http.StatusBadRequest, wire.CodeValidation},
		{"script offsets not increasing", mustCommand(t, CmdOracleScript, ts+1, OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverrideStep,
			Points: []market.OverridePoint{{OffsetMs: 5, MidQ8: 1}, {OffsetMs: 5, MidQ8: 2}}}), http.StatusBadRequest, wire.CodeValidation},
		{"script negative offset", mustCommand(t, CmdOracleScript, ts+1, OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverrideStep,
			Points: []market.OverridePoint{{OffsetMs: -1, MidQ8: 1}}}), http.StatusBadRequest, wire.CodeValidation},
		{"script too long", mustCommand(t, CmdOracleScript, ts+1, OracleScriptPayload{FeedID: "BTCUSD", Mode: market.OverrideStep, Points: tooMany}), http.StatusBadRequest, wire.CodeValidation},
		{"unpin an unknown feed", mustCommand(t, CmdOracleUnpin, ts+1, OracleUnpinPayload{FeedID: "SOLUSD"}), http.StatusNotFound, wire.CodeNotFound},
	} {
		wantRefused(t, r.apply(tc.cmd), tc.status, tc.code)
		if r.hash() != before {
			t.Fatalf("%s: refused override changed the state", tc.name)
		}
	}

	res = r.apply(mustCommand(t, CmdOracleUnpin, ts+1, OracleUnpinPayload{FeedID: "BTCUSD"}))
	wantOK(t, res)
	if _, ok := r.market().FeedOverride("BTCUSD"); ok || string(res.Body) != `{"feedId":"BTCUSD","override":null}` {
		t.Fatalf("unpin left %s", res.Body)
	}
	wantOK(t, r.apply(mustCommand(t, CmdOracleUnpin, ts+1, OracleUnpinPayload{FeedID: "BTCUSD"})))
}
