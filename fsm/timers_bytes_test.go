package fsm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// timersScenario is a log that makes every position-walking timer work on
// a book that changes between them: 400 accounts open BTC-PERP positions
// (some at 50x), every fourth an ETH-PERP one, half rest a limit order;
// funding boundaries pass; positions close and flip sides; a 3% drop and
// then a 3% rise liquidate the 50x positions, with deficits past the
// insurance fund (auto-deleveraging); a raised maintenance rate re-derives
// every level (OnParams); more boundaries pass. It returns the entries.
func timersScenario(t *testing.T) (*benchWorld, [][]byte) {
	w := newBenchWorld(t, 0, 0)
	var log [][]byte
	apply := func(e []byte) {
		log = append(log, e)
		w.applyRaw(e)
	}
	// The setup's own entries (genesis, markets, prints) are in w already;
	// the log replays from a snapshot of it.
	const n = 400
	w.addAccounts(0, n, btcBTC/10)
	rng := rand.New(rand.NewPCG(77, 1))
	mid := map[string]int64{"BTCUSD": benchBTCMidQ8, "ETHUSD": benchETHMidQ8}
	printAt := func(feed string, q8 int64) {
		mid[feed] = q8
		apply(w.printCmd(feed, q8))
	}
	walk := func(to int64) { // prints both feeds up to to-1
		for w.ts < to-2 {
			w.ts = min(w.ts+MaxClockStepMs-1000, to-2) - 1
			printAt("BTCUSD", mid["BTCUSD"])
			printAt("ETHUSD", mid["ETHUSD"])
		}
	}
	side := func(i int) string {
		if i%3 == 0 {
			return "sell"
		}
		return "buy"
	}
	for i := range n {
		lev := int64(5)
		if i%7 == 0 {
			lev = 50
		}
		apply(w.orderCmd(i, levered(mktOrder(fmt.Sprintf("b%d", i), "BTC-PERP", side(i), int64(100+rng.IntN(2000))), lev)))
		if i%4 == 0 {
			apply(w.orderCmd(i, levered(mktOrder(fmt.Sprintf("e%d", i), "ETH-PERP", side(i+1), int64(10+rng.IntN(200))), lev)))
		}
		if i%2 == 0 {
			apply(w.orderCmd(i, restingLimit(rng, fmt.Sprintf("l%d", i), "BTC-PERP", i%4 == 0, 100, benchBTCMidQ8, benchTickBTC)))
		}
	}
	for round := range 3 {
		boundary := (w.ts/market.FundingIntervalMs + 1) * market.FundingIntervalMs
		walk(boundary)
		apply(w.tickAt(boundary))
		for i := round; i < n; i += 5 {
			if i%2 == 1 {
				// Flip: sell twice what a long holds, buy twice a short.
				apply(w.orderCmd(i, mktOrder(fmt.Sprintf("f%d-%d", round, i), "BTC-PERP", side(i+1), 3_000)))
			} else {
				apply(w.orderCmd(i, trade.PlaceRequest{OrderID: fmt.Sprintf("c%d-%d", round, i), MarketID: "BTC-PERP",
					Side: side(i + 1), Type: trade.TypeMarket, Contracts: 100_000, ReduceOnly: true}))
			}
			apply(w.orderCmd(i, levered(mktOrder(fmt.Sprintf("o%d-%d", round, i), "ETH-PERP", side(i), 50), 50)))
		}
		w.ts++
		printAt("BTCUSD", benchBTCMidQ8*97/100)
		printAt("ETHUSD", benchETHMidQ8*96/100)
		w.ts++
		printAt("BTCUSD", benchBTCMidQ8*103/100)
		printAt("ETHUSD", benchETHMidQ8*104/100)
		w.ts++
		printAt("BTCUSD", benchBTCMidQ8)
		printAt("ETHUSD", benchETHMidQ8)
		if round == 1 {
			mm := int64(8_000_000)
			c := mustCommand(t, CmdMarketSet, 0, MarketSetPayload{MarketID: "BTC-PERP", MMRateQ9: &mm})
			w.ts++
			apply(w.encode(c))
		}
	}
	boundary := (w.ts/market.FundingIntervalMs + 1) * market.FundingIntervalMs
	walk(boundary)
	apply(w.tickAt(boundary))
	return w, log
}

// The timers' cuts (the holder sets that replaced a walk of every account
// in OnFunding, OnParams and adlCandidates) leave every answer, event and
// state byte as they were: the digests below were recorded with the code
// before the cut (commit ee9e271), and a replica restored from a snapshot
// mid-log (its sets rebuilt from the decoded accounts) ends at the same
// hash.
func TestTimersScenarioKeepsItsBytes(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w, log := timersScenario(t)
	_ = w
	// Replay the log on a fresh world with the same setup, digesting.
	r := newBenchWorld(t, 0, 0)
	r.addAccounts(0, 400, btcBTC/10)
	d := &goldenDigest{accepted: map[CmdType]bool{}}
	var mid []byte
	var midIdx uint64
	liqs, adl, flows := 0, 0, 0
	for k, e := range log {
		res, evs := r.applyRaw(e)
		d.add(e, res)
		d.addEvents(evs)
		for _, ev := range evs {
			switch ev.Kind {
			case "liquidation":
				liqs++
			case "funding_flow":
				flows++
			case "fill":
				if containsADL(ev) {
					adl++
				}
			}
		}
		if k == len(log)/2 {
			s, err := r.m.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			mid, midIdx = s, r.idx
		}
	}
	_, hash, err := r.m.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("results %s events %s state %s snapshot %s", hexSum(d.results), hexSum(d.events), hash, hexSum(snap))
	t.Logf("%d entries, %d liquidations, %d auto-deleveraging fills, %d funding flows", len(log), liqs, adl, flows)
	if liqs == 0 || adl == 0 || flows == 0 {
		t.Fatalf("the scenario liquidated %d, deleveraged %d, paid %d flows: it tests too little", liqs, adl, flows)
	}
	// The state and snapshot digests are those of a cluster started at
	// the build's level (State.FeatureLevel is part of both): recorded
	// again when FeatureLevel rose to 9, which changed nothing else (at 8
	// the scenario still gives state 5f9391b5... snapshot 9700e56b...).
	const want = "results 9baea028408fe1b2572607d7b2d265edcafd01bb5c6eae0eaf7f5a254936ba22 events e1d5a58500adab60630afed6295072df73a8af0f0e10887e66a92ad93c5c6905 " +
		"state bd79f9d2b1142c1506c92e6ab57e632ed51b3221759837ed450b4aa562bbcd3c snapshot 8a5cae9d3119b067b209ca3aeba97b1300a28824459aac92b2740d4ad4aad4c0"
	if got != want {
		t.Fatalf("the scenario gives\n%s\nthe code before the cut gave\n%s", got, want)
	}
	// A replica restored mid-log ends at the same hash.
	x := &benchWorld{tb: t, m: NewMachine(Options{CheckInvariants: true})}
	if err := x.m.Restore(mid); err != nil {
		t.Fatal(err)
	}
	x.idx = midIdx
	for _, e := range log[len(log)/2+1:] {
		x.applyRaw(e)
	}
	if _, h, _ := x.m.StateHash(); h != hash {
		t.Fatalf("restored mid-log: hash %s, continuous %s", h, hash)
	}
}

func containsADL(ev Event) bool {
	v, ok := ev.Data.(trade.FillEvent)
	return ok && v.Fill != nil && strings.HasPrefix(v.Fill.OrderID, trade.ADLOrderPrefix)
}
