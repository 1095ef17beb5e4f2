package fsm

import (
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/usdx"
)

// TestMarkdownIsNotCappedAtOneOrder: 100,000 USDx minted, 50,000 staked,
// the reserve's floor at the whole value (it gives nothing above it), and
// organic shorts so heavy that the hedge pays funding: about 5 USD an hour
// at the default cap. The operator then lowers BTC-PERP's largest order to
// 2 contracts (the hedge, larger than that, stays). The stakers are junior
// to the reserve's floor, so the loss is theirs while they hold USDx. Below
// usdx.LevelMarkdownInChunks the markdown was one hedge order of at most
// maxOrderContracts USDx: 2 USDx were burnt and the reserve below its
// floor paid the other 3 USD, with 49,998 USDx still staked. From it the
// markdown closes as many orders as the loss needs.
func TestMarkdownIsNotCappedAtOneOrder(t *testing.T) {
	for _, level := range []uint32{usdx.LevelMarkdownInChunks - 1, usdx.LevelMarkdownInChunks} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			a, k := w.account(20 * btcBTC)
			w.mintN(a, k, 100_000)
			s, sk := w.account(btcBTC)
			wantOK(t, w.order(s, sk, mktOrder("short1", "BTC-PERP", "sell", 500_000)))
			wantOK(t, w.cmd(a, k, CmdUSDxStake, USDxAmountPayload{Amount: 50_000}, ""))
			w.params(USDxParamsPayload{ReserveTargetQ9: i64(1_000_000_000), ReserveFloorQ9: i64(1_000_000_000)})
			two := int64(2)
			w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", MaxOrderContracts: &two})
			before := w.st().u
			wf := w.nextBoundary()
			after := w.st().u
			t.Logf("level %d: %+v; reserve %d -> %d, staked %d -> %d", level, wf, before.ReserveMsat, after.ReserveMsat, before.Staked, after.Staked)
			if wf.FlowMsat >= 0 || wf.FromEscrowMsat != 0 {
				t.Fatalf("want a loss with no escrow: %+v", wf)
			}
			if level < usdx.LevelMarkdownInChunks {
				if wf.Markdown != 2 || wf.FromReserveMsat <= 0 {
					t.Fatalf("below the level one order of 2 was expected, the reserve paying the rest: %+v", wf)
				}
				return
			}
			if wf.FromReserveMsat != 0 || wf.UncoveredMsat != 0 || after.ReserveMsat != before.ReserveMsat {
				t.Fatalf("the reserve below its floor paid while the stakers held %d USDx: %+v", after.Staked, wf)
			}
			if wf.Markdown < 5 || after.Staked != before.Staked-wf.Markdown || after.Supply != before.Supply-wf.Markdown {
				t.Fatalf("markdown %d: staked %d -> %d, supply %d -> %d", wf.Markdown, before.Staked, after.Staked, before.Supply, after.Supply)
			}
			// The markdown burnt the fewest USDx that cover the loss: one
			// fewer would not have (each is worth about 1,000,000 msat).
			if loss, usd := -wf.FlowMsat, usdx.ValueMsat(1, usdQ8(100_000)); (wf.Markdown-1)*usd >= loss+usd/100 {
				t.Fatalf("markdown %d USDx for a loss of %d msat", wf.Markdown, loss)
			}
		})
	}
}

// TestVelocityCountsAWholeHour: the velocity limit at 1,000 USDx an hour
// (its floor; no supply-based part). 1,000 USDx minted at the end of a
// minute, then 1,000 more 59 minutes later. The rolling hour is counted
// in minute buckets; below usdx.LevelVelocityWholeHour a bucket left the
// count when its minute's start was an hour old, so a mint made in its
// last second dropped out after 59 minutes and the second 1,000 were
// minted: 2,000 USDx within 59 minutes under a limit of 1,000 an hour.
// From it a bucket counts until its minute's end is an hour old, so the
// count covers at least the last 60 minutes (at most 61), and the second
// mint is refused until the first is an hour old.
func TestVelocityCountsAWholeHour(t *testing.T) {
	for _, level := range []uint32{usdx.LevelVelocityWholeHour - 1, usdx.LevelVelocityWholeHour} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			w.params(USDxParamsPayload{MintVelocityFloor: i64(1_000), MintVelocityQ9PerH: i64(0)})
			a, k := w.account(btcBTC)
			minute := (w.ts/60_000 + 2) * 60_000
			w.walkTo(minute - 10)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			first := w.mintN(a, k, 1_000)
			if int64(first.CreatedTsMs) >= minute {
				t.Fatalf("the first mint at %d, not before %d", first.CreatedTsMs, minute)
			}
			w.walkTo(minute + 59*60_000)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			res, q := w.quote(a, k, usdx.SideMint, 1_000)
			t.Logf("level %d: first mint at %d, second quote at %d (%d ms later): %d %s; mintedLastHour %s",
				level, first.CreatedTsMs, w.ts, w.ts-int64(first.CreatedTsMs), res.Status, res.Code, w.public().MintedLastHour)
			if w.ts-int64(first.CreatedTsMs) >= 3_600_000 {
				t.Fatal("the second quote is not within the hour")
			}
			if level < usdx.LevelVelocityWholeHour {
				wantOK(t, res)
				res, _ = w.mint(a, k, q.QuoteID)
				wantOK(t, res)
				return
			}
			wantRefused(t, res, 409, "usdx_capacity")
			if got := w.public().MintedLastHour; got != "1000" {
				t.Fatalf("mintedLastHour %s", got)
			}
			// An hour after the first mint's minute ended, it is out.
			w.walkTo(minute + 60*60_000)
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			w.mintN(a, k, 1_000)
		})
	}
}
