package rail

import (
	"encoding/hex"
	"sync"
)

// SimBook is the simulated payment network's record of payouts, the part
// of a real rail that lives at the provider, not in any one node: a payout
// is executed once per RailRef, and every later Pay with that RailRef, from
// whichever node, reports the first outcome. That is what keeps the Rail
// contract (Pay idempotent by RailRef across leaders) on the simulated rail:
// each node builds its own SimRail, and a new leader's SimRail used to
// remember nothing and pay again.
type SimBook struct {
	mu       sync.Mutex
	outcomes *fifoCache[PayoutResult]
	executed int64
}

// NewSimBook returns an empty book.
func NewSimBook() *SimBook {
	return &SimBook{outcomes: newFIFOCache[PayoutResult](MaxRememberedPayouts)}
}

// pay executes p with simulate unless the book already holds an outcome
// for p.RailRef, which it returns instead.
func (b *SimBook) pay(p Payout, simulate func(Payout) PayoutResult) PayoutResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	if res, ok := b.outcomes.get(p.RailRef); ok {
		return res
	}
	res := simulate(p)
	b.outcomes.put(p.RailRef, res)
	b.executed++
	return res
}

// Executed is how many payouts the simulated network carried out.
func (b *SimBook) Executed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.executed
}

// simNetworks holds one book per rail identity (network and node key) in
// this process: every member of a cluster derives the same node key, so
// the nodes of a cluster run in one process (tests, harnesses) share their
// simulated network without any wiring.
var simNetworks = struct {
	sync.Mutex
	books map[string]*SimBook
}{books: map[string]*SimBook{}}

func sharedSimBook(n Network, pubKey []byte) *SimBook {
	id := string(n) + ":" + hex.EncodeToString(pubKey)
	simNetworks.Lock()
	defer simNetworks.Unlock()
	b := simNetworks.books[id]
	if b == nil {
		b = NewSimBook()
		simNetworks.books[id] = b
	}
	return b
}
