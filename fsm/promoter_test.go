package fsm

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
)

func goodApplication() growth.Application {
	return growth.Application{DisplayName: "Sats Weekly", Channels: []growth.Channel{{Kind: "newsletter", URL: "https://satsweekly.example", Audience: "12k readers"}},
		Plan: "A weekly section on perps", Jurisdictions: []string{"DE", "PT"}, AcceptedTermsVersion: growth.PromoterTermsVersion}
}

// The promoter programme end to end: an application validated field by
// field, codes with a bounded kickback in the referral code namespace, a
// referee's fill split into discount + kickback for the referee and the
// promoter's reward (promoter share less kickback) in the promoter
// payable, stats by day, vesting after the holdback and the claim.
func TestPromoterProgrammeEndToEnd(t *testing.T) {
	w := newTradeWorld(t)
	pr, pk := w.account(btcBTC)
	bads := []func(a *growth.Application){
		func(a *growth.Application) { a.DisplayName = "" },
		func(a *growth.Application) { a.Channels = nil },
		func(a *growth.Application) { a.Channels[0].Kind = "tiktokk" },
		func(a *growth.Application) { a.Channels[0].URL = "ftp://x.example" },
		func(a *growth.Application) { a.Channels[0].Audience = " " },
		func(a *growth.Application) { a.Plan = "" },
		func(a *growth.Application) { a.Jurisdictions = []string{"de"} },
		func(a *growth.Application) { a.Jurisdictions = []string{"DE", "DE"} },
		func(a *growth.Application) { a.AcceptedTermsVersion = "2020-01" },
	}
	for _, mut := range bads {
		a := goodApplication()
		a.Channels = append([]growth.Channel(nil), a.Channels...)
		mut(&a)
		wantRefused(t, w.growthCmd(CmdPromoterApply, pr, pk, "apply-bad", a), http.StatusBadRequest, "validation")
	}
	code := func(c string, kick int64) *Result {
		return w.growthCmd(CmdPromoterCode, pr, pk, "pcode-"+c, growth.NewPromoterCode{Code: c, Label: "newsletter", KickbackQ9: kick})
	}
	wantRefused(t, code("SATSWEEKLY", 0), http.StatusNotFound, "not_found") // not a promoter yet
	res := w.growthCmd(CmdPromoterApply, pr, pk, "apply", goodApplication())
	wantOK(t, res)
	var ar growth.ApplyResult
	if err := res.Decode(&ar); err != nil || ar.Status != growth.PromoterApproved || ar.PromoterID == "" {
		t.Fatalf("apply %s", res.Body)
	}
	wantRefused(t, w.growthCmd(CmdPromoterApply, pr, pk, "apply-2", goodApplication()), http.StatusConflict, "conflict")
	wantRefused(t, code("SATSWEEKLY", 150_000_001), http.StatusBadRequest, "validation") // beyond MaxKickbackQ9
	wantRefused(t, code("SATSWEEKLY", -1), http.StatusBadRequest, "validation")
	other, ok2 := w.account(btcBTC)
	wantOK(t, w.createCode(other, ok2, "TAKEN1"))
	wantRefused(t, code("taken1", 0), http.StatusConflict, "conflict") // one namespace
	const kick = 50_000_000                                            // 5% of the net fee back to the referee
	wantOK(t, code("SatsWeekly", kick))

	referee, rk := w.account(btcBTC)
	wantOK(t, w.bind(referee, rk, "SATSWEEKLY"))
	payable := w.balance(growth.PromoterPayable)
	wantOK(t, w.order(referee, rk, mktOrder("p1", "BTC-PERP", "buy", 50_000)))
	f := w.lastFill(referee)
	r := f.Referral
	p := growth.DefaultPolicy()
	discount := r.GrossFeeMsat * p.RefereeDiscountQ9 / 1e9
	net := r.GrossFeeMsat - discount
	kickback := net * kick / 1e9
	reward := net * (p.PromoterShareQ9 - kick) / 1e9
	if r.DiscountMsat != discount+kickback || r.RewardMsat != reward || f.FeeMsat != r.GrossFeeMsat-discount-kickback {
		t.Fatalf("split %+v fee %d, want discount %d + kickback %d, reward %d", *r, f.FeeMsat, discount, kickback, reward)
	}
	if got := w.balance(growth.PromoterPayable) - payable; got != reward || w.balance(growth.ReferralPayable) != 0 {
		t.Fatalf("promoter payable grew %d, want %d", got, reward)
	}
	var stats growth.PromoterStats
	var prof growth.PromoterView
	w.m.Read(func(st *State, _ uint64) {
		stats = st.Growth.StatsOf(pr, st.NowMs, 7)
		prof, _ = st.Growth.PromoterOf(pr)
	})
	today := stats.Days[6]
	if len(stats.Days) != 7 || today.Binds != 1 || today.Fills != 1 || int64(today.RewardMsat) != reward ||
		int64(today.KickbackMsat) != kickback || int64(today.VolumeMsat) != f.TradeNotionalMsat || stats.Totals.Fills != 1 {
		t.Fatalf("stats %+v", stats)
	}
	if int64(prof.PendingHoldbackMsat) != reward || prof.Referees != 1 || prof.Codes != 1 {
		t.Fatalf("profile %+v", prof)
	}
	w.walkTo(f.TsMs/growth.DayMs*growth.DayMs + 2*growth.DayMs + 1)
	free := w.balance(ledger.Free(pr))
	res = w.growthCmd(CmdPromoterClaim, pr, pk, "pclaim", struct{}{})
	wantOK(t, res)
	if got := w.balance(ledger.Free(pr)) - free; got != reward || w.balance(growth.PromoterPayable) != 0 {
		t.Fatalf("claimed %d, want %d", got, reward)
	}
	wantRefused(t, w.growthCmd(CmdPromoterClaim, other, ok2, "pclaim-x", struct{}{}), http.StatusNotFound, "not_found")
}

