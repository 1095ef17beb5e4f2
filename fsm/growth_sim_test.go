package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
)

// TestRandomGrowthKeepsTheBooksStraight drives the referral and promoter
// programmes and the leaderboards with random commands (codes, binds,
// promoter applications and codes, trades of referees and others, prints,
// time jumps over holdbacks and recomputes, claims, settings) on two
// replicas. After every entry the machine checks ledger conservation and
// the programme's invariants (each payable holds exactly what its earners
// are owed, codes and earners agree, board rows are ranks); the replicas
// answer alike and hash alike; a snapshot restores to the same hash; and
// what left the payables is what was claimed.
func TestRandomGrowthKeepsTheBooksStraight(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	// Not shortened: the run must span several holdbacks to claim.
	const entries = 2000
	rng := rand.New(rand.NewPCG(15, 16))
	w := newTradeWorld(t)
	w.mirror = newMarketMirror(t)
	w.syncMirror()
	w.hashEvery = 200
	w.keepLog = true
	type acct struct{ id, key string }
	var accts []acct
	for range 24 {
		a, k := w.account(btcBTC/4 + rng.Int64N(btcBTC/4))
		accts = append(accts, acct{a, k})
	}
	var codes []string
	mid := usdQ8(100_000)
	claimed := int64(0)
	tally := map[string]int{}
	for i := range entries {
		a := accts[rng.IntN(len(accts))]
		var res *Result
		switch op := rng.IntN(100); {
		case op < 5:
			c := fmt.Sprintf("C%dX%d", rng.IntN(30), rng.IntN(3))
			res = w.createCode(a.id, a.key, c)
			if res.OK() {
				codes = append(codes, c)
			}
			tally["code "+res.Code]++
		case op < 12 && len(codes) > 0:
			res = w.bind(a.id, a.key, codes[rng.IntN(len(codes))])
			tally["bind "+res.Code]++
		case op < 14:
			res = w.growthCmd(CmdPromoterApply, a.id, a.key, fmt.Sprint("apply", i), goodApplication())
			tally["apply "+res.Code]++
		case op < 17:
			c := fmt.Sprintf("P%dY%d", rng.IntN(30), rng.IntN(3))
			res = w.growthCmd(CmdPromoterCode, a.id, a.key, fmt.Sprint("pc", i),
				growth.NewPromoterCode{Code: c, Label: "l", KickbackQ9: rng.Int64N(200_000_000)})
			if res.OK() {
				codes = append(codes, c)
			}
			tally["pcode "+res.Code]++
		case op < 55:
			side := []string{"buy", "sell"}[rng.IntN(2)]
			res = w.order(a.id, a.key, levered(mktOrder(fmt.Sprint("o", i), "BTC-PERP", side, rng.Int64N(40_000)+1), rng.Int64N(20)+1))
			tally["order "+res.Code]++
		case op < 75:
			mid += (rng.Int64N(2001) - 1000) * mid / 100_000
			wantOK(t, w.print("BTCUSD", mid))
		case op < 77:
			w.walkTo(w.ts + rng.Int64N(16*3_600_000))
			wantOK(t, w.print("BTCUSD", mid))
			tally["jump"]++
		case op < 80: // a newcomer, inside its bind window
			id, key := w.account(btcBTC / 4)
			accts = append(accts, acct{id, key})
			if len(codes) > 0 {
				res = w.bind(id, key, codes[rng.IntN(len(codes))])
				tally["bind "+res.Code]++
			}
		case op < 88:
			free := w.balance(ledger.Free(a.id))
			if rng.IntN(2) == 0 {
				res = w.claim(a.id, a.key)
			} else {
				res = w.growthCmd(CmdPromoterClaim, a.id, a.key, fmt.Sprint("pcl", i), struct{}{})
			}
			if res.OK() {
				var cr growth.ClaimResult
				if err := res.Decode(&cr); err != nil || w.balance(ledger.Free(a.id))-free != int64(cr.ClaimedMsat) {
					t.Fatalf("claim %s moved %d", res.Body, w.balance(ledger.Free(a.id))-free)
				}
				claimed += int64(cr.ClaimedMsat)
			}
			tally["claim "+res.Code]++
		default:
			out := rng.IntN(3) == 0
			name := fmt.Sprintf("Trader %d", rng.IntN(100))
			res = w.growthCmd(CmdLeaderboardSettings, a.id, a.key, fmt.Sprint("set", i), growth.SettingsRequest{OptedOut: &out, DisplayName: &name})
			tally["settings "+res.Code]++
		}
	}
	t.Logf("tally %v, claimed %d msat", tally, claimed)
	for _, k := range []string{"code ", "bind ", "apply ", "pcode ", "order ", "claim ", "settings "} {
		if tally[k] == 0 {
			t.Errorf("weak run: no successful %q", k)
		}
	}
	if claimed == 0 {
		t.Error("weak run: nothing claimed")
	}
	if w.hash() != w.mirror.hash() {
		t.Fatal("replicas' state hashes differ at the end")
	}
	snap, err := w.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(Options{CheckInvariants: true})
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if _, h, _ := m.StateHash(); h != w.hash() {
		t.Fatal("restored state hashes differently")
	}
	// The first entries (codes, binds, claims and recomputes are all
	// there; the whole run costs too much to apply eight more times)
	// apply alike in other batchings and from snapshots (determinism_test.go).
	prefix := append(genesisLog(t), w.log[:600]...)
	compareRuns(t, prefix, 15, len(prefix)/4)
	// Every earner's totals: lifetime = claimed + forfeited + claimable + pending.
	w.m.Read(func(st *State, _ uint64) {
		var lifetime, out int64
		for _, r := range st.Growth.Referrers {
			lifetime += r.LifetimeMsat
			out += r.ClaimedMsat + r.ForfeitedMsat + r.ClaimableMsat
			for _, b := range r.Pending {
				out += b.RewardMsat
			}
		}
		for _, p := range st.Growth.Promoters {
			lifetime += p.Acc.LifetimeMsat
			out += p.Acc.ClaimedMsat + p.Acc.ForfeitedMsat + p.Acc.ClaimableMsat
			for _, b := range p.Acc.Pending {
				out += b.RewardMsat
			}
		}
		if lifetime != out || lifetime == 0 {
			t.Fatalf("earned %d, accounted %d", lifetime, out)
		}
	})
}
