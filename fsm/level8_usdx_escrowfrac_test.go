package fsm

import (
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
)

// TestStakePaysForTheEscrowBelowOneUSDx: a markdown of one whole USDx for
// a small loss leaves the surplus (almost one USDx of sats) in the
// stakers' yield escrow (LevelMarkdownSurplusToStakers). The stake price
// valued the escrow in whole USDx, rounded down, so that surplus was
// priced at nothing: a stake of 10,000 USDx made right after, unstaked at
// once, was released with its 10,000 USDx and 997,301 msat of the
// escrow, and the 11 sUSDx that bore the markdown kept 998 msat of their
// 998,299. From LevelEscrowExactInPrice the stake pays for the escrow's
// exact value: the round trip gains nothing and the stakers keep theirs.
// (A short cooldown, an operator's setting, keeps the round trip inside
// one funding interval.)
func TestStakePaysForTheEscrowBelowOneUSDx(t *testing.T) {
	w := smallMarkdownWorld(t, usdx.LevelEscrowExactInPrice, 11)
	if wf := w.nextBoundary(); wf.Markdown != 1 || wf.ToStakersMsat < 900_000 {
		t.Fatalf("want a one-USDx markdown with its surplus in the escrow: %+v", wf)
	}
	before := w.st().u
	w.params(USDxParamsPayload{UnstakeCooldownMs: i64(60_000)})
	x, kx := w.account(20 * btcBTC)
	w.mintN(x, kx, 10_000)
	u0, m0 := w.holder(x).Usdx, w.balance(ledger.Free(x))
	sr := w.stakeFor(x, kx, 10_000)
	wantOK(t, w.cmd(x, kx, CmdUSDxUnstake, USDxAmountPayload{Amount: w.holder(x).Susdx}, ""))
	for i := 0; i < 3; i++ {
		w.ts += 30_000
		wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	}
	after := w.st().u
	if len(after.Cooling) != 0 || after.SusdxSupply != before.SusdxSupply || len(after.History) != len(before.History) {
		t.Fatalf("want the stake released within the interval: %+v", after)
	}
	usdMsat := int64(1_000_000) // one USD at 100,000 USD per BTC
	gain := (w.holder(x).Usdx-u0)*usdMsat + w.balance(ledger.Free(x)) - m0
	held := func(st usdx.State) int64 { return st.Staked*usdMsat + st.YieldEscrowMsat }
	t.Logf("stake %+v; round trip %+d msat; stakers' holding %d -> %d msat", sr, gain, held(before), held(after))
	if gain > 0 {
		t.Fatalf("a stake and unstake right after a markdown gained %d msat of the stakers' escrow", gain)
	}
	if held(after) < held(before) {
		t.Fatalf("the stakers who bore the markdown lost %d msat to a round trip", held(before)-held(after))
	}
}
