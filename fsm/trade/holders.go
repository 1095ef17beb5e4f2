package trade

import (
	"fmt"

	"github.com/tidwall/btree"
)

// The holders of each market: the ids of the accounts with a position in
// it, ascending. What a boundary settles (OnFunding), a parameter change
// re-derives (OnParams) and auto-deleveraging ranks (adlCandidates) is the
// market's positions, in account id order; they used to walk every
// account and sort the ids of those that held one, so an ETH-PERP
// boundary walked 100,000 accounts that held only BTC-PERP. Derived from
// Accounts (the canonical content a snapshot carries) on first use after
// a decode, kept in step where a position opens or closes, never
// serialised.

// holderSet returns market mkt's holders, building every market's from
// the accounts on first use.
func (s *State) holderSet(mkt string) *btree.BTreeG[string] {
	if s.holders == nil {
		s.holders = map[string]*btree.BTreeG[string]{}
		for id, a := range s.Accounts {
			for m := range a.Positions {
				s.holdersOf(m).Set(id)
			}
		}
	}
	return s.holders[mkt]
}

// holdersOf returns market mkt's set, made empty when it has none.
func (s *State) holdersOf(mkt string) *btree.BTreeG[string] {
	set := s.holders[mkt]
	if set == nil {
		set = btree.NewBTreeGOptions(func(a, b string) bool { return a < b }, btree.Options{NoLocks: true})
		s.holders[mkt] = set
	}
	return set
}

// noteHolder records that accountID now holds (or no longer holds) a
// position in mkt. Before the sets are built there is nothing to keep:
// the build reads the accounts as they are then.
func (s *State) noteHolder(accountID, mkt string, holds bool) {
	if s.holders == nil {
		return
	}
	if holds {
		s.holdersOf(mkt).Set(accountID)
	} else if set := s.holders[mkt]; set != nil {
		set.Delete(accountID)
	}
}

// marketHolders returns the ids of the accounts holding a position in mkt,
// ascending (sort.Strings order), as a copy the caller may keep while
// positions change.
func (s *State) marketHolders(mkt string) []string {
	set := s.holderSet(mkt)
	if set == nil || set.Len() == 0 {
		return nil
	}
	ids := make([]string, 0, set.Len())
	set.Scan(func(id string) bool {
		ids = append(ids, id)
		return true
	})
	return ids
}

// checkHolders verifies that the holder sets list exactly the accounts'
// positions (for CheckInvariants).
func (s *State) checkHolders() error {
	s.holderSet("")
	n := 0
	for id, a := range s.Accounts {
		for m := range a.Positions {
			n++
			if set := s.holders[m]; set == nil {
				return fmt.Errorf("position %s/%s: its market has no holder set", id, m)
			} else if _, ok := set.Get(id); !ok {
				return fmt.Errorf("position %s/%s: not in its market's holder set", id, m)
			}
		}
	}
	held := 0
	for _, set := range s.holders {
		held += set.Len()
	}
	if held != n {
		return fmt.Errorf("holder sets list %d positions, the accounts hold %d", held, n)
	}
	return nil
}
