package trade

import (
	"fmt"
	"slices"
	"sort"
	"testing"
)

// holdersByWalk is how OnFunding, OnParams and adlCandidates found a
// market's holders before the holder sets: every account walked, the ids
// of those with a position sorted.
func holdersByWalk(s *State, mkt string) []string {
	var ids []string
	for id, a := range s.Accounts {
		if _, ok := a.Positions[mkt]; ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// holdersWorld has n accounts, each with a BTC-PERP position and every
// tenth an ETH-PERP one too.
func holdersWorld(n int) *State {
	s := NewState()
	for i := range n {
		a := &Account{Positions: map[string]*Position{"BTC-PERP": {Contracts: 1}}}
		if i%10 == 0 {
			a.Positions["ETH-PERP"] = &Position{Contracts: 1}
		}
		s.Accounts[fmt.Sprintf("acc_%06d", i)] = a
	}
	return s
}

// The holder sets list, in order, what the walk found, for every market
// and after positions open and close through noteHolder.
func TestMarketHoldersAreTheWalksHolders(t *testing.T) {
	s := holdersWorld(5_000)
	for _, mkt := range []string{"BTC-PERP", "ETH-PERP", "SOL-PERP"} {
		if got, want := s.marketHolders(mkt), holdersByWalk(s, mkt); !slices.Equal(got, want) {
			t.Fatalf("%s: %d holders, the walk %d", mkt, len(got), len(want))
		}
	}
	for i := 0; i < 5_000; i += 7 {
		id := fmt.Sprintf("acc_%06d", i)
		a := s.Accounts[id]
		if _, ok := a.Positions["ETH-PERP"]; ok {
			delete(a.Positions, "ETH-PERP")
			s.noteHolder(id, "ETH-PERP", false)
		} else {
			a.Positions["ETH-PERP"] = &Position{Contracts: 2}
			s.noteHolder(id, "ETH-PERP", true)
		}
	}
	if got, want := s.marketHolders("ETH-PERP"), holdersByWalk(s, "ETH-PERP"); !slices.Equal(got, want) {
		t.Fatalf("after changes: %d holders, the walk %d", len(got), len(want))
	}
	if err := s.checkHolders(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkMarketHolders is what a funding boundary spends finding the
// market's holders, before (walk) and after (sets), at 100,000 accounts:
// BTC-PERP held by all, ETH-PERP by a tenth.
func BenchmarkMarketHolders(b *testing.B) {
	s := holdersWorld(100_000)
	s.marketHolders("BTC-PERP") // build the sets outside the timer
	for _, mkt := range []string{"BTC-PERP", "ETH-PERP"} {
		b.Run("walk/"+mkt, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				holdersByWalk(s, mkt)
			}
		})
		b.Run("sets/"+mkt, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.marketHolders(mkt)
			}
		})
	}
}