// review is an operator's decision on acct's promoter application.
func (w *tradeWorld) review(acct, decision string) *Result {
	w.t.Helper()
	c := mustCommand(w.t, CmdPromoterReview, 0, PromoterReviewPayload{AccountID: acct, Decision: decision})
	c.IdemKey, c.ReqHash = "op:review:"+acct+":"+decision+":"+strconv.FormatInt(w.ts, 10), []byte(decision)
	return w.at(c)
}

// What an application that is not approved sees (prod leaves every
// application pending until an operator decides it): its profile says pending, a code is refused
// (403 referral_forbidden), a second application is a conflict, a claim
// finds nothing (409), and nobody can bind to it because it has no code.
func TestPendingPromoterSeesItsApplicationOnly(t *testing.T) {
	w := newTradeWorld(t)
	pr, pk := w.account(btcBTC)
	other, ok := w.account(btcBTC)
	// Prod has no self-serve signup and no operator account command yet:
	// the accounts are made on testnet, then the deployment is switched
	// under the machine (a test-only write) so the application stays
	// pending as on prod.
	w.m.Read(func(st *State, _ uint64) { st.Genesis.Deployment = "prod" })
	res := w.growthCmd(CmdPromoterApply, pr, pk, "apply", goodApplication())
	wantOK(t, res)
	var ar growth.ApplyResult
	if err := res.Decode(&ar); err != nil || ar.Status != growth.PromoterPending {
		t.Fatalf("apply on prod: %s", res.Body)
	}
	var prof growth.PromoterView
	w.m.Read(func(st *State, _ uint64) { prof, _ = st.Growth.PromoterOf(pr) })
	if prof.Status != growth.PromoterPending || prof.Codes != 0 {
		t.Fatalf("profile %+v", prof)
	}
	wantRefused(t, w.growthCmd(CmdPromoterCode, pr, pk, "pcode", growth.NewPromoterCode{Code: "PENDING1", Label: "x", KickbackQ9: 0}),
		http.StatusForbidden, "referral_forbidden")
	wantRefused(t, w.growthCmd(CmdPromoterApply, pr, pk, "apply-2", goodApplication()), http.StatusConflict, "conflict")
	wantRefused(t, w.growthCmd(CmdPromoterClaim, pr, pk, "pclaim", struct{}{}), http.StatusConflict, "conflict")
	wantRefused(t, w.bind(other, ok, "PENDING1"), http.StatusNotFound, "not_found")
}

