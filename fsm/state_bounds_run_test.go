package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
)

// collectionSizes returns, per path, the largest length any instance has
// (the most fills of any account, the most keys of any account ...): the
// maxPer of stateSizes (state_sizes_test.go, which the soak also uses).
func collectionSizes(st *State) map[string]int {
	out := map[string]int{}
	for path, c := range stateSizes(st) {
		out[path] = c.maxPer
	}
	return out
}

// perInstanceBounds are the hard per-instance bounds a client can push a
// collection to: what one account (or one market) may hold, whatever it
// does for however long.
var perInstanceBounds = map[string]int{
	"Access.Accounts[].KeyIDs":           access.MaxKeysPerAccount,
	"Access.Accounts[].FaucetGrantsTsMs": access.DefaultFaucetGrantsPerHour,
	"Funds.ByAccount[]":                  funds.MaxDepositsPerAccount,
	"Funds.InvoicesByAccount[]":          funds.MaxListedInvoicesPerAccount,
	"Funds.KnownDests[]":                 funds.MaxKnownDestinations,
	"Trade.Accounts[].OrderNos":          trade.RestingOrdersPerAccountMax + trade.ClosedOrdersKept,
	"Trade.Accounts[].Fills":             trade.FillsKept,
	"Trade.Accounts[].Closed":            trade.ClosedOrdersKept,
	"Trade.Accounts[].Live":              trade.RestingOrdersPerAccountMax,
	"Trade.Accounts[].Triggers":          trade.RestingOrdersPerAccountMax,
	"Trade.Accounts[].FundingFlows":      trade.FundingFlowsKept,
	"Trade.Accounts[].Liquidations":      trade.LiquidationsKept,
	"Trade.Orders[].Legs":                2,
	"USDx.Holders[].Quotes":              usdx.QuotesPerAccountMax,
	"USDx.Holders[].Activity":            usdx.ActivityKept,
	"USDx.Holders[].Sagas":               usdx.SagasHeldMax + 1,
	"USDx.Holders[].Withdrawals":         usdx.WithdrawalsHeldMax + 1,
	"USDx.Holders[].Unstakes":            usdx.CoolingPerAccountMax + usdx.UnstakesKept,
	"USDx.Buckets":                       61,
	"Growth.Board.Traders[].Days":        growth.TraderDaysKept,
	"Growth.Promoters[].Codes":           growth.PromoterCodesMax,
	"Growth.Referrers[].Earnings":        growth.EarningsKept,
	"Growth.Referrers[].Earned":          growth.EarnedDaysKept,
}

// boundsWorld drives one attacker account through every client command it
// may send, at its budgets, for a long stretch of log time.
type boundsWorld struct {
	*usdxWorld
	acct, key string
}

// advance moves log time by ms in steps of at most a minute, printing both
// feeds each step so the markets stay fresh and timers fire.
func (w *boundsWorld) advance(ms int64) {
	for ms > 0 {
		step := min(ms, 50_000)
		w.ts += step - 1
		ms -= step
		wantOK(w.t, w.print("BTCUSD", usdQ8(100_000)))
		wantOK(w.t, w.print("ETHUSD", usdQ8(3_400)))
	}
}

// round is one pass of the attacker through its commands.
func (w *boundsWorld) round(i int) {
	t, a, k := w.t, w.acct, w.key
	// An order that rests and is cancelled, a buy and a sell that fill.
	id := fmt.Sprint("lim-", i)
	wantOK(t, w.order(a, k, limitOrder(id, "BTC-PERP", "buy", 10, usdQ8(50_000))))
	wantOK(t, w.cancel(a, k, id, "cx-"+id))
	wantOK(t, w.order(a, k, mktOrder(fmt.Sprint("b-", i), "BTC-PERP", "buy", 10)))
	wantOK(t, w.order(a, k, mktOrder(fmt.Sprint("s-", i), "BTC-PERP", "sell", 10)))
	// A key minted and revoked.
	kid := fmt.Sprint("dk-", i)
	sum := sha256.Sum256([]byte(kid))
	wantOK(t, w.cmd(a, k, CmdMintKey, access.NewKey{KeyID: kid, KeyHashHex: hex.EncodeToString(sum[:])}, ""))
	wantOK(t, w.cmd(a, k, CmdRevokeKeys, RevokePayload{KeyID: kid}, ""))
	// An invoice never paid (every other one open for ten days, refused
	// past the open bound), a withdrawal to a new destination, paid.
	expiry := w.ts + 60_000
	if i%2 == 0 {
		expiry = w.ts + 10*86_400_000
	}
	w.cmd(a, k, CmdInvoiceCreated, funds.NewInvoice{PaymentRequest: "lntb1x", PaymentRef: fmt.Sprintf("%064x", i+1), ExpiresAtMs: expiry}, "")
	ref := fmt.Sprint("wd-", i)
	r := wreq(ref, 1_000, 10_000)
	r.Destination = fmt.Sprint("sparkt1dest", i)
	wantOK(t, w.cmd(a, k, CmdWithdrawalRequested, r, ""))
	wantOK(t, w.at(mustCommand(t, CmdWithdrawalResult, 0, funds.PayoutResult{RailRef: ref, Status: funds.PayoutPaid})))
	// The faucet (refused past its hourly grants).
	w.cmd(a, k, CmdFaucet, nil, "")
	// USDx: a quote each round (a burst past the account's open quotes
	// now and then); every fifth round a mint, a stake and an unstake.
	if i%100 == 99 {
		for range usdx.QuotesPerAccountMax + 5 {
			res, _ := w.quote(a, k, "mint", 1)
			wantOK(t, res)
		}
	}
	// Ten USDx for a stake: a share can cost more than one (the escrow's
	// value counts exactly, usdx.LevelEscrowExactInPrice).
	n := int64(1)
	if i%5 == 0 {
		n = 10
	}
	res, q := w.quote(a, k, "mint", n)
	wantOK(t, res)
	if i%5 == 0 {
		res, _ := w.mint(a, k, q.QuoteID)
		wantOK(t, res)
		wantOK(t, w.cmd(a, k, CmdUSDxStake, USDxAmountPayload{Amount: 10}, ""))
		w.cmd(a, k, CmdUSDxUnstake, USDxAmountPayload{Amount: 1}, "") // refused past the cooling bound
	}
	// Leaderboard settings, cancel-all-after, referral and promoter codes.
	name := fmt.Sprint("name ", i)
	wantOK(t, w.cmd(a, k, CmdLeaderboardSettings, growth.SettingsRequest{DisplayName: &name}, ""))
	wantOK(t, w.cmd(a, k, CmdCancelAllAfter, CancelAllAfterPayload{TimeoutMs: 86_400_000}, ""))
	w.cmd(a, k, CmdReferralCode, ReferralCodePayload{Code: fmt.Sprintf("CODE%d", i)}, "")
	w.cmd(a, k, CmdPromoterCode, growth.NewPromoterCode{Code: fmt.Sprintf("PRM%d", i), Label: "x"}, "")
}

