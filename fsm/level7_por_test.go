package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/por"
)

// Feature level 7: fixes found by the review of Proof of Reserves and the
// growth programmes on 2026-11-27. Each test runs at level 6 (the old
// rule, which must stay as it was for replay) and at level 7.

// TestPoROneAccountRootCommitsToItsBalance: with one account the sats
// tree was that account's leaf alone; the root hash, SHA-256(rootSalt ||
// accountTag), commits to neither the balance nor the total, so a proof
// with any balance (and a matching total) verified against the published
// root. From the level every tree has two leaf slots at least: the root
// is a parent, and its hash binds the sums.
func TestPoROneAccountRootCommitsToItsBalance(t *testing.T) {
	for _, level := range []uint32{LevelPoRRootIsParent - 1, LevelPoRRootIsParent} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, _ := w.account(btcBTC)
			w.walkToNextPoR()
			wantOK(t, w.print("BTCUSD", usdQ8(100_100)))
			snap, _ := w.porSnap(w.replica)
			tr := snap.Msat
			if tr.LeafCount() != 1 || tr.Index(acct) != 0 || tr.Total != btcBTC {
				t.Fatalf("want one leaf of %d msat: %d leaves, total %d", btcBTC, tr.LeafCount(), tr.Total)
			}
			full, err := por.BuildWidth(tr.Salt, tr.Leaves(), tr.Width())
			if err != nil || full.Root().Hash != tr.RootHash {
				t.Fatalf("rebuilt tree differs: %v", err)
			}
			d, err := por.NewProofDoc(por.AssetMsat, full, tr.Salt, tr.Tags[0], 0, tr.TsMs)
			if err != nil {
				t.Fatal(err)
			}
			root := d.RootHash
			_, err = d.Verify(root)
			if level < LevelPoRRootIsParent {
				if len(d.Path) != 0 || !errors.Is(err, por.ErrNoPath) {
					t.Fatalf("below the level: %d steps, %v", len(d.Path), err)
				}
				if snap.Usdx.Width() != 1 {
					t.Fatal("below the level the USDx tree changed width")
				}
				return
			}
			if err != nil || len(d.Path) != 1 {
				t.Fatalf("%d steps: %v", len(d.Path), err)
			}
			d.Leaf.BalanceMsat, d.TotalMsat = "1", "1"
			if _, err := d.Verify(root); err == nil {
				t.Fatal("a doctored balance verified against the published root")
			}
			if snap.Usdx.Width() != por.MinWidth || snap.Usdx.RootHash == (por.Hash{}) {
				t.Fatalf("the empty USDx tree: width %d root %x", snap.Usdx.Width(), snap.Usdx.RootHash)
			}
		})
	}
}

// TestPoRLedgerSumDoesNotDependOnMapOrder: the consolidation checked the
// ledger's sum for overflow step by step while walking the balance map,
// so with the house book far negative and traders far positive the check
// fired in some walk orders and not in others: replicas recorded
// different problems, statuses and state hashes for the same tree. From
// the level the exact sum decides. The balances are set by hand (reaching
// them by trading would take tens of millions of bitcoin).
func TestPoRLedgerSumDoesNotDependOnMapOrder(t *testing.T) {
	for _, level := range []uint32{LevelPoRSumExact - 1, LevelPoRSumExact} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			a, _ := w.account(0)
			b, _ := w.account(0)
			const big = 8_000_000_000_000_000_000 // 80M BTC in msat
			seen := map[string]int{}
			w.m.Read(func(st *State, _ uint64) {
				for k := range st.Ledger.Balances {
					st.Ledger.Balances[k] = 0
				}
				st.Ledger.Balances[ledger.House] = -big
				st.Ledger.Balances[ledger.Free(a)] = big
				st.Ledger.Balances[ledger.Free(b)] = big
				st.Ledger.CreditedMsat, st.Ledger.PaidMsat = big, 0
				for range 200 {
					snap := BuildPoR(st)
					seen[fmt.Sprintf("%s %q", snap.Status, snap.Problems)]++
				}
			})
			if level < LevelPoRSumExact {
				t.Logf("below the level: %d outcome(s) in 200 builds: %v", len(seen), seen)
				return
			}
			if len(seen) != 1 {
				t.Fatalf("the same state gave %d outcomes: %v", len(seen), seen)
			}
			for k := range seen {
				if strings.Contains(k, "ledger:") {
					t.Fatalf("a sum that fits 64 bits was reported: %s", k)
				}
			}
		})
	}
}
