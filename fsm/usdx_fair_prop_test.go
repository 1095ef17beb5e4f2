package fsm

import (
	"fmt"
	mbig "math/big"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
)

// poolMark is the staking pool's figures at one moment.
type poolMark struct {
	staked, escrowMsat, supply int64
	waterfalls                 int
}

func (w *usdxWorld) poolMark() poolMark {
	st := w.st().u
	return poolMark{st.Staked, st.YieldEscrowMsat, st.SusdxSupply, len(st.History)}
}

// perShareQ is what one sUSDx holds, in USDx, at markQ8: (staked + escrow
// x mark / 1e19) / supply, exactly.
func (p poolMark) perShareQ(markQ8 int64) *mbig.Rat {
	v := new(mbig.Rat).SetFrac(new(mbig.Int).Mul(mbig.NewInt(p.escrowMsat), mbig.NewInt(markQ8)), new(mbig.Int).SetUint64(10_000_000_000_000_000_000))
	v.Add(v, new(mbig.Rat).SetInt64(p.staked))
	return v.Quo(v, new(mbig.Rat).SetInt64(p.supply))
}

// fairProp drives seeded mixed mints, redemptions, stakes, unstakes,
// price moves and time over many accounts (the machine checks the
// ledger's conservation, the backing identity and USDx's own conservation
// after every entry) and checks, op by op, that every rounding goes
// against the one who acts:
//
//   - a mint pays at least its USDx's value at the mark, a redemption paid
//     at once receives at most it;
//   - without a stake or a boundary neither a share's staked USDx nor its
//     escrow falls (releases round both down);
//   - no op but a funding boundary lowers what a share holds (the pool's
//     staked USDx and escrow at the mark, per sUSDx) for the holders who
//     were in before it, beyond the rounding SPEC's share formula allows
//     a stake (floor(usdx x 1e9 / served price), the price itself rounded
//     down: less than one q9 per share issued, plus one q9 for the escrow's
//     value rounded down);
//
// and returns each account's USDx ledger: minted, redeemed, staked (what
// the stakes took), stakes and releases.
func fairProp(t *testing.T, w *usdxWorld, rng *rand.Rand, accts [][2]string, entries int, mid *int64, priceMoves bool, moveOK func(i int) bool, organic func(i int) *Result) (outcomes map[string]int, worstLossQ *mbig.Rat) {
	t.Helper()
	outcomes = map[string]int{}
	worstLossQ = new(mbig.Rat)
	for i := 0; i < entries; i++ {
		ac := accts[rng.IntN(len(accts))]
		a, k := ac[0], ac[1]
		n := rng.Int64N(5_000) + 1
		if rng.IntN(4) == 0 {
			n = rng.Int64N(5) + 1 // small amounts: where rounding shows
		}
		before := w.poolMark()
		sharesIssued := int64(0)
		kind := ""
		var res *Result
		switch op := rng.IntN(100); {
		case op < 15:
			kind = "print"
			if !moveOK(i) {
				continue
			}
			if step := *mid / 300; priceMoves {
				*mid += rng.Int64N(2*step+1) - step
			}
			*mid = min(max(*mid, usdQ8(40_000)), usdQ8(250_000))
			*mid -= *mid % 50_000_000
			res = w.print("BTCUSD", *mid)
		case op < 22:
			kind = "time"
			if !moveOK(i) {
				continue
			}
			w.walkPrinting(w.ts+rng.Int64N(40_000), *mid)
			res = w.print("BTCUSD", *mid)
		case op < 40:
			kind = "mint"
			q := n
			r, qv := w.quote(a, k, usdx.SideMint, q)
			res = r
			if r.OK() {
				free0 := w.balance(ledger.Free(a))
				res, _ = w.mint(a, k, qv.QuoteID)
				if res.Status == http.StatusCreated {
					paid := free0 - w.balance(ledger.Free(a))
					// paid x mark >= q x 1e19: at least the dollars' value.
					if new(mbig.Int).Mul(mbig.NewInt(paid), mbig.NewInt(*mid)).Cmp(new(mbig.Int).Mul(mbig.NewInt(q), new(mbig.Int).SetUint64(10_000_000_000_000_000_000))) < 0 {
						t.Fatalf("entry %d: a mint of %d USDx at %d paid %d msat, less than their value", i, q, *mid, paid)
					}
				}
			}
		case op < 55:
			kind = "redeem"
			q := min(n, w.holder(a).Usdx)
			if q < 1 {
				continue
			}
			free0 := w.balance(ledger.Free(a))
			res = w.cmd(a, k, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("r"), Amount: q}, "")
			var sg usdx.SagaView
			if res.Status == http.StatusCreated && res.Decode(&sg) == nil && sg.State == usdx.SagaPaid {
				got := w.balance(ledger.Free(a)) - free0
				if new(mbig.Int).Mul(mbig.NewInt(got), mbig.NewInt(*mid)).Cmp(new(mbig.Int).Mul(mbig.NewInt(q), new(mbig.Int).SetUint64(10_000_000_000_000_000_000))) > 0 {
					t.Fatalf("entry %d: a redemption of %d USDx at %d received %d msat, more than their value", i, q, *mid, got)
				}
			}
		case op < 75:
			kind = "stake"
			q := min(n, w.holder(a).Usdx)
			if q < 1 {
				continue
			}
			res = w.cmd(a, k, CmdUSDxStake, USDxAmountPayload{Amount: q}, "")
			var sr usdx.StakeResult
			if res.Status == http.StatusCreated && res.Decode(&sr) == nil {
				fmt.Sscan(sr.Susdx, &sharesIssued)
			}
		case op < 92:
			kind = "unstake"
			q := min(n, w.holder(a).Susdx)
			if rng.IntN(3) == 0 {
				q = w.holder(a).Susdx // all of it: the last holder takes the rest
			}
			if q < 1 {
				continue
			}
			res = w.cmd(a, k, CmdUSDxUnstake, USDxAmountPayload{Amount: q}, "")
		default:
			kind = "organic"
			if res = organic(i); res == nil {
				continue
			}
		}
		outcomes[kind+" "+fmt.Sprint(res.Status)]++
		after := w.poolMark()
		if after.waterfalls != before.waterfalls || before.supply == 0 || after.supply == 0 {
			continue // a boundary's yield or markdown; an empty pool holds nothing
		}
		outcomes["checked"]++
		if sharesIssued == 0 {
			// Without a stake only releases move the pool: each takes its
			// part of the staked USDx and of the escrow rounded down, so
			// neither part of a share falls.
			ratio := func(x, n int64) *mbig.Rat { return mbig.NewRat(x, n) }
			if ratio(after.staked, after.supply).Cmp(ratio(before.staked, before.supply)) < 0 ||
				ratio(after.escrowMsat, after.supply).Cmp(ratio(before.escrowMsat, before.supply)) < 0 {
				t.Fatalf("entry %d (%s): a share's staked USDx or escrow fell without a stake or a boundary: pool %+v -> %+v", i, kind, before, after)
			}
		}
		// The holders who were in before: after's supply less the shares
		// this op issued. What they lost, at the mark now, in USDx.
		v0, v1 := before.perShareQ(*mid), after.perShareQ(*mid)
		if v1.Cmp(v0) >= 0 {
			continue
		}
		loss := new(mbig.Rat).Sub(v0, v1)
		loss.Mul(loss, new(mbig.Rat).SetInt64(after.supply-sharesIssued))
		bound := new(mbig.Rat).SetFrac64(sharesIssued+1, 1_000_000_000)
		if loss.Cmp(bound) > 0 {
			t.Fatalf("entry %d (%s, %d sUSDx issued): the holders in before lost %s USDx, beyond the rounding bound %s; pool %+v -> %+v",
				i, kind, sharesIssued, loss.FloatString(12), bound.FloatString(12), before, after)
		}
		if r := new(mbig.Rat).Quo(loss, bound); r.Cmp(worstLossQ) > 0 {
			worstLossQ = r
		}
	}
	return outcomes, worstLossQ
}