// TestAClientAtItsBudgetsStaysWithinEveryBound drives one account through
// every client command for more rounds than any per-account bound and
// more log time than any hold (three days), then checks every collection
// against its per-instance bound, on the replica and after a snapshot and
// restore, and that the restored replica applies the next round to the
// same state.
func TestAClientAtItsBudgetsStaysWithinEveryBound(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	if testing.Short() {
		t.Skip("long")
	}
	const rounds = 1_300
	w := &boundsWorld{usdxWorld: newUSDxWorld(t)}
	w.unchecked = true // the invariants are checked at the end
	w.acct, w.key = w.account(100 * btcBTC)
	wantOK(t, w.cmd(w.acct, w.key, CmdPromoterApply, goodApplication(), ""))
	for i := range rounds {
		w.round(i)
		w.advance(200_000) // 3 days and more over the run
	}
	var sizes map[string]int
	w.m.Read(func(st *State, _ uint64) {
		if err := st.Trade.CheckInvariants(st.Ledger, st.Market, true, st.NowMs); err != nil {
			t.Fatal(err)
		}
		sizes = collectionSizes(st)
	})
	known := stateCollections(t)
	for p, bound := range perInstanceBounds {
		if _, ok := known[p]; !ok {
			t.Errorf("%s is no collection of State", p)
		}
		if sizes[p] > bound {
			t.Errorf("%s holds %d, above its bound %d", p, sizes[p], bound)
		}
	}
	// The run reached these bounds: they were tested, not just unreached.
	for _, p := range []string{"Access.Accounts[].KeyIDs", "Funds.KnownDests[]",
		"Trade.Accounts[].Fills", "Trade.Accounts[].Closed", "USDx.Holders[].Quotes", "USDx.Holders[].Activity",
		"Growth.Promoters[].Codes"} {
		if sizes[p] != perInstanceBounds[p] {
			t.Errorf("%s reached %d, want the run to reach its bound %d", p, sizes[p], perInstanceBounds[p])
		}
	}
	// Totals the one account could otherwise grow.
	for p, most := range map[string]int{"Access.Keys": access.MaxKeysPerAccount + 1, "Trade.Orders": trade.RestingOrdersPerAccountMax + trade.ClosedOrdersKept + trade.ClosedOrdersKept,
		"USDx.Quotes": usdx.QuotesPerAccountMax, "USDx.QuoteOrder": 3 * usdx.QuotesPerAccountMax, "Funds.Invoices": funds.MaxListedInvoicesPerAccount,
		"Funds.InvoiceExpiries": 2*funds.MaxListedInvoicesPerAccount + 64, "Growth.Codes": growth.PromoterCodesMax + 1} {
		if sizes[p] > most {
			t.Errorf("%s holds %d after one account's run, want at most %d", p, sizes[p], most)
		}
	}
	// Paid withdrawals are held two days (money: each paid a fee): the
	// closed ones of the last two days, about 864 here, not 500.
	t.Logf("sizes: keys %d, fills %d, closed %d, orders %d, withdrawals %d, quotes %d, quote order %d, activity %d, invoices %d",
		sizes["Access.Accounts[].KeyIDs"], sizes["Trade.Accounts[].Fills"], sizes["Trade.Accounts[].Closed"], sizes["Trade.Orders"],
		sizes["Funds.WithdrawalsByAccount[]"], sizes["USDx.Holders[].Quotes"], sizes["USDx.QuoteOrder"], sizes["USDx.Holders[].Activity"],
		sizes["Funds.Invoices"])

	// A restored replica holds the same collections and applies the next
	// round to the same state.
	snap, err := w.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	restored := newReplica(t)
	if err := restored.m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	derivedPaths := map[string]bool{}
	for _, b := range stateCollectionBounds {
		if b.kind == derived {
			derivedPaths[b.path] = true
		}
	}
	restored.m.Read(func(st *State, _ uint64) {
		after := collectionSizes(st)
		for p, n := range sizes {
			// Derived indexes are rebuilt on first use after a restore.
			if !derivedPaths[p] && !derivedPaths[strings.TrimSuffix(p, "[].keys")] && after[p] != n {
				t.Errorf("%s: %d before the snapshot, %d after the restore", p, n, after[p])
			}
		}
	})
	w.mirror, w.hashEvery, restored.next = restored, 1, w.next
	w.round(rounds)
	w.advance(200_000)
	if w.hash() != restored.hash() {
		t.Fatal("the restored replica diverged on the next round")
	}
}
