package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

func (w *tradeWorld) growthCmd(typ CmdType, acct, key, idem string, payload any) *Result {
	w.t.Helper()
	c := mustCommand(w.t, typ, 0, payload)
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+idem, []byte(fmt.Sprintf("%d %+v", typ, payload))
	return w.at(c)
}

func (w *tradeWorld) createCode(acct, key, code string) *Result {
	return w.growthCmd(CmdReferralCode, acct, key, "code-"+code, ReferralCodePayload{Code: code})
}

func (w *tradeWorld) bind(acct, key, code string) *Result {
	return w.growthCmd(CmdReferralBind, acct, key, "bind-"+code+fmt.Sprint(w.ts), ReferralBindPayload{Code: code})
}

func (w *tradeWorld) claim(acct, key string) *Result {
	return w.growthCmd(CmdReferralClaim, acct, key, fmt.Sprint("claim-", w.ts), struct{}{})
}

func (w *tradeWorld) referral(acct string) (v growth.StatusView) {
	w.m.Read(func(st *State, _ uint64) {
		v = st.Growth.Status(&growth.Env{NowMs: st.NowMs, Host: ReadHost{st}}, acct, st.Growth.Volume)
	})
	return v
}

func (w *tradeWorld) earnings(acct string) (p growth.EarningsPage) {
	w.m.Read(func(st *State, _ uint64) { p = st.Growth.Earnings(acct, 0, 100) })
	return p
}

// The referral economics end to end, with the ledger's conservation and
// the programme's own invariant (payable == pending + claimable) checked
// after every entry by the machine: a referrer trades enough to pass its
// gates, a referee binds and trades, the fill carries the referral block
// with the discount and reward computed by hand from its gross fee, the
// money sits in the payable during the holdback and reaches the referrer
// only by a claim after it.
func TestReferralEconomicsEndToEnd(t *testing.T) {
	w := newTradeWorld(t)
	ref, refKey := w.account(btcBTC)
	wantOK(t, w.createCode(ref, refKey, "alpha7"))
	if v := w.referral(ref); v.Code == nil || v.Code.Code != "ALPHA7" || v.Stats == nil || v.Eligibility.Eligible {
		t.Fatalf("status after code: %+v", v)
	}
	// The referrer's own volume gate: 100 contracts.
	wantOK(t, w.order(ref, refKey, mktOrder("r1", "ETH-PERP", "buy", 150)))

	referee, refereeKey := w.account(btcBTC)
	if v := w.referral(referee); v.BindWindow == nil || v.ReferredBy != nil {
		t.Fatalf("referee before binding: %+v", v)
	}
	res := w.bind(referee, refereeKey, "Alpha7")
	wantOK(t, res)
	var br growth.BindResult
	if err := res.Decode(&br); err != nil || !br.Bound || br.ReferredBy == nil || br.ReferredBy.Code != "ALPHA7" ||
		!br.ReferredBy.DiscountActive {
		t.Fatalf("bind result %s", res.Body)
	}

	feesBefore := w.balance(ledger.FeeRevenue)
	freeBefore := w.balance(ledger.Free(referee))
	wantOK(t, w.order(referee, refereeKey, mktOrder("b1", "BTC-PERP", "buy", 50_000)))
	f := w.lastFill(referee)
	r := f.Referral
	if r == nil {
		t.Fatal("a referred account's fill has no referral block")
	}
	gross := r.GrossFeeMsat
	p := growth.DefaultPolicy()
	// Hand computation: the fee is notional x takerFeeQ9 rounded up; the
	// discount 10% of it and the reward 20% of the net fee, both down.
	wantGross, err := trade.TakerFeeMsat(f.TradeNotionalMsat, w.marketParams("BTC-PERP").TakerFeeQ9)
	if err != nil || gross != wantGross || gross < 1000 {
		t.Fatalf("gross fee %d, want %d (%v)", gross, wantGross, err)
	}
	discount := gross * p.RefereeDiscountQ9 / 1e9
	reward := (gross - discount) * 200_000_000 / 1e9
	if r.DiscountMsat != discount || r.RewardMsat != reward || f.FeeMsat != gross-discount || r.Code != "ALPHA7" || r.PolicyVersion != 1 {
		t.Fatalf("referral block %+v fee %d, want discount %d reward %d", *r, f.FeeMsat, discount, reward)
	}
	if got := w.balance(ledger.FeeRevenue) - feesBefore; got != gross-discount-reward {
		t.Fatalf("fee revenue grew %d, want %d", got, gross-discount-reward)
	}
	if got := w.balance(growth.ReferralPayable); got != reward {
		t.Fatalf("payable %d, want %d", got, reward)
	}
	spent := freeBefore - w.balance(ledger.Free(referee))
	if spent != f.After.MarginMsat+gross-discount {
		t.Fatalf("referee paid %d, want margin %d + net fee %d", spent, f.After.MarginMsat, gross-discount)
	}
	// The fill's view carries it too.
	if v := trade.NewFillView(&f); v.Referral == nil || int64(*v.Referral.RewardMsat) != reward || int64(v.Referral.GrossFeeMsat) != gross {
		t.Fatalf("fill view referral %+v", v.Referral)
	}

	st := w.referral(ref)
	if int64(st.Stats.PendingHoldbackMsat) != reward || st.Stats.ClaimableMsat != 0 || st.Stats.Referees != 1 || st.Stats.ActiveReferees != 1 {
		t.Fatalf("referrer stats %+v", *st.Stats)
	}
	e := w.earnings(ref).Earnings
	if len(e) != 1 || int64(e[0].RewardMsat) != reward || e[0].Status != growth.StatusAccrued || e[0].FillSeq == nil ||
		uint64(*e[0].FillSeq) != f.Seq || int64(e[0].NetFeeMsat) != gross-discount || *e[0].Ref != "referee-1" {
		t.Fatalf("earnings %+v", e)
	}
	// Before the holdback: nothing to claim.
	wantRefused(t, w.claim(ref, refKey), http.StatusConflict, "conflict")

	// Accruals of day D vest at D + 1 day + holdback (1 day).
	vestAt := f.TsMs/growth.DayMs*growth.DayMs + 2*growth.DayMs
	w.walkTo(vestAt - 2)
	if st := w.referral(ref); st.Stats.ClaimableMsat != 0 {
		t.Fatalf("vested early: %+v", *st.Stats)
	}
	w.walkTo(vestAt + 1)
	st = w.referral(ref)
	if int64(st.Stats.ClaimableMsat) != reward || st.Stats.PendingHoldbackMsat != 0 {
		t.Fatalf("after the holdback: %+v", *st.Stats)
	}
	t.Logf("gross %d discount %d reward %d", gross, discount, reward)
	if reward < p.MinClaimMsat {
		wantRefused(t, w.claim(ref, refKey), http.StatusConflict, "conflict")
		return
	}
	refFree := w.balance(ledger.Free(ref))
	res = w.claim(ref, refKey)
	wantOK(t, res)
	var cr growth.ClaimResult
	if err := res.Decode(&cr); err != nil || int64(cr.ClaimedMsat) != reward || cr.Accruals != 1 {
		t.Fatalf("claim %s", res.Body)
	}
	if got := w.balance(ledger.Free(ref)) - refFree; got != reward {
		t.Fatalf("referrer free grew %d, want %d", got, reward)
	}
	if w.balance(growth.ReferralPayable) != 0 {
		t.Fatal("payable not empty after the claim")
	}
	if e := w.earnings(ref).Earnings; e[0].Status != growth.StatusClaimed {
		t.Fatalf("earning after claim: %+v", e[0])
	}
	wantRefused(t, w.claim(ref, refKey), http.StatusConflict, "conflict")
}

