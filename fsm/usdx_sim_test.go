package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
)

// TestUSDxSimulationKeepsTheIdentityAndConservation drives mints,
// redemptions (some queued on a stale oracle), stakes, unstakes, USDx
// withdrawals, their payment and tokens deposited back, organic trading that swings the skew (so
// funding runs both ways), operator halts and parameter changes, over a
// long random price path with jumps and time gaps that cross many funding
// boundaries. After every entry the machine checks the ledger's
// conservation, the trading book's invariants and USDx's own: supply ==
// hedge contracts (the backing identity), supply == held + pending +
// staked + in flight + outside, sUSDx supply == held + cooling, and the
// reserve and escrow ledger accounts == the state. A second replica fed
// the same bytes must answer the same and hash the same.
func TestUSDxSimulationKeepsTheIdentityAndConservation(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	entries := 3000
	if testing.Short() {
		entries = 800
	}
	rng := rand.New(rand.NewPCG(13, 14))
	w := newUSDxWorld(t)
	w.mirror = newMarketMirror(t)
	w.syncMirror()
	w.hashEvery = 200
	w.keepLog = true
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(2_000_000), ReserveFloorQ9: i64(500_000), UnstakeCooldownMs: i64(2 * 3_600_000)})

	type acct struct{ a, k string }
	var accts []acct
	for i := 0; i < 12; i++ {
		a, k := w.account(5 * btcBTC)
		if i >= 8 {
			a, k = w.account(60 * btcBTC)
		}
		accts = append(accts, acct{a, k})
	}
	traders := accts[8:]
	mid := usdQ8(100_000)
	outcomes := map[string]int{}
	var wids []string
	for i := 0; i < entries; i++ {
		ac := accts[rng.IntN(8)]
		n := rng.Int64N(20_000) + 1
		var res *Result
		kind := ""
		switch op := rng.IntN(100); {
		case op < 25:
			kind = "print"
			step := mid / 500
			if rng.IntN(30) == 0 {
				step = mid / 15
			}
			mid += rng.Int64N(2*step+1) - step
			mid = min(max(mid, usdQ8(40_000)), usdQ8(250_000))
			mid -= mid % 50_000_000
			if rng.IntN(15) == 0 {
				w.walkTo(w.ts + 90_000) // the oracle goes stale for a while
			}
			res = w.print("BTCUSD", mid)
		case op < 30:
			kind = "time"
			w.walkPrinting(w.ts+rng.Int64N(20*60_000), mid)
			res = w.print("BTCUSD", mid)
		case op < 45:
			kind = "mint"
			res, q := w.quote(ac.a, ac.k, usdx.SideMint, n)
			if res.OK() {
				if rng.IntN(5) == 0 {
					w.ts += rng.Int64N(40_000)
				}
				res, _ = w.mint(ac.a, ac.k, q.QuoteID)
			}
			outcomes[kind+" "+res.Code+fmt.Sprint(res.Status)]++
			continue
		case op < 57:
			kind = "redeem"
			h := w.holder(ac.a)
			res = w.cmd(ac.a, ac.k, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("r"), Amount: min(n, h.Usdx+1)}, "")
		case op < 67:
			kind = "stake"
			res = w.cmd(ac.a, ac.k, CmdUSDxStake, USDxAmountPayload{Amount: min(n, w.holder(ac.a).Usdx)}, "")
		case op < 74:
			kind = "unstake"
			res = w.cmd(ac.a, ac.k, CmdUSDxUnstake, USDxAmountPayload{Amount: min(n, w.holder(ac.a).Susdx)}, "")
		case op < 79:
			kind = "withdraw"
			res = w.simWithdraw(ac.a, ac.k, n, &wids)
		case op < 83:
			kind = "paid"
			if res = w.simPaid(&wids); res == nil {
				continue
			}
		case op < 86:
			kind = "deposit"
			if res = w.simDeposit(ac.a, n); res == nil {
				continue
			}
		case op < 95:
			kind = "trade"
			tr := traders[rng.IntN(len(traders))]
			// Phases of 400 entries buy, then sell, so funding
			// runs both ways.
			side := "buy"
			if (i/400)%2 == 1 {
				side = "sell"
			}
			res = w.order(tr.a, tr.k, levered(mktOrder(w.id("o"), "BTC-PERP", side, rng.Int64N(900_000)+1), 10))
		case op < 97:
			kind = "halt"
			res = w.op(CmdUSDxHalt, USDxHaltPayload{Halt: rng.IntN(4) == 0, Reason: "sim"})
		default:
			kind = "params"
			// Now and then the floor is the whole value, so the reserve
			// gives nothing and a loss reaches the stakers.
			floor := rng.Int64N(1_000_000)
			if rng.IntN(2) == 0 {
				floor = 1_000_000_000
			}
			res = w.op(CmdUSDxParams, USDxParamsPayload{ReserveFloorQ9: i64(floor), ReserveTargetQ9: i64(max(floor, 1_000_000+rng.Int64N(5_000_000)))})
		}
		outcomes[kind+" "+res.Code+fmt.Sprint(res.Status)]++
		w.m.Read(func(st *State, _ uint64) {
			if snap := BuildPoR(st); len(snap.Problems) > 0 || !snap.Consolidated {
				t.Fatalf("entry %d (%s): PoR problems %v vault %+v", i, kind, snap.Problems, snap.Vault)
			}
		})
	}
	st := w.st()
	if len(st.u.History) < 5 {
		t.Fatalf("weak run: %d funding boundaries", len(st.u.History))
	}
	pos, neg, marked, minted := waterfallCounts(st.u.History)
	t.Logf("supply %d staked %d susdx %d reserve %d; boundaries %d (+%d -%d, %d yield mints, %d markdowns); outcomes %v",
		st.u.Supply, st.u.Staked, st.u.SusdxSupply, st.u.ReserveMsat, len(st.u.History), pos, neg, minted, marked, outcomes)
	if (pos == 0 || neg == 0 || marked == 0 || minted == 0) && !testing.Short() { // -short runs too few boundaries
		t.Fatalf("weak run: funding +%d -%d, %d yield mints, %d markdowns", pos, neg, minted, marked)
	}
	for _, must := range []string{"mint 201", "redeem 201", "stake 201", "unstake 201", "withdraw 201", "paid 200", "deposit 200"} {
		if outcomes[must] == 0 {
			t.Fatalf("weak run: no %q (%v)", must, outcomes)
		}
	}
	if w.hash() != w.mirror.hash() {
		t.Fatal("replicas' state hashes differ")
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
	// Replayed in other batchings and restored along the way, the log
	// applies alike (determinism_test.go).
	log := append(genesisLog(t), w.log...)
	compareRuns(t, log, 13, len(log)/6)
}

