package fsm

import (
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/wire"
)

// A cluster born before the domains of LevelDomains (genesis at level 0,
// like every cluster of an older build) applies its log as that build
// did: the domains' state does not exist, their commands are refused
// without a change, and their timers record nothing, however much time
// passes. The raise turns them on at one index on every replica. (Before
// the gate, the new build created their state and trees at once, and a
// rolling upgrade saw two state hashes.)
func TestDomainsWaitForTheirFeatureLevel(t *testing.T) {
	r := newReplica(t)
	wantOK(t, r.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{Seed: 42, Deployment: "testnet"})))
	wantOK(t, r.apply(mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis())))
	wantOK(t, r.apply(mustCommand(t, CmdNodeMeta, mktLaunchMs, NodeMeta{ID: "n1", Raft: "127.0.0.1:1"})))
	ts := mktLaunchMs
	for i := 0; i < 5; i++ { // five minutes of log time: PoR would build five trees
		ts += MaxClockStepMs - 1
		wantOK(t, r.apply(mustCommand(t, CmdTick, ts, nil)))
	}
	off := func() (bool, bool) {
		var on, nilDomains bool
		r.m.Read(func(st *State, _ uint64) {
			on = st.DomainsOn()
			nilDomains = st.USDx == nil && st.Growth == nil && st.PoR == nil
		})
		return on, nilDomains
	}
	if on, none := off(); on || !none {
		t.Fatalf("below the level: domains on %v, their state nil %v", on, none)
	}
	quote := mustCommand(t, CmdUSDxQuote, ts+1, USDxQuotePayload{QuoteID: "uq_1", Side: "mint", Usdx: 1})
	quote.Account, quote.KeyID, quote.IdemKey = "acc_1", "key_1", "acct:acc_1:q"
	wantRefused(t, r.apply(quote), http.StatusServiceUnavailable, wire.CodeFeatureUnavailable)
	code := mustCommand(t, CmdReferralCode, ts+2, ReferralCodePayload{Code: "ABCD1234"})
	code.Account, code.KeyID = "acc_1", "key_1"
	wantRefused(t, r.apply(code), http.StatusServiceUnavailable, wire.CodeFeatureUnavailable)

	wantOK(t, r.apply(mustCommand(t, CmdSetFeatureLevel, ts+3, FeatureLevelPayload{Level: LevelDomains,
		Nodes: []AdvertisedLevel{{"n1", LevelDomains}}})))
	if on, none := off(); !on || none {
		t.Fatalf("after the raise: domains on %v, their state nil %v", on, none)
	}
	ts += por.CadenceMs + 10
	wantOK(t, r.apply(mustCommand(t, CmdTick, ts, nil)))
	r.m.Read(func(st *State, _ uint64) {
		if st.PoR.Latest == nil {
			t.Fatal("no Proof of Reserves tree a minute after the raise")
		}
	})

	// A new cluster starts at the build's level.
	fresh := newMarketReplica(t)
	fresh.m.Read(func(st *State, _ uint64) {
		if st.FeatureLevel != FeatureLevel || !st.DomainsOn() {
			t.Fatalf("a new cluster at level %d, domains on %v", st.FeatureLevel, st.DomainsOn())
		}
	})
	// And no genesis asks for a level this build does not implement.
	r2 := newReplica(t)
	wantRefused(t, r2.apply(mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{Seed: 1, Deployment: "testnet", FeatureLevel: FeatureLevel + 1})),
		http.StatusBadRequest, wire.CodeValidation)
}