func (w *tradeWorld) marketParams(id string) (p market.Params) {
	w.m.Read(func(st *State, _ uint64) { p = st.Market.MarketsByID[id].Params })
	return p
}

// Codes: custom (normalised to upper case) or refused for length,
// characters and collisions; one per account. Binds: never one's own
// code, never twice, never a code one's own referee owns, an unknown code
// is not found, and only within the bind window.
func TestReferralCodeAndBindRefusals(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w := newTradeWorld(t)
	a, ak := w.account(btcBTC)
	b, bk := w.account(btcBTC)
	for _, bad := range []string{"abc", "has space", "emoji🙂x", "dash-code", "A234567890123456X"} {
		wantRefused(t, w.createCode(a, ak, bad), http.StatusBadRequest, "validation")
	}
	wantOK(t, w.createCode(a, ak, "Alpha"))
	wantRefused(t, w.createCode(b, bk, "ALPHA"), http.StatusConflict, "conflict")      // taken, any case
	wantRefused(t, w.createCode(a, ak, "Second"), http.StatusConflict, "conflict")     // one per account
	wantRefused(t, w.bind(a, ak, "alpha"), http.StatusForbidden, "referral_forbidden") // own code
	wantRefused(t, w.bind(b, bk, "nosuch"), http.StatusNotFound, "not_found")          // unknown
	wantRefused(t, w.bind(b, bk, "bad code"), http.StatusBadRequest, "validation")     // malformed
	wantOK(t, w.bind(b, bk, "alpha"))
	wantRefused(t, w.bind(b, bk, "alpha"), http.StatusConflict, "conflict") // twice
	// b's referrer a may not bind b's code: that would be a cycle.
	wantOK(t, w.createCode(b, bk, "BRAVO"))
	wantRefused(t, w.bind(a, ak, "bravo"), http.StatusForbidden, "referral_forbidden")
	// Nor may a's grand-referee's code bind a.
	c, ck := w.account(btcBTC)
	wantOK(t, w.bind(c, ck, "bravo"))
	wantOK(t, w.createCode(c, ck, "CHARLIE"))
	wantRefused(t, w.bind(a, ak, "charlie"), http.StatusForbidden, "referral_forbidden")

	// The bind window closes 7 days after signup.
	late, lk := w.account(btcBTC)
	created := w.ts
	if v := w.referral(late); v.BindWindow == nil || int64(v.BindWindow.OpenUntilTsMs) != created-1+7*growth.DayMs {
		t.Fatalf("bind window %+v, account created at %d", v.BindWindow, created-1)
	}
	w.walkTo(created + 7*growth.DayMs + 10)
	wantRefused(t, w.bind(late, lk, "alpha"), http.StatusForbidden, "referral_forbidden")
	if v := w.referral(late); v.BindWindow != nil || v.ReferredBy != nil {
		t.Fatalf("closed window still shown: %+v", v)
	}
}

