package fsm

import (
	"fmt"
	mbig "math/big"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// hedgeMargin is the hedge position's margin and contracts.
func (w *usdxWorld) hedgeMargin() (marginMsat, contracts int64) {
	w.m.Read(func(st *State, _ uint64) {
		p := st.Trade.Position(usdx.HedgeAccount, usdx.HedgeMarket)
		marginMsat, contracts = p.MarginMsat, p.Contracts
	})
	return marginMsat, contracts
}

// TestRedemptionsTakeTheirShareOfTheHole: the review's hole (negative
// boundaries with an empty reserve, 15,000,000 msat uncovered on 100,000
// USDx). A redemption is paid its contracts' share of the short margin,
// so it carries that share of the hole out. Below
// LevelHoleLeavesWithContracts the uncovered shortfall stayed whole: after
// the whole supply was redeemed it was still 15,000,000 msat with no hedge
// left to receive the funding that repays it, so mints and stakes stayed
// halted for good. From it half the supply redeemed halves the hole, and
// the whole supply closes it.
func TestRedemptionsTakeTheirShareOfTheHole(t *testing.T) {
	for _, level := range []uint32{usdx.LevelHoleLeavesWithContracts - 1, usdx.LevelHoleLeavesWithContracts} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			w.params(USDxParamsPayload{BaseFeeQ9: i64(0)}) // an empty reserve
			a, ka := w.account(20 * btcBTC)
			b, kb := w.account(20 * btcBTC)
			w.mintN(a, ka, 100_000)
			s, sk := w.account(btcBTC)
			wantOK(t, w.order(s, sk, mktOrder("short1", "BTC-PERP", "sell", 500_000)))
			for range 3 {
				w.nextBoundary()
			}
			hole := w.st().u.UncoveredShortfallMsat
			if hole <= 0 {
				t.Fatal("no uncovered shortfall")
			}
			wantOK(t, w.order(s, sk, mktOrder("cover1", "BTC-PERP", "buy", 500_000))) // no more funding either way
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			wantOK(t, w.cmd(a, ka, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("r"), Amount: 50_000}, ""))
			half := w.st().u.UncoveredShortfallMsat
			wantOK(t, w.cmd(a, ka, CmdUSDxRedeem, USDxAmountPayload{ID: w.id("r"), Amount: 50_000}, ""))
			st := w.st()
			res, _ := w.quote(b, kb, usdx.SideMint, 1_000)
			t.Logf("hole %d msat; after half the supply redeemed %d, after all %d (supply %d)", hole, half, st.u.UncoveredShortfallMsat, st.u.Supply)
			if st.u.Supply != 0 || st.hedge != 0 {
				t.Fatalf("supply %d, hedge %d", st.u.Supply, st.hedge)
			}
			if level < usdx.LevelHoleLeavesWithContracts {
				if half != hole || st.u.UncoveredShortfallMsat != hole {
					t.Fatalf("below the level the hole was expected to stay: %d -> %d -> %d", hole, half, st.u.UncoveredShortfallMsat)
				}
				wantRefused(t, res, http.StatusConflict, wire.CodeUSDxMintsHalted)
				return
			}
			if half != hole-hole/2 || st.u.UncoveredShortfallMsat != 0 {
				t.Fatalf("hole %d: %d after half the supply, %d after all of it", hole, half, st.u.UncoveredShortfallMsat)
			}
			wantOK(t, res)
		})
	}
}

// TestMarkdownCountsItsContractsShareOfTheLoss: 20 USDx minted, all
// staked, the reserve held at its floor, and a negative flow of 1,000
// msat, so one staked USDx is burnt. Its contract released its twentieth
// of a margin already short by the loss, so it bore 50 msat of it. Below
// LevelHoleLeavesWithContracts the whole loss was refilled on top: the
// nineteen contracts left held 50 msat more than their 1x margin, taken
// from the stakers' surplus. From it they hold exactly their margin.
func TestMarkdownCountsItsContractsShareOfTheLoss(t *testing.T) {
	for _, level := range []uint32{usdx.LevelHoleLeavesWithContracts - 1, usdx.LevelHoleLeavesWithContracts} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := smallMarkdownWorld(t, level, 20)
			m0, n0 := w.hedgeMargin()
			before := w.st().u
			wf := w.nextBoundary()
			after := w.st().u
			m1, n1 := w.hedgeMargin()
			loss := -wf.FlowMsat
			if wf.Markdown != 1 || n1 != n0-1 || loss <= 0 || wf.FromReserveMsat != 0 || wf.UncoveredMsat != 0 {
				t.Fatalf("want a one-USDx markdown of a small loss: %+v", wf)
			}
			whole := m0 - m0*wf.Markdown/n0 // what the contracts left hold at 1x
			share := loss * wf.Markdown / n0
			t.Logf("loss %d msat; margin %d for %d contracts -> %d for %d (whole %d); escrow +%d",
				loss, m0, n0, m1, n1, whole, after.YieldEscrowMsat-before.YieldEscrowMsat)
			if level < usdx.LevelHoleLeavesWithContracts {
				if m1-whole < share-1 || m1-whole > share+1 {
					t.Fatalf("below the level the margin was expected over-funded by the share %d: %d", share, m1-whole)
				}
				return
			}
			if m1 != whole {
				t.Fatalf("the hedge's margin is %d after the markdown, %d whole", m1, whole)
			}
			if wf.ToStakersMsat != after.YieldEscrowMsat-before.YieldEscrowMsat || after.ReserveMsat != before.ReserveMsat {
				t.Fatalf("escrow %d -> %d, reserve %d -> %d: %+v", before.YieldEscrowMsat, after.YieldEscrowMsat, before.ReserveMsat, after.ReserveMsat, wf)
			}
		})
	}
}