// An operator decides a pending application (prod's applications waited
// for good: nothing could approve one). Approved, the promoter creates a
// code and referees bind to it; refused, it stays refused. A decided
// application is not decided again, an unknown account or decision is
// refused, and below the level the command is what an older build
// answers: an unknown type.
func TestOperatorReviewsAPendingApplication(t *testing.T) {
	review := (*tradeWorld).review
	w := newTradeWorld(t)
	pr, pk := w.account(btcBTC)
	no, nk := w.account(btcBTC)
	ref, rk := w.account(btcBTC)
	w.m.Read(func(st *State, _ uint64) { st.Genesis.Deployment = "prod" }) // as in the test above
	wantOK(t, w.growthCmd(CmdPromoterApply, pr, pk, "apply", goodApplication()))
	wantOK(t, w.growthCmd(CmdPromoterApply, no, nk, "apply", goodApplication()))

	wantRefused(t, review(w, pr, "maybe"), http.StatusBadRequest, "validation")
	wantRefused(t, review(w, ref, growth.ReviewApprove), http.StatusNotFound, "not_found")
	res := review(w, pr, growth.ReviewApprove)
	wantOK(t, res)
	var out growth.ReviewResult
	if err := res.Decode(&out); err != nil || out.Status != growth.PromoterApproved || out.AccountID != pr || out.PromoterID == "" {
		t.Fatalf("approve: %s", res.Body)
	}
	wantRefused(t, review(w, pr, growth.ReviewRefuse), http.StatusConflict, "conflict")
	wantOK(t, w.growthCmd(CmdPromoterCode, pr, pk, "pcode", growth.NewPromoterCode{Code: "APPROVED1", Label: "x", KickbackQ9: 0}))
	wantOK(t, w.bind(ref, rk, "APPROVED1"))

	wantOK(t, review(w, no, growth.ReviewRefuse))
	var prof growth.PromoterView
	w.m.Read(func(st *State, _ uint64) { prof, _ = st.Growth.PromoterOf(no) })
	if prof.Status != growth.PromoterRefused {
		t.Fatalf("refused profile %+v", prof)
	}
	wantRefused(t, w.growthCmd(CmdPromoterCode, no, nk, "pcode", growth.NewPromoterCode{Code: "REFUSED1", Label: "x", KickbackQ9: 0}),
		http.StatusForbidden, "referral_forbidden")
	wantRefused(t, w.growthCmd(CmdPromoterApply, no, nk, "apply-2", goodApplication()), http.StatusConflict, "conflict")
	wantRefused(t, review(w, no, growth.ReviewApprove), http.StatusConflict, "conflict")

	old := newTradeWorldAt(t, growth.LevelPromoterReview-1)
	op, ok := old.account(btcBTC)
	old.m.Read(func(st *State, _ uint64) { st.Genesis.Deployment = "prod" })
	wantOK(t, old.growthCmd(CmdPromoterApply, op, ok, "apply", goodApplication()))
	res = review(old, op, growth.ReviewApprove)
	wantRefused(t, res, http.StatusBadRequest, "validation")
	if !strings.Contains(string(res.Body), "unknown command type 127") {
		t.Fatalf("below the level: %s", res.Body)
	}
}

