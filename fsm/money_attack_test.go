package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
)

// equity of an account: free + reserved + margins in every market.
func (w *tradeWorld) equityOf(acct string) (e int64) {
	w.m.Read(func(st *State, _ uint64) {
		for name, b := range st.Ledger.Balances {
			if name == ledger.Free(acct) || name == ledger.Reserved(acct) ||
				len(name) > len(ledger.Margin(acct, "")) && name[:len(ledger.Margin(acct, ""))] == ledger.Margin(acct, "") {
				e += b
			}
		}
	})
	return e
}

// A hedged pair (A long what B is short, always) with B self-referred to
// A's code: whatever the sequence of adds, partial closes, flips, resting
// limits and funding boundaries, with no liquidation, the pair (plus
// A's referral rewards) must end below what it deposited.
func TestHedgedSelfReferredPairNeverGains(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			w := newTradeWorld(t)
			a, ak := w.account(btcBTC * 10)
			b, bk := w.account(btcBTC * 10)
			wantOK(t, w.createCode(a, ak, "SELFREF1"))
			wantOK(t, w.bind(b, bk, "SELFREF1"))
			mkts := []string{"BTC-PERP", "ETH-PERP"}
			feeds := map[string]string{"BTC-PERP": "BTCUSD", "ETH-PERP": "ETHUSD"}
			mids := map[string]int64{"BTC-PERP": usdQ8(100_000), "ETH-PERP": usdQ8(3_400)}
			for i := 0; i < 400; i++ {
				mkt := mkts[rng.IntN(2)]
				switch op := rng.IntN(10); {
				case op < 6:
					side, other := "buy", "sell"
					if rng.IntN(2) == 0 {
						side, other = other, side
					}
					n := rng.Int64N(2000) + 1
					if rng.IntN(3) == 0 {
						n = rng.Int64N(3) + 1
					}
					lev := rng.Int64N(5) + 1
					r1 := w.order(a, ak, levered(mktOrder(fmt.Sprint("a", i), mkt, side, n), lev))
					if r1.OK() {
						wantOK(t, w.order(b, bk, levered(mktOrder(fmt.Sprint("b", i), mkt, other, n), lev)))
					}
				case op < 8:
					m := mids[mkt]
					m += (rng.Int64N(401) - 200) * m / 100_000
					mids[mkt] = m
					wantOK(t, w.print(feeds[mkt], m))
				default:
					w.walkTo(w.ts + rng.Int64N(2*3_600_000))
					for _, mk := range mkts {
						wantOK(t, w.print(feeds[mk], mids[mk]))
					}
				}
			}
			// close everything
			for _, mk := range mkts {
				for _, x := range []struct{ id, key string }{{a, ak}, {b, bk}} {
					p := w.position(x.id, mk)
					if p.Contracts == 0 {
						continue
					}
					side := "sell"
					if p.Side == trade.Short {
						side = "buy"
					}
					wantOK(t, w.order(x.id, x.key, mktOrder("close"+x.id+mk, mk, side, p.Contracts)))
				}
			}
			var liq int
			for _, x := range []string{a, b} {
				liq += len(w.liquidations(x).Liquidations)
			}
			pending := w.balance(growth.ReferralPayable)
			total := w.equityOf(a) + w.equityOf(b) + pending
			t.Logf("liquidations %d; pair equity+payable %d of %d deposited: %+d msat", liq, total, 20*btcBTC, total-20*btcBTC)
			if liq == 0 && total >= 20*btcBTC {
				t.Fatalf("hedged pair gained %d msat", total-20*btcBTC)
			}
		})
	}
}

// valueAtMid is an account's equity with every position closed at the mid
// exactly (PnL floored), no spread or fee.
func (w *tradeWorld) valueAtMid(acct string, mids map[string]int64) int64 {
	v := w.equityOf(acct)
	w.m.Read(func(st *State, _ uint64) {
		a := st.Trade.Accounts[acct]
		if a == nil {
			return
		}
		for mk, p := range a.Positions {
			pnl, err := trade.PnLMsat(&st.Market.MarketsByID[mk].Params, p.Side, p.Contracts, p.EntryQ8, mids[mk])
			if err != nil {
				panic(err)
			}
			v += pnl
		}
	})
	return v
}