// TestQuoteOrderStaysWithinTheOpenQuotes: one account holds a quote, then
// another asks for 300 in a row and keeps QuotesPerAccountMax of them
// open. Below LevelQuoteOrderBounded the expiry order kept every id behind
// the first account's open quote until it expired and its grace passed
// (10.5 minutes); from it at most twice the open quotes and one
// account's bound.
func TestQuoteOrderStaysWithinTheOpenQuotes(t *testing.T) {
	for _, level := range []uint32{usdx.LevelQuoteOrderBounded - 1, usdx.LevelQuoteOrderBounded} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			h, hk := w.account(btcBTC)
			res, _ := w.quote(h, hk, usdx.SideMint, 10)
			wantOK(t, res)
			a, k := w.account(btcBTC)
			var last usdx.QuoteView
			for range 300 {
				var res *Result
				res, last = w.quote(a, k, usdx.SideMint, 10)
				wantOK(t, res)
			}
			st := w.st().u
			t.Logf("%d open quotes, %d ids in the expiry order", len(st.Quotes), len(st.QuoteOrder))
			if len(st.Quotes) != usdx.QuotesPerAccountMax+1 {
				t.Fatalf("%d open quotes", len(st.Quotes))
			}
			if level < usdx.LevelQuoteOrderBounded {
				if len(st.QuoteOrder) != 301 {
					t.Fatalf("below the level every id was expected to stay: %d", len(st.QuoteOrder))
				}
				return
			}
			if len(st.QuoteOrder) > 3*usdx.QuotesPerAccountMax {
				t.Fatalf("%d ids in the expiry order for %d open quotes", len(st.QuoteOrder), len(st.Quotes))
			}
			// The open quotes still expire: a mint on the last one works, and
			// after expiry and grace every id is gone.
			res, _ = w.mint(a, k, last.QuoteID)
			wantOK(t, res)
			w.walkTo(w.ts + usdx.QuoteGraceMs + 60_000)
			if st := w.st().u; len(st.Quotes) != 0 || len(st.QuoteOrder) != 0 {
				t.Fatalf("after expiry: %d quotes, %d ids", len(st.Quotes), len(st.QuoteOrder))
			}
		})
	}
}

// TestDynFeeIsTheExactRateRoundedUp: a mint of 2,000 USDx under a hard
// cap of 3,000 (utilisation 2/3, between the default curve's knots at 0.5
// and 0.8: a rate of 555,555.5 q9). Below LevelExactDynFee the rate was
// rounded down to 555,555 q9 before the fee, which fell 1 msat short of
// the exact fee on this notional of about 2,000,000,000 msat (at most
// notional / 1e9 msat); from it the quote's dynFeeMsat is the exact rate
// x notional rounded up once.
func TestDynFeeIsTheExactRateRoundedUp(t *testing.T) {
	for _, level := range []uint32{usdx.LevelExactDynFee - 1, usdx.LevelExactDynFee} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			w.params(USDxParamsPayload{HardCap: i64(3_000)})
			a, k := w.account(btcBTC)
			res, q := w.quote(a, k, usdx.SideMint, 2_000)
			wantOK(t, res)
			// notional = ceil(2000 x 1e19 / price); rate = 1e6 x (2/3 - 1/2) / (3/10) = 5e6/9 q9.
			notional := new(mbig.Int).Mul(mbig.NewInt(2_000), new(mbig.Int).SetUint64(10_000_000_000_000_000_000))
			notional.Add(notional, mbig.NewInt(int64(q.PriceQ8)-1)).Quo(notional, mbig.NewInt(int64(q.PriceQ8)))
			exact := new(mbig.Int).Mul(notional, mbig.NewInt(5_000_000))
			d := mbig.NewInt(9 * 1_000_000_000)
			exact.Add(exact, d).Sub(exact, mbig.NewInt(1)).Quo(exact, d)
			t.Logf("notional %s msat: dynFeeMsat %d, exact %s", notional, q.DynFeeMsat, exact)
			if level < usdx.LevelExactDynFee {
				if int64(q.DynFeeMsat) >= exact.Int64() {
					t.Fatalf("below the level the fee was expected short of %s: %d", exact, q.DynFeeMsat)
				}
				return
			}
			if int64(q.DynFeeMsat) != exact.Int64() {
				t.Fatalf("dynFeeMsat %d, exact %s", q.DynFeeMsat, exact)
			}
		})
	}
}