// walkPrinting moves log time to tsMs like walkTo, with a print of mid 2 s
// before every funding boundary it crosses: the oracle prints every
// second in a running cluster, so boundaries see a fresh print (the hedge
// mints no yield on a stale one).
func (w *tradeWorld) walkPrinting(tsMs, mid int64) {
	w.t.Helper()
	for w.ts < tsMs {
		b := (w.ts/3_600_000 + 1) * 3_600_000
		if b >= tsMs {
			w.walkTo(tsMs)
			return
		}
		if w.ts < b-2000 {
			w.walkTo(b - 2000)
			wantOK(w.t, w.print("BTCUSD", mid))
		}
		w.walkTo(min(b+1000, tsMs))
	}
}

// waterfallCounts counts the boundaries of history whose flow was positive
// and negative, and those that marked shares down or minted yield: a
// simulation asserts it crossed each kind.
func waterfallCounts(history []usdx.Waterfall) (pos, neg, marked, minted int) {
	for _, wf := range history {
		switch {
		case wf.FlowMsat > 0:
			pos++
		case wf.FlowMsat < 0:
			neg++
		}
		if wf.Markdown > 0 {
			marked++
		}
		if wf.YieldMinted > 0 {
			minted++
		}
	}
	return pos, neg, marked, minted
}

// simWithdraw requests a USDx withdrawal of up to n of a's USDx and queues
// its id in wids when it is accepted (the simulations' custody worker).
func (w *usdxWorld) simWithdraw(a, k string, n int64, wids *[]string) *Result {
	id := w.id("wd")
	res := w.cmd(a, k, CmdUSDxWithdraw, USDxWithdrawPayload{ID: id, Usdx: min(n, w.holder(a).Usdx), SparkAddress: "sprt1sim" + a[4:]}, "")
	if res.OK() {
		*wids = append(*wids, id)
	}
	return res
}

// simPaid reports the oldest queued withdrawal paid, or returns nil when
// none is queued.
func (w *usdxWorld) simPaid(wids *[]string) *Result {
	if len(*wids) == 0 {
		return nil
	}
	id := (*wids)[0]
	*wids = (*wids)[1:]
	return w.op(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: id, IssuerRef: "iss-" + id})
}

// simDeposit credits a with up to n of the USDx outside custody, or
// returns nil when none is outside.
func (w *usdxWorld) simDeposit(a string, n int64) *Result {
	out := w.st().u.Outside
	if out == 0 {
		return nil
	}
	return w.op(CmdUSDxDeposited, USDxDepositedPayload{AccountID: a, Usdx: min(n, out), IssuerRef: w.id("dep")})
}