// At a constant mid, no sequence of one account's orders (tiny and large,
// adds, partial closes, flips, reduce-only, resting limits that fill
// later, leverage) with funding boundaries in between may raise its value
// marked at the mid.
func TestConstantMidNeverRaisesValue(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			w := newTradeWorld(t)
			a, ak := w.account(btcBTC)
			mkts := []string{"BTC-PERP", "ETH-PERP"}
			feeds := map[string]string{"BTC-PERP": "BTCUSD", "ETH-PERP": "ETHUSD"}
			mids := map[string]int64{"BTC-PERP": usdQ8(100_000) + 37_123, "ETH-PERP": usdQ8(3_400) + 1_234_567}
			for _, mk := range mkts {
				wantOK(t, w.print(feeds[mk], mids[mk]))
			}
			prev := w.valueAtMid(a, mids)
			start := prev
			var gains int64
			ok := 0
			for i := 0; i < 500; i++ {
				mk := mkts[rng.IntN(2)]
				side := []string{"buy", "sell"}[rng.IntN(2)]
				n := rng.Int64N(3) + 1
				if rng.IntN(4) == 0 {
					n = rng.Int64N(200_000) + 1
				}
				switch op := rng.IntN(12); {
				case op < 6:
					o := levered(mktOrder(fmt.Sprint("m", i), mk, side, n), rng.Int64N(100)+1)
					o.ReduceOnly = rng.IntN(4) == 0
					if w.order(a, ak, o).OK() {
						ok++
					}
				case op < 9:
					// a limit a little through the mid: fills at once or rests
					lim := mids[mk] / 50_000_000 * 50_000_000
					if mk == "ETH-PERP" {
						lim = mids[mk] / 5_000_000 * 5_000_000
					}
					if w.order(a, ak, limitOrder(fmt.Sprint("l", i), mk, side, n, lim)).OK() {
						ok++
					}
				case op < 10:
					w.walkTo(w.ts + rng.Int64N(3_600_000))
					for _, m2 := range mkts {
						wantOK(t, w.print(feeds[m2], mids[m2]))
					}
				default:
					wantOK(t, w.print(feeds[mk], mids[mk]))
				}
				v := w.valueAtMid(a, mids)
				if v > prev {
					gains += v - prev
					t.Logf("step %d op gained %d msat", i, v-prev)
				}
				prev = v
			}
			t.Logf("%d orders taken; value %d -> %d (%+d msat), summed step gains %d msat", ok, start, prev, prev-start, gains)
			if gains > 0 {
				t.Errorf("value rose by %d msat at a constant mid", gains)
			}
		})
	}
}

// A rail answer repeated or contradicted after a withdrawal closed moves
// nothing: returned twice, paid after returned, returned after paid.
func TestPayoutAnswersMoveMoneyOnce(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(big)
	free0 := w.balance(ledger.Free(acct))
	r := wreq("wd-a", 12_000, 10_000)
	wantOK(t, w.request(acct, key, r))
	wantOK(t, w.result("wd-a", funds.PayoutReturned, "no route"))
	for _, st := range []string{funds.PayoutReturned, funds.PayoutPaid, funds.PayoutPending} {
		if res := w.result("wd-a", st, ""); res.OK() {
			t.Fatalf("%s after returned: %s", st, res.Body)
		}
	}
	r = wreq("wd-b", 12_000, 10_000)
	wantOK(t, w.request(acct, key, r))
	wantOK(t, w.result("wd-b", funds.PayoutPaid, ""))
	for _, st := range []string{funds.PayoutReturned, funds.PayoutPaid} {
		if res := w.result("wd-b", st, ""); res.OK() {
			t.Fatalf("%s after paid: %s", st, res.Body)
		}
	}
	if got := free0 - w.balance(ledger.Free(acct)); got != 22_000 {
		t.Fatalf("account paid %d msat for one paid withdrawal of 12,000 + 10,000 fee", got)
	}
}