// An operator revokes an approved promoter (before, nothing could stop
// one): its codes are disabled, so no one new binds to them and its
// referees' later fills pay no kickback and no reward while they keep the
// programme's referee discount; the reward still in its holdback is
// forfeited when it comes due, the reward that vested before stays
// claimable. Only an approved promoter is revoked, once.
func TestOperatorRevokesAnApprovedPromoter(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	w := newTradeWorld(t)
	pr, pk := w.account(btcBTC)
	referee, rk := w.account(btcBTC)
	late, lk := w.account(btcBTC)
	wantOK(t, w.growthCmd(CmdPromoterApply, pr, pk, "apply", goodApplication())) // testnet approves at once
	const kick = 50_000_000
	wantOK(t, w.growthCmd(CmdPromoterCode, pr, pk, "pcode", growth.NewPromoterCode{Code: "REVOKEME", Label: "x", KickbackQ9: kick}))
	res := w.bind(referee, rk, "REVOKEME")
	wantOK(t, res)
	var bound growth.BindResult
	if err := res.Decode(&bound); err != nil || bound.ReferredBy.KickbackQ9 == nil || *bound.ReferredBy.KickbackQ9 != kick ||
		!*bound.ReferredBy.KickbackActive {
		t.Fatalf("the bind's answer does not show the kickback: %s", res.Body)
	}

	// Day 1's reward vests; day 2's is still in its holdback at the revocation.
	wantOK(t, w.order(referee, rk, mktOrder("r1", "BTC-PERP", "buy", 50_000)))
	vested := w.lastFill(referee).Referral.RewardMsat
	w.walkTo(w.ts/growth.DayMs*growth.DayMs + 2*growth.DayMs + 1)
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	wantOK(t, w.order(referee, rk, mktOrder("r2", "BTC-PERP", "sell", 50_000)))
	held := w.lastFill(referee).Referral.RewardMsat
	if vested <= 0 || held <= 0 {
		t.Fatalf("rewards before the revocation: %d vested, %d held", vested, held)
	}
	var prof growth.PromoterView
	w.m.Read(func(st *State, _ uint64) { prof, _ = st.Growth.PromoterOf(pr) })
	if int64(prof.ClaimableMsat) != vested || int64(prof.PendingHoldbackMsat) != held {
		t.Fatalf("before: %+v", prof)
	}

	wantRefused(t, w.review(referee, growth.ReviewRevoke), http.StatusNotFound, "not_found")
	res = w.review(pr, growth.ReviewRevoke)
	wantOK(t, res)
	var out growth.ReviewResult
	if err := res.Decode(&out); err != nil || out.Status != growth.PromoterRevoked || out.AccountID != pr {
		t.Fatalf("revoke: %s", res.Body)
	}
	wantRefused(t, w.review(pr, growth.ReviewRevoke), http.StatusConflict, "conflict")
	wantRefused(t, w.review(pr, growth.ReviewApprove), http.StatusConflict, "conflict")

	var codes growth.PromoterCodes
	w.m.Read(func(st *State, _ uint64) { codes = st.Growth.CodesOf(pr) })
	if len(codes.Codes) != 1 || !codes.Codes[0].Disabled {
		t.Fatalf("codes after the revocation: %+v", codes)
	}
	wantRefused(t, w.bind(late, lk, "REVOKEME"), http.StatusForbidden, "referral_forbidden")
	if rb := w.referral(referee).ReferredBy; *rb.KickbackActive || *rb.KickbackQ9 != kick || !rb.DiscountActive {
		t.Fatalf("the referee's view after the revocation: %+v", *rb)
	}
	wantRefused(t, w.growthCmd(CmdPromoterCode, pr, pk, "pcode-2", growth.NewPromoterCode{Code: "AGAIN1", Label: "x", KickbackQ9: 0}),
		http.StatusForbidden, "referral_forbidden")

	payable := w.balance(growth.PromoterPayable)
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	wantOK(t, w.order(referee, rk, mktOrder("r3", "BTC-PERP", "buy", 50_000)))
	f := w.lastFill(referee)
	r := f.Referral
	discount := r.GrossFeeMsat * growth.DefaultPolicy().RefereeDiscountQ9 / 1e9
	if r.DiscountMsat != discount || r.RewardMsat != 0 || f.FeeMsat != r.GrossFeeMsat-discount || w.balance(growth.PromoterPayable) != payable {
		t.Fatalf("a fill after the revocation: %+v fee %d, want the discount %d alone and no reward", *r, f.FeeMsat, discount)
	}

	w.walkTo(f.TsMs/growth.DayMs*growth.DayMs + 2*growth.DayMs + 1)
	w.m.Read(func(st *State, _ uint64) { prof, _ = st.Growth.PromoterOf(pr) })
	if prof.Status != growth.PromoterRevoked || int64(prof.ForfeitedMsat) != held || int64(prof.ClaimableMsat) != vested ||
		prof.PendingHoldbackMsat != 0 || w.balance(growth.PromoterPayable) != vested {
		t.Fatalf("after the holdback: %+v, payable %d", prof, w.balance(growth.PromoterPayable))
	}
	free := w.balance(ledger.Free(pr))
	wantOK(t, w.growthCmd(CmdPromoterClaim, pr, pk, "pclaim", struct{}{}))
	if got := w.balance(ledger.Free(pr)) - free; got != vested || w.balance(growth.PromoterPayable) != 0 {
		t.Fatalf("claimed %d, want the vested %d", got, vested)
	}

	// A pending application is refused, not revoked.
	w.m.Read(func(st *State, _ uint64) { st.Genesis.Deployment = "prod" })
	wantOK(t, w.growthCmd(CmdPromoterApply, late, lk, "apply", goodApplication()))
	res = w.review(late, growth.ReviewRevoke)
	wantRefused(t, res, http.StatusConflict, "conflict")
	if !strings.Contains(string(res.Body), "refuse it instead") {
		t.Fatalf("revoking a pending application: %s", res.Body)
	}
}