// TestUSDxRoundTripsGainNothing: within one funding interval (no yield,
// no markdown: the pool is a pure share vault), seeded runs of mixed
// mints, redemptions, stakes, unstakes (cooldown 20 s) and price moves
// over eight accounts. On top of fairProp's checks, once everyone has
// left the pool, no account got back more from the pool than it staked,
// beyond the remainders the others' releases and stakes left in it (less
// than one USDx and one msat each). Two pools: a fresh one (the price is
// exactly 1e9 until someone's remainder moves it), and one priced off 1e9
// by an earlier boundary's yield, whose holder stays in (the mark then
// stays put: the escrow's sats would make a staker's gain a price bet).
func TestUSDxRoundTripsGainNothing(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		for _, priced := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d/priced=%v", seed, priced), func(t *testing.T) {
				roundTrips(t, seed, priced)
			})
		}
	}
}

func roundTrips(t *testing.T, seed uint64, priced bool) {
	rng := rand.New(rand.NewPCG(seed, 77))
	w := newUSDxWorld(t)
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(0), ReserveFloorQ9: i64(0), UnstakeCooldownMs: i64(20_000)})
	mid := usdQ8(100_000)
	if priced {
		// A house stake earns a boundary's yield (organic longs pay the
		// hedge), then the longs close: no accrual in the run.
		h, hk := w.account(20 * btcBTC)
		w.mintN(h, hk, 77_777)
		w.stakeFor(h, hk, 77_777)
		l, lk := w.account(20 * btcBTC)
		wantOK(t, w.order(l, lk, mktOrder("long1", "BTC-PERP", "buy", 900_000)))
		if wf := w.nextBoundary(); wf.YieldMinted < 1 {
			t.Fatalf("no yield: %+v", wf)
		}
		wantOK(t, w.order(l, lk, mktOrder("long1x", "BTC-PERP", "sell", 900_000)))
		if p := w.public().Staking.SharePriceQ9; p <= 1_000_000_000 {
			t.Fatalf("share price %d", p)
		}
	}
	// Start just after a boundary: the run ends before the next.
	w.walkPrinting((w.ts/3_600_000+1)*3_600_000+1_000, mid)
	wantOK(t, w.print("BTCUSD", mid))
	start, waterfalls := w.ts, len(w.st().u.History)
	end := start + 3_300_000
	var accts [][2]string
	for i := 0; i < 8; i++ {
		a, k := w.account(2 * btcBTC)
		accts = append(accts, [2]string{a, k})
	}
	outcomes, worst := fairProp(t, w, rng, accts, 1500, &mid, !priced,
		func(int) bool { return w.ts < end-60_000 },
		func(int) *Result { return nil })
	// Everyone leaves: unstake all, let the cooldowns end.
	for _, ac := range accts {
		if s := w.holder(ac[0]).Susdx; s > 0 {
			wantOK(t, w.cmd(ac[0], ac[1], CmdUSDxUnstake, USDxAmountPayload{Amount: s}, ""))
		}
	}
	w.walkPrinting(w.ts+30_000, mid)
	wantOK(t, w.print("BTCUSD", mid))
	st := w.st().u
	if len(st.History) != waterfalls || len(st.Cooling) != 0 {
		t.Fatalf("a boundary crossed (%d -> %d) or unstakes still cooling (%d)", waterfalls, len(st.History), len(st.Cooling))
	}
	// Each account's pool ledger from its activity: stakes took Usdx,
	// releases gave Usdx and SatsMsat of the escrow.
	type led struct{ staked, released, stakes, releases, escrowMsat int64 }
	leds := map[string]*led{}
	var total led
	w.m.Read(func(s *State, _ uint64) {
		for _, ac := range accts {
			l := &led{}
			for _, a := range s.USDx.Holder(ac[0]).Activity {
				switch a.Event {
				case "stake":
					l.staked += a.Usdx
					l.stakes++
				case "unstake_release":
					l.released += a.Usdx
					l.releases++
					l.escrowMsat += a.SatsMsat
				}
			}
			leds[ac[0]] = l
			total.staked += l.staked
			total.released += l.released
			total.stakes += l.stakes
			total.releases += l.releases
			total.escrowMsat += l.escrowMsat
		}
	})
	if !priced && (total.released != total.staked || total.escrowMsat != 0 || st.Staked != 0) {
		t.Fatalf("the pool gave back %d USDx and %d msat for %d staked, and holds %d", total.released, total.escrowMsat, total.staked, st.Staked)
	}
	// In msat at the mark (fixed when priced): one USDx is 1e19 / mark.
	usd := usdx.ValueMsat(1, mid)
	maxGain := int64(0)
	for _, ac := range accts {
		l := leds[ac[0]]
		gain := (l.released-l.staked)*usd + l.escrowMsat
		maxGain = max(maxGain, gain)
		// The remainders the others left: under one USDx (and one msat
		// of escrow) per release, under one USDx per stake.
		if allowed := ((total.stakes - l.stakes) + (total.releases - l.releases)) * (usd + 1); gain > allowed {
			t.Fatalf("%s staked %d USDx and got back %d and %d msat: a gain of %d msat beyond the %d the others' remainders allow",
				ac[0], l.staked, l.released, l.escrowMsat, gain, allowed)
		}
	}
	t.Logf("seed %d priced %v: %d stakes, %d releases, %d USDx through the pool; largest account gain %d msat; worst holder loss / rounding bound %s; ops %v",
		seed, priced, total.stakes, total.releases, total.staked, maxGain, worst.FloatString(3), outcomes)
	for _, must := range []string{"mint 201", "redeem 201", "stake 201", "unstake 201", "print 200"} {
		if outcomes[must] == 0 {
			t.Fatalf("weak run: no %q (%v)", must, outcomes)
		}
	}
}

