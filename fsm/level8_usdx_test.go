package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// TestMarkdownTakesTheLossAndNoMore: a small pool (20 USDx minted, 11
// staked) pays a negative funding flow far below one USDx's hedge margin
// with the reserve held at its floor, so the pool is marked down by one
// whole USDx. Below LevelMarkdownSurplusToStakers what that USDx freed
// beyond the loss went to the reserve, and the stakers lost about a
// thousand times the loss; from it the surplus goes back to their yield
// escrow, so what they hold (pool and escrow) falls by the loss alone.
func TestMarkdownTakesTheLossAndNoMore(t *testing.T) {
	for _, level := range []uint32{usdx.LevelMarkdownSurplusToStakers - 1, usdx.LevelMarkdownSurplusToStakers} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := smallMarkdownWorld(t, level, 11)
			before := w.st().u
			wf := w.nextBoundary()
			after := w.st().u
			loss := -wf.FlowMsat
			if wf.Markdown != 1 || loss <= 0 || loss > 100_000 || wf.FromReserveMsat != 0 || wf.UncoveredMsat != 0 {
				t.Fatalf("want a one-USDx markdown of a small loss: %+v", wf)
			}
			// What one USDx's contract freed (margin at 1x, about 1,000,000
			// msat at 100,000 USD), beyond the loss.
			surplus := (after.ReserveMsat - before.ReserveMsat) + (after.YieldEscrowMsat - before.YieldEscrowMsat)
			if surplus < 900_000 {
				t.Fatalf("surplus %d msat: reserve %d -> %d, escrow %d -> %d", surplus, before.ReserveMsat, after.ReserveMsat, before.YieldEscrowMsat, after.YieldEscrowMsat)
			}
			t.Logf("loss %d msat, markdown 1 USDx, surplus %d msat, share price %d -> %d", loss, surplus, wf.SharePriceQ9Before, wf.SharePriceQ9After)
			if level < usdx.LevelMarkdownSurplusToStakers {
				if after.ReserveMsat != before.ReserveMsat+surplus || wf.ToStakersMsat != 0 {
					t.Fatalf("below the level the surplus goes to the reserve: %+v", wf)
				}
				return
			}
			if after.ReserveMsat != before.ReserveMsat || after.YieldEscrowMsat != before.YieldEscrowMsat+surplus || wf.ToStakersMsat != surplus {
				t.Fatalf("the surplus must go back to the stakers' escrow: reserve %d -> %d, escrow %d -> %d, %+v",
					before.ReserveMsat, after.ReserveMsat, before.YieldEscrowMsat, after.YieldEscrowMsat, wf)
			}
			// The stakers' holding, in msat at the mark: 1 USDx less in the
			// pool and the surplus more in the escrow, a net of the loss.
			usdMsat := int64(1_000_000) // one USD at 100,000 USD per BTC
			held := func(st usdx.State) int64 { return st.Staked*usdMsat + st.YieldEscrowMsat }
			if got := held(before) - held(after); got < loss || got > loss+usdMsat/100 {
				t.Fatalf("stakers lost %d msat for a loss of %d", got, loss)
			}
		})
	}
}

// smallMarkdownWorld: 20 USDx minted, staked of them staked, the organic
// book short-heavy (the hedge pays funding) and the reserve held at its
// floor, so the next boundary's small loss marks the pool down.
func smallMarkdownWorld(t *testing.T, level uint32, staked int64) *usdxWorld {
	t.Helper()
	w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
	a, k := w.account(btcBTC)
	w.mintN(a, k, 20)
	s, sk := w.account(btcBTC)
	wantOK(t, w.order(s, sk, mktOrder("short1", "BTC-PERP", "sell", 5_000))) // shorts heavier: the hedge pays
	w.stakeFor(a, k, staked)
	w.params(USDxParamsPayload{ReserveTargetQ9: i64(1_000_000_000), ReserveFloorQ9: i64(1_000_000_000)})
	return w
}

// TestHeldPrintStopsUSDxPricing: BTC really halves in one print, which the
// guard holds. Below the level a mint was quoted at the price from before
// the jump (sats worth half as many dollars bought the old count of USDx)
// and a redemption paid at it; from the level a mint quote is refused
// usdx_oracle_stale and a redemption queues (oracle_stale) until the next
// print confirms the move, and is then paid at the new price.
func TestHeldPrintStopsUSDxPricing(t *testing.T) {
	for _, level := range []uint32{usdx.LevelHeldPrintIsStale - 1, usdx.LevelHeldPrintIsStale} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			acct, key := w.account(btcBTC)
			w.mintN(acct, key, 100)
			if res := w.print("BTCUSD", usdQ8(45_000)); string(res.Body) != `{"held":true}` {
				t.Fatalf("a halving: %d %s", res.Status, res.Body)
			}
			res, _ := w.quote(acct, key, usdx.SideMint, 10)
			red := w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: "red1", Amount: 40}, "")
			var s usdx.SagaView
			_ = red.Decode(&s)
			if level < usdx.LevelHeldPrintIsStale {
				wantOK(t, res)
				if s.State == usdx.SagaQueued {
					t.Fatalf("below the level the redemption went at the held-back price: %s", red.Body)
				}
				return
			}
			wantRefused(t, res, http.StatusConflict, wire.CodeUSDxOracleStale)
			if red.Status != http.StatusCreated || s.State != usdx.SagaQueued || s.QueuedReason == nil || *s.QueuedReason != "oracle_stale" {
				t.Fatalf("a redemption under a held print: %d %s", red.Status, red.Body)
			}
			free0 := w.balance(ledger.Free(acct))
			wantOK(t, w.print("BTCUSD", usdQ8(46_000)))
			if h := w.holder(acct); h.Pending != 0 || w.st().u.Supply != 60 {
				t.Fatalf("after the confirming print: %+v, supply %d", h, w.st().u.Supply)
			}
			// 40 dollars at about 46,000: about 8.7e7 msat less fees; at
			// the held-back 100,000 it would have been 4.0e7.
			if got := w.balance(ledger.Free(acct)) - free0; got < 85_000_000 || got > 87_000_000 {
				t.Fatalf("paid %d msat", got)
			}
		})
	}
}