// A referrer that fails its gates when the rewards vest forfeits them:
// the payable returns them to fee revenue and the earnings say forfeited.
// The discount volume cap stops the discount part-way through a fill.
func TestReferralForfeitAndDiscountCap(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w := newTradeWorld(t)
	ref, refKey := w.account(btcBTC)
	wantOK(t, w.createCode(ref, refKey, "NOVOL")) // never trades: own_volume fails
	referee, rk := w.account(btcBTC)
	wantOK(t, w.bind(referee, rk, "novol"))
	wantOK(t, w.order(referee, rk, mktOrder("b1", "BTC-PERP", "buy", 50_000)))
	reward := w.lastFill(referee).Referral.RewardMsat
	if reward == 0 || w.balance(growth.ReferralPayable) != reward {
		t.Fatalf("reward %d payable %d", reward, w.balance(growth.ReferralPayable))
	}
	fees := w.balance(ledger.FeeRevenue)
	w.walkTo(w.ts/growth.DayMs*growth.DayMs + 2*growth.DayMs + 1)
	if w.balance(growth.ReferralPayable) != 0 || w.balance(ledger.FeeRevenue)-fees != reward {
		t.Fatalf("forfeit: payable %d, fees grew %d, want %d", w.balance(growth.ReferralPayable), w.balance(ledger.FeeRevenue)-fees, reward)
	}
	st := w.referral(ref)
	if int64(st.Stats.ForfeitedMsat) != reward || st.Stats.ClaimableMsat != 0 || st.Eligibility.Eligible {
		t.Fatalf("stats %+v eligibility %+v", *st.Stats, st.Eligibility)
	}
	if e := w.earnings(ref).Earnings; e[0].Status != growth.StatusForfeited {
		t.Fatalf("earning %+v", e[0])
	}
	wantRefused(t, w.claim(ref, refKey), http.StatusConflict, "conflict")

	// Discount cap: set a cap of 1.5x one fill's notional via the policy.
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	var notional int64
	w.m.Read(func(st *State, _ uint64) {
		b := st.Growth.Bindings[referee]
		notional = b.DiscountVolumeUsedMsat
		st.Growth.Policy.RefereeDiscountVolumeCapMsat = notional * 3 / 2 // test-only tweak of the replica's policy
	})
	wantOK(t, w.order(referee, rk, mktOrder("b2", "BTC-PERP", "sell", 50_000)))
	f := w.lastFill(referee)
	left := notional*3/2 - notional
	want := f.Referral.GrossFeeMsat * growth.DefaultPolicy().RefereeDiscountQ9 / 1e9 * left / f.TradeNotionalMsat
	if f.Referral.DiscountMsat != want || want == 0 {
		t.Fatalf("capped discount %d, want %d", f.Referral.DiscountMsat, want)
	}
	wantOK(t, w.order(referee, rk, mktOrder("b3", "BTC-PERP", "buy", 1_000)))
	if f := w.lastFill(referee); f.Referral.DiscountMsat != 0 || f.FeeMsat != f.Referral.GrossFeeMsat {
		t.Fatalf("discount past the cap: %+v", *f.Referral)
	}
	if v := w.referral(referee); v.ReferredBy.DiscountActive {
		t.Fatalf("discount still active past the cap: %+v", *v.ReferredBy)
	}
}
