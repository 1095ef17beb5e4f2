package fsm

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/internal/par"
)

// The two walks of BuildPoR over every ledger balance and every open
// position. A Go map is walked on one goroutine only, so each walk copies
// what it visits into slices (cheap: sequential reads of the map's own
// memory) and does the costly part, a lookup in another map or a 128-bit
// PnL per item, on every core through par.For. Every figure a chunk
// produces is a sum (exact, or int64 with wraparound, as the serial walk
// kept it: both are the same whatever the order of the terms) or a
// problem (BuildPoR sorts them), so the result does not depend on how the
// chunks fall: TestBuildPoRIsTheSameOnAnyNumberOfCores holds the bytes.

// porScanGrain is the least number of ledger balances or trade accounts
// worth a core of their own (a map lookup or a PnL each, a few hundred ns
// when the map is far larger than the cache).
const porScanGrain = 8192

// porLedger is what the ledger walk finds.
type porLedger struct {
	// perAccount is the sum of each account's ledger balances, keyed by
	// the account's record, not its id: a pointer hashes and compares
	// without reading the id's bytes.
	perAccount map[*access.Account]int64
	// hedgeBacking is the USDx side's sats (the hedge account's and the
	// stakers' escrow), venueOwn the venue's own, payables the referral
	// and promoter payables (attributed earner by earner), sum every
	// balance (int64, wrapping).
	hedgeBacking, venueOwn, payables, sum int64
	// overflow: the sum does not fit int64 (exactly from
	// LevelPoRSumExact; below it, a partial sum in the map walk's order
	// did not).
	overflow bool
	problems []string
}

// scanPoRLedger classifies every ledger balance: an account's part, the
// USDx side's backing, the payables, or the venue's own.
func scanPoRLedger(st *State, exact bool) porLedger {
	n := len(st.Ledger.Balances)
	names := make([]string, 0, n)
	vals := make([]int64, 0, n)
	for k, v := range st.Ledger.Balances {
		names = append(names, k)
		vals = append(vals, v)
	}
	owners := make([]*access.Account, n)
	var out porLedger
	// The exact sum in 128 bits (hi:lo), so whether it fits 64 does not
	// depend on the order of the map walk (from LevelPoRSumExact).
	var sumHi int64
	var sumLo uint64
	var mu sync.Mutex
	par.For(n, porScanGrain, func(lo, hi int) {
		var part porLedger
		var pHi int64
		var pLo uint64
		for i := lo; i < hi; i++ {
			k, v := names[i], vals[i]
			if v < 0 && k != ledger.House {
				part.problems = append(part.problems, fmt.Sprintf("ledger account %s is negative (%d)", publicName(k), v))
			}
			var carry uint64
			pLo, carry = bits.Add64(pLo, uint64(v), 0)
			pHi += int64(carry) + v>>63
			part.sum += v
			switch {
			case strings.HasPrefix(k, "acct:"):
				id := k[len("acct:"):]
				if i := strings.IndexByte(id, ':'); i >= 0 {
					id = id[:i]
				}
				if id == usdx.HedgeAccount {
					part.hedgeBacking += v
				} else if a := st.Access.Accounts[id]; a != nil {
					owners[i] = a
				} else {
					part.problems = append(part.problems, "a trader ledger account belongs to no account")
				}
			case k == usdx.YieldEscrow:
				part.hedgeBacking += v // the stakers' sats, not the venue's
			case k == ledger.PendingWithdrawals:
				// Attributed by BuildPoR, withdrawal by withdrawal.
			case k == growth.ReferralPayable || k == growth.PromoterPayable:
				part.payables += v // attributed by BuildPoR, earner by earner
			default:
				part.venueOwn += v
			}
		}
		mu.Lock()
		defer mu.Unlock()
		var carry uint64
		sumLo, carry = bits.Add64(sumLo, pLo, 0)
		sumHi += pHi + int64(carry)
		out.sum += part.sum
		out.hedgeBacking += part.hedgeBacking
		out.payables += part.payables
		out.venueOwn += part.venueOwn
		out.problems = append(out.problems, part.problems...)
	})
	if exact {
		out.overflow = sumHi != int64(sumLo)>>63 // the sum does not fit 64 bits
	} else {
		// The running sum checked at each step, in the map walk's order
		// (names holds it), as before LevelPoRSumExact.
		var sum int64
		for _, v := range vals {
			if (v > 0 && sum > math.MaxInt64-v) || (v < 0 && sum < math.MinInt64-v) {
				out.overflow = true
			}
			sum += v
		}
	}
	out.perAccount = make(map[*access.Account]int64, len(st.Access.Accounts))
	for i, a := range owners {
		if a != nil {
			out.perAccount[a] += vals[i]
		}
	}
	return out
}

// tradersPnLAtMark is Σ over every trader's position (the USDx hedge's
// left out: its backing is counted on its own) of max(PnL at the market's
// last mid, -margin): what closing them all at the mid would add to what
// the venue owes, a loss counting only down to the position's margin (the
// rest is a deficit the insurance fund meets, not money the venue
// holds). A market without a print counts nothing. The sum is exact, so
// neither the map walk's order nor the chunks matter; ok is false when it
// does not fit int64 or a PnL overflows.
func tradersPnLAtMark(st *State) (total int64, ok bool) {
	accounts := make([]*trade.Account, 0, len(st.Trade.Accounts))
	for id, a := range st.Trade.Accounts {
		if id != usdx.HedgeAccount {
			accounts = append(accounts, a)
		}
	}
	// The markets' last mids, read once: markets are few.
	type mark struct {
		params *market.Params
		midQ8  int64
	}
	marks := make(map[string]mark, len(st.Market.MarketsByID))
	for mid, m := range st.Market.MarketsByID {
		if pr, printed := st.Market.LastPrint(mid); m != nil && printed {
			marks[mid] = mark{&m.Params, pr.MidQ8}
		}
	}
	var hi int64
	var lo uint64
	failed := false
	var mu sync.Mutex
	par.For(len(accounts), porScanGrain, func(from, to int) {
		var pHi int64
		var pLo uint64
		bad := false
		for _, a := range accounts[from:to] {
			for mid, pos := range a.Positions {
				if pos.Contracts == 0 {
					continue
				}
				mk, found := marks[mid]
				if !found {
					continue
				}
				pnl, err := trade.PnLMsat(mk.params, pos.Side, pos.Contracts, pos.EntryQ8, mk.midQ8)
				if err != nil {
					bad = true
					break
				}
				pnl = max(pnl, -pos.MarginMsat)
				var carry uint64
				pLo, carry = bits.Add64(pLo, uint64(pnl), 0)
				pHi += int64(carry) + pnl>>63
			}
			if bad {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		var carry uint64
		lo, carry = bits.Add64(lo, pLo, 0)
		hi += pHi + int64(carry)
		failed = failed || bad
	})
	if failed || hi != int64(lo)>>63 {
		return 0, false
	}
	return int64(lo), true
}