// TestUSDxPoolRoundingFavoursHoldersAcrossFunding: fairProp's checks over
// many funding boundaries, with organic trading that swings the skew so
// the hedge receives (yield minted into the pool, the escrow between) and
// pays (the reserve held at its floor now and then, so markdowns reach
// the pool): between boundaries no op lowers what the holders in before
// it hold, beyond a stake's rounding bound.
func TestUSDxPoolRoundingFavoursHoldersAcrossFunding(t *testing.T) {
	entries := 2500
	if testing.Short() {
		entries = 700
	}
	rng := rand.New(rand.NewPCG(29, 31))
	w := newUSDxWorld(t)
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(2_000_000), ReserveFloorQ9: i64(500_000), UnstakeCooldownMs: i64(45 * 60_000)})
	var accts [][2]string
	for i := 0; i < 8; i++ {
		a, k := w.account(3 * btcBTC)
		accts = append(accts, [2]string{a, k})
	}
	var traders [][2]string
	for i := 0; i < 3; i++ {
		a, k := w.account(60 * btcBTC)
		traders = append(traders, [2]string{a, k})
	}
	mid := usdQ8(100_000)
	outcomes, worst := fairProp(t, w, rng, accts, entries, &mid, true,
		func(int) bool { return true },
		func(i int) *Result {
			switch rng.IntN(6) {
			case 0:
				// The reserve's floor at the whole value or back: a loss
				// reaches the stakers.
				floor := int64(500_000)
				if rng.IntN(2) == 0 {
					floor = 1_000_000_000
				}
				return w.op(CmdUSDxParams, USDxParamsPayload{ReserveFloorQ9: i64(floor), ReserveTargetQ9: i64(max(floor, 2_000_000))})
			case 1:
				// A boundary.
				w.walkPrinting((w.ts/3_600_000+1)*3_600_000+1_000, mid)
				return w.print("BTCUSD", mid)
			}
			// Phases of 400 entries buy, then sell harder, so the skew
			// (and funding) swings both ways.
			tr := traders[rng.IntN(len(traders))]
			side, size := "buy", rng.Int64N(300_000)+1
			if (i/400)%2 == 1 {
				side, size = "sell", rng.Int64N(900_000)+1
			}
			return w.order(tr[0], tr[1], levered(mktOrder(w.id("o"), "BTC-PERP", side, size), 10))
		})
	st := w.st().u
	pos, neg, marked, minted := waterfallCounts(st.History)
	t.Logf("boundaries %d (+%d -%d, %d yield mints, %d markdowns); staked %d, sUSDx %d, escrow %d; worst holder loss / rounding bound %s; ops %v",
		len(st.History), pos, neg, minted, marked, st.Staked, st.SusdxSupply, st.YieldEscrowMsat, worst.FloatString(3), outcomes)
	if !testing.Short() && (pos == 0 || neg == 0 || minted == 0) {
		t.Fatalf("weak run: funding +%d -%d, %d yield mints, %d markdowns", pos, neg, minted, marked)
	}
}