// A referee of a promoter code sees the kickback it is paid beside the
// programme's discount (before, GET /v1/referral showed discountQ9 alone:
// 10% where a 5% kickback made the fill 14.5% cheaper). A bind's stored
// answer shows it from the level on, so an older replica stores the
// same answer below it; the read shows it at every level.
func TestRefereeSeesItsKickback(t *testing.T) {
	for _, level := range []uint32{growth.LevelReferredByKickback, growth.LevelReferredByKickback - 1} {
		w := newTradeWorldAt(t, level)
		pr, pk := w.account(btcBTC)
		referee, rk := w.account(btcBTC)
		plain, plk := w.account(btcBTC)
		friend, fk := w.account(btcBTC)
		wantOK(t, w.growthCmd(CmdPromoterApply, pr, pk, "apply", goodApplication()))
		const kick = 50_000_000
		wantOK(t, w.growthCmd(CmdPromoterCode, pr, pk, "pcode", growth.NewPromoterCode{Code: "KICK5", Label: "x", KickbackQ9: kick}))
		res := w.bind(referee, rk, "KICK5")
		wantOK(t, res)
		if got := strings.Contains(string(res.Body), "kickbackQ9"); got != (level >= growth.LevelReferredByKickback) {
			t.Fatalf("level %d: the bind's answer %s", level, res.Body)
		}
		rb := w.referral(referee).ReferredBy
		if rb.KickbackQ9 == nil || *rb.KickbackQ9 != kick || !*rb.KickbackActive || int64(*rb.KickbackExpiresTsMs) != int64(rb.BoundTsMs)+growth.DefaultPolicy().RewardWindowMs {
			t.Fatalf("level %d: the referee's view %+v", level, *rb)
		}
		// The fill pays what the view says: discount, then kickback on the net fee.
		wantOK(t, w.order(referee, rk, mktOrder("k1", "BTC-PERP", "buy", 50_000)))
		r := w.lastFill(referee).Referral
		discount := r.GrossFeeMsat * int64(rb.DiscountQ9) / 1e9
		if want := discount + (r.GrossFeeMsat-discount)*int64(*rb.KickbackQ9)/1e9; r.DiscountMsat != want {
			t.Fatalf("level %d: the fill paid back %d, the view promises %d", level, r.DiscountMsat, want)
		}
		// A referral code has no kickback.
		wantOK(t, w.createCode(friend, fk, "FRIEND1"))
		wantOK(t, w.bind(plain, plk, "FRIEND1"))
		if rb := w.referral(plain).ReferredBy; *rb.KickbackQ9 != 0 || *rb.KickbackActive {
			t.Fatalf("level %d: a referral code's referee %+v", level, *rb)
		}
	}
}
