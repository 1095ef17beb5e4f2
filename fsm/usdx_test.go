package fsm

import (
	"encoding/json"
	"fmt"
	mbig "math/big"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// usdxWorld is a trading world (default markets, fresh prints, funded
// accounts; the machine checks every domain's invariants, USDx's backing
// identity and conservation included, after every entry).
type usdxWorld struct {
	*tradeWorld
	ids int
}

func newUSDxWorld(t *testing.T) *usdxWorld { return &usdxWorld{tradeWorld: newTradeWorld(t)} }

func (w *usdxWorld) id(prefix string) string {
	w.ids++
	return fmt.Sprintf("%s%d", prefix, w.ids)
}

// cmd proposes a client command of acct under idempotency key idem.
func (w *usdxWorld) cmd(acct, key string, t CmdType, payload any, idem string) *Result {
	w.t.Helper()
	c := mustCommand(w.t, t, 0, payload)
	c.Account, c.KeyID = acct, key
	if idem == "" {
		idem = w.id("auto")
	}
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+idem, []byte(fmt.Sprintf("%d %+v", t, payload))
	return w.at(c)
}

func (w *usdxWorld) op(t CmdType, payload any) *Result {
	w.t.Helper()
	c := mustCommand(w.t, t, 0, payload)
	c.IdemKey, c.ReqHash = w.id("op"), []byte("op")
	return w.at(c)
}

func (w *usdxWorld) quote(acct, key, side string, n int64) (*Result, usdx.QuoteView) {
	w.t.Helper()
	res := w.cmd(acct, key, CmdUSDxQuote, USDxQuotePayload{QuoteID: w.id("q"), Side: side, Usdx: n}, "")
	var v usdx.QuoteView
	if res.OK() {
		if err := res.Decode(&v); err != nil {
			w.t.Fatal(err)
		}
	}
	return res, v
}

func (w *usdxWorld) mint(acct, key, quoteID string) (*Result, usdx.SagaView) {
	w.t.Helper()
	// The request hash covers the client's body ({quoteId}), not the
	// fresh id the node draws.
	c := mustCommand(w.t, CmdUSDxMint, 0, USDxMintPayload{QuoteID: quoteID, FreshQuoteID: w.id("fq")})
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+quoteID, []byte("mint "+quoteID)
	res := w.at(c)
	var v usdx.SagaView
	if res.Status == http.StatusCreated {
		if err := res.Decode(&v); err != nil {
			w.t.Fatal(err)
		}
	}
	return res, v
}

// mintN quotes and mints n USDx for acct.
func (w *usdxWorld) mintN(acct, key string, n int64) usdx.SagaView {
	w.t.Helper()
	res, q := w.quote(acct, key, usdx.SideMint, n)
	wantOK(w.t, res)
	res, s := w.mint(acct, key, q.QuoteID)
	wantOK(w.t, res)
	return s
}

func (w *usdxWorld) st() (out struct {
	u     usdx.State
	hedge int64
}) {
	w.m.Read(func(st *State, _ uint64) {
		out.u = *st.USDx
		out.hedge = st.Trade.Position(usdx.HedgeAccount, usdx.HedgeMarket).Contracts
	})
	return out
}

func (w *usdxWorld) holder(acct string) usdx.Holder {
	var h usdx.Holder
	w.m.Read(func(st *State, _ uint64) { h = st.USDx.Holder(acct) })
	return h
}

func (w *usdxWorld) public() usdx.PublicView {
	var v usdx.PublicView
	w.m.Read(func(st *State, _ uint64) {
		c := &Ctx{St: st}
		v = st.USDx.Public(c.usdxEnv())
	})
	return v
}

func (w *usdxWorld) params(p USDxParamsPayload) {
	w.t.Helper()
	wantOK(w.t, w.op(CmdUSDxParams, p))
}

func i64(v int64) *int64 { return &v }

// balancedBy opens an organic long of n contracts in BTC-PERP, so the
// hedge's short does not make the whole skew (and its funding).
func (w *usdxWorld) balancedBy(n int64) {
	w.t.Helper()
	a, k := w.account(btcBTC)
	wantOK(w.t, w.order(a, k, mktOrder(w.id("long"), "BTC-PERP", "buy", n)))
}

func body(t *testing.T, res *Result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(res.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUSDxMintDebitsSatsOpensTheHedgeAndCreditsInOneEntry(t *testing.T) {
	w := newUSDxWorld(t)
	acct, key := w.account(btcBTC)
	res, q := w.quote(acct, key, usdx.SideMint, 100)
	wantOK(t, res)
	if res.Status != http.StatusCreated || q.Usdx != "100" || int64(q.Contracts) != 100 {
		t.Fatalf("quote %d %s", res.Status, res.Body)
	}
	// The sats are the hedge's margin at leverage 1 (its notional at the
	// sell price, rounded up), its taker fee, the base fee (0.1% of the
	// notional, rounded up) and the dynamic fee (0 at 0.001% utilisation).
	if q.PriceQ8 >= wire.Int(usdQ8(100_000)) || q.DynFeeMsat != 0 {
		t.Fatalf("quote %s", res.Body)
	}
	num := new(mbig.Int).Mul(mbig.NewInt(100), new(mbig.Int).SetUint64(10_000_000_000_000_000_000))
	num.Add(num, mbig.NewInt(int64(q.PriceQ8)-1))
	notional := num.Quo(num, mbig.NewInt(int64(q.PriceQ8))).Int64()
	taker := (notional*500_000 + 999_999_999) / 1_000_000_000
	base := (notional*1_000_000 + 999_999_999) / 1_000_000_000
	if int64(q.SatsMsat) != notional+taker+base || int64(q.FeeMsat) != taker+base {
		t.Fatalf("quote %s, want notional %d taker %d base %d", res.Body, notional, taker, base)
	}
	free0 := w.balance(ledger.Free(acct))
	fees0 := w.balance(ledger.FeeRevenue)
	entry := w.next
	res, s := w.mint(acct, key, q.QuoteID)
	if res.Status != http.StatusCreated || s.State != usdx.SagaMinted || s.SagaID != q.QuoteID {
		t.Fatalf("mint %d %s", res.Status, res.Body)
	}
	if w.next != entry+1 {
		t.Fatal("a mint is one entry")
	}
	if got := free0 - w.balance(ledger.Free(acct)); got != int64(q.SatsMsat) {
		t.Fatalf("debited %d, quoted %d", got, q.SatsMsat)
	}
	if w.balance(usdx.Reserve) != base || w.balance(ledger.FeeRevenue)-fees0 != taker {
		t.Fatalf("reserve %d fees %d", w.balance(usdx.Reserve), w.balance(ledger.FeeRevenue)-fees0)
	}
	if got := w.balance(ledger.Margin(usdx.HedgeAccount, usdx.HedgeMarket)); got != notional {
		t.Fatalf("hedge margin %d", got)
	}
	st := w.st()
	if st.u.Supply != 100 || st.hedge != 100 || w.holder(acct).Usdx != 100 {
		t.Fatalf("supply %d hedge %d holder %d", st.u.Supply, st.hedge, w.holder(acct).Usdx)
	}
	pv := w.public()
	if !pv.BackingIdentityHolds || pv.Supply != "100" || pv.Hedge.Contracts != 100 || pv.MintedLastHour != "100" {
		t.Fatalf("public %+v", pv)
	}
	// The hedge is a real short in the book: the market's short OI.
	if p := w.position(usdx.HedgeAccount, usdx.HedgeMarket); p.Side != -1 || p.EntryQ8 != int64(q.PriceQ8) {
		t.Fatalf("hedge position %+v", p)
	}
	// A retry under the same key (the quote id) answers the same saga and
	// changes nothing.
	res2, s2 := w.mint(acct, key, q.QuoteID)
	if res2.Status != http.StatusCreated || s2 != s || w.st().u.Supply != 100 {
		t.Fatalf("retry %d %s", res2.Status, res2.Body)
	}
}

func TestUSDxRequoteAndExpiry(t *testing.T) {
	w := newUSDxWorld(t)
	acct, key := w.account(btcBTC)
	_, q := w.quote(acct, key, usdx.SideMint, 10)
	// 0.1% move: within the 0.2% tolerance; mints at the new price.
	wantOK(t, w.print("BTCUSD", usdQ8(100_100)))
	res, s := w.mint(acct, key, q.QuoteID)
	wantOK(t, res)
	if s.Usdx != "10" {
		t.Fatal(s)
	}
	_, q = w.quote(acct, key, usdx.SideMint, 10)
	wantOK(t, w.print("BTCUSD", usdQ8(101_000))) // 0.9%: beyond
	res, _ = w.mint(acct, key, q.QuoteID)
	if res.Status != http.StatusConflict {
		t.Fatalf("requote: %d %s", res.Status, res.Body)
	}
	b := body(t, res)
	fresh, _ := b["quote"].(map[string]any)
	if b["code"] != wire.CodeUSDxRequote || fresh == nil || fresh["priceQ8"] == q.PriceQ8 {
		t.Fatalf("requote body %s", res.Body)
	}
	if w.st().u.Supply != 10 {
		t.Fatal("a requote mints nothing")
	}
	// The old quote is gone; the fresh one mints.
	if res, _ := w.mint(acct, key, q.QuoteID+"x"); res.Status != http.StatusNotFound {
		t.Fatalf("%d", res.Status)
	}
	res, s = w.mint(acct, key, fresh["quoteId"].(string))
	wantOK(t, res)
	if w.st().u.Supply != 20 {
		t.Fatal(w.st().u.Supply)
	}
	// Expiry: the quote lapses after quoteTtlMs (30 s).
	_, q = w.quote(acct, key, usdx.SideMint, 10)
	w.ts += 30_000
	wantOK(t, w.print("BTCUSD", usdQ8(101_000)))
	res, _ = w.mint(acct, key, q.QuoteID)
	wantRefused(t, res, http.StatusConflict, wire.CodeUSDxQuoteExpired)
	if w.st().u.Supply != 20 {
		t.Fatal("an expired quote mints nothing")
	}
}

func TestUSDxCapacityLimitsEachBindInTurn(t *testing.T) {
	w := newUSDxWorld(t)
	acct, key := w.account(10 * btcBTC)
	w.mintN(acct, key, 1000)
	cases := []struct {
		limit string
		p     USDxParamsPayload
	}{
		{"hard_cap", USDxParamsPayload{HardCap: i64(1500)}},
		{"velocity", USDxParamsPayload{MintVelocityFloor: i64(1400)}}, // 1000 minted this hour: 400 left
		{"organic_oi", USDxParamsPayload{OrganicFloor: i64(1300)}},
		{"skew", USDxParamsPayload{SkewFloor: i64(1200), MaxSkewQ9: i64(0)}}, // net short 1000 already
	}
	for i, c := range cases {
		w.params(c.p)
		pv := w.public()
		if *pv.Capacity.Limit != c.limit {
			t.Fatalf("case %d: binding %v, want %s (%v)", i, *pv.Capacity.Limit, c.limit, pv.Capacity.PerLimit)
		}
		head := *pv.Capacity.Headroom
		res, _ := w.quote(acct, key, usdx.SideMint, 1000)
		wantRefused(t, res, http.StatusConflict, wire.CodeUSDxCapacity)
		b := body(t, res)
		if b["limit"] != c.limit || b["headroom"] != head || b["reason"] != "capacity" {
			t.Fatalf("case %d: body %s, want limit %s headroom %s", i, res.Body, c.limit, head)
		}
	}
	// oi_cap: the market's short open-interest cap.
	mx := int64(1000)
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", MaxOrderContracts: &mx}) // OI cap 100,000; position limit 10,000
	w.params(USDxParamsPayload{HardCap: i64(1 << 40), MintVelocityFloor: i64(1 << 40), OrganicFloor: i64(1 << 40), SkewFloor: i64(1 << 40)})
	pv := w.public()
	if *pv.Capacity.Limit != "oi_cap" || *pv.Capacity.Headroom != "9000" {
		t.Fatalf("oi_cap: %+v", pv.Capacity)
	}
	for i := 0; i < 8; i++ {
		w.mintN(acct, key, 1000)
	}
	w.mintN(acct, key, 500) // hedge 9,500 of a 10,000 position limit
	res, _ := w.quote(acct, key, usdx.SideMint, 1000)
	wantRefused(t, res, http.StatusConflict, wire.CodeUSDxCapacity)
	if b := body(t, res); b["limit"] != "oi_cap" || b["headroom"] != "500" {
		t.Fatalf("%s", res.Body)
	}
}

func TestUSDxHaltScope(t *testing.T) {
	w := newUSDxWorld(t)
	acct, key := w.account(btcBTC)
	w.mintN(acct, key, 300)
	w.balancedBy(280) // no funding flows: the skew stays near 0
	wantOK(t, w.cmd(acct, key, CmdUSDxStake, USDxAmountPayload{Amount: 100}, ""))
	wantOK(t, w.cmd(acct, key, CmdUSDxUnstake, USDxAmountPayload{Amount: 50}, ""))
	wantOK(t, w.op(CmdUSDxHalt, USDxHaltPayload{Halt: true, Reason: "maintenance"}))
	pv := w.public()
	if !pv.MintsHalted || *pv.MintsHaltedReason != "maintenance" {
		t.Fatal("not halted")
	}
	res, _ := w.quote(acct, key, usdx.SideMint, 10)
	wantRefused(t, res, http.StatusConflict, wire.CodeUSDxMintsHalted)
	wantRefused(t, w.cmd(acct, key, CmdUSDxStake, USDxAmountPayload{Amount: 10}, ""), http.StatusConflict, wire.CodeUSDxMintsHalted)
	// Redemptions, unstakes, releases and withdrawals carry on.
	wantOK(t, w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: "r1", Amount: 20}, ""))
	wantOK(t, w.cmd(acct, key, CmdUSDxUnstake, USDxAmountPayload{Amount: 10}, ""))
	wantOK(t, w.cmd(acct, key, CmdUSDxWithdraw, USDxWithdrawPayload{ID: "w1", Usdx: 5, SparkAddress: "sprt1abcdefgh"}, ""))
	w.walkTo(w.ts + 3_700_000)
	if h := w.holder(acct); h.Susdx != 40 || h.Usdx != 300-100-20-5+60 {
		t.Fatalf("after release under halt: %+v", h)
	}
	if w.st().u.Supply != 280 {
		t.Fatal("supply changes while halted: redemptions")
	}
	wantOK(t, w.op(CmdUSDxHalt, USDxHaltPayload{Halt: false}))
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	res, _ = w.quote(acct, key, usdx.SideMint, 10)
	wantOK(t, res)
}

func TestUSDxAttestationHaltNeedsOperatorResume(t *testing.T) {
	w := newUSDxWorld(t)
	acct, key := w.account(btcBTC)
	w.mintN(acct, key, 100)
	bad := USDxAttestPayload{AsOfTsMs: w.ts, IssuerSupply: 99, IssuerIssued: 99, IssuerCustody: 99}
	wantOK(t, w.op(CmdUSDxAttest, bad))
	pv := w.public()
	if !pv.MintsHalted || *pv.MintsHaltedReason != "attestation_failed" || pv.LastAttestation.OK {
		t.Fatalf("%+v", pv)
	}
	wantRefused(t, w.op(CmdUSDxHalt, USDxHaltPayload{Halt: false}), http.StatusConflict, wire.CodeConflict)
	good := USDxAttestPayload{AsOfTsMs: w.ts, IssuerSupply: 100, IssuerIssued: 100, IssuerCustody: 100}
	wantOK(t, w.op(CmdUSDxAttest, good))
	if pv := w.public(); !pv.MintsHalted || !pv.LastAttestation.OK {
		t.Fatal("a passing attestation must not resume by itself")
	}
	wantOK(t, w.op(CmdUSDxHalt, USDxHaltPayload{Halt: false}))
	if w.public().MintsHalted {
		t.Fatal("operator resume")
	}
}

func TestUSDxRedemptionQueuesOnAStaleOracleAndPaysAtTheNextPrint(t *testing.T) {
	w := newUSDxWorld(t)
	acct, key := w.account(btcBTC)
	w.mintN(acct, key, 100)
	free0 := w.balance(ledger.Free(acct))
	w.ts += 120_000 // the BTC print goes stale
	res := w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: "red1", Amount: 40}, "")
	var s usdx.SagaView
	_ = res.Decode(&s)
	if res.Status != http.StatusCreated || s.State != usdx.SagaQueued || s.QueuedReason == nil || *s.QueuedReason != "oracle_stale" {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	if h := w.holder(acct); h.Usdx != 60 || h.Pending != 40 || w.st().u.Supply != 100 {
		t.Fatalf("%+v", h)
	}
	wantOK(t, w.print("BTCUSD", usdQ8(80_000)))
	if h := w.holder(acct); h.Usdx != 60 || h.Pending != 0 || w.st().u.Supply != 60 || w.st().hedge != 60 {
		t.Fatalf("after print %+v", h)
	}
	// Paid at the fresh price: 40 dollars at about 80,016 (buy side), less
	// fees, is about 4.99e7 msat; at the old price it would be 4.0e7.
	got := w.balance(ledger.Free(acct)) - free0
	if got < 49_800_000 || got > 50_000_000 {
		t.Fatalf("paid %d msat", got)
	}
}

func TestUSDxStakeUnstakeAtTheSharePrice(t *testing.T) {
	w := newUSDxWorld(t)
	a, ka := w.account(btcBTC)
	w.mintN(a, ka, 1000)
	w.balancedBy(1000)
	res := w.cmd(a, ka, CmdUSDxStake, USDxAmountPayload{Amount: 500}, "")
	var sr usdx.StakeResult
	_ = res.Decode(&sr)
	if sr.Susdx != "500" || sr.SharePriceQ9 != 1_000_000_000 {
		t.Fatalf("%s", res.Body)
	}
	// Lift the pool by a markdown-free route: stakers' yield. Simulated
	// directly through the state's arithmetic: price = staked/shares.
	if p := usdx.SharePriceQ9(750, 500); p != 1_500_000_000 {
		t.Fatal(p)
	}
	if n := int64(0); usdx.SharePriceQ9(0, n) != 1_000_000_000 {
		t.Fatal("empty pool price is 1")
	}
	res = w.cmd(a, ka, CmdUSDxUnstake, USDxAmountPayload{Amount: 200}, "")
	var uv usdx.UnstakeView
	_ = res.Decode(&uv)
	if uv.State != "cooling" || int64(uv.ReleaseAtMs) != w.ts+3_600_000 {
		t.Fatalf("%s", res.Body)
	}
	if h := w.holder(a); h.Susdx != 300 || h.Usdx != 500 {
		t.Fatalf("%+v", h)
	}
	w.walkTo(int64(uv.ReleaseAtMs) - 2000)
	if w.holder(a).Usdx != 500 {
		t.Fatal("released early")
	}
	w.walkTo(int64(uv.ReleaseAtMs) + 1000)
	if h := w.holder(a); h.Usdx != 700 || w.st().u.Staked != 300 || w.st().u.SusdxSupply != 300 {
		t.Fatalf("%+v", h)
	}
	wantRefused(t, w.cmd(a, ka, CmdUSDxUnstake, USDxAmountPayload{Amount: 301}, ""), http.StatusBadRequest, wire.CodeInsufficientBalance)
}

// The hedge trades within the market's order sizes: a mint below
// minOrderContracts is dust, and a queued redemption that the market no
// longer takes is handed back when the price returns (never a panic).
func TestUSDxFollowsTheMarketsOrderSizes(t *testing.T) {
	w := newUSDxWorld(t)
	acct, key := w.account(btcBTC)
	w.mintN(acct, key, 100)
	w.ts += 120_000 // stale
	wantOK(t, w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: "small", Amount: 5}, ""))
	mn := int64(10)
	w.setMarket(MarketSetPayload{MarketID: "BTC-PERP", MinOrderContracts: &mn})
	res, _ := w.quote(acct, key, usdx.SideMint, 5)
	wantRefused(t, res, http.StatusConflict, wire.CodeUSDxOracleStale)
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	if h := w.holder(acct); h.Usdx != 100 || h.Pending != 0 || w.st().u.Supply != 100 {
		t.Fatalf("queued redemption below the market's minimum: %+v", h)
	}
	res, _ = w.quote(acct, key, usdx.SideMint, 5)
	wantRefused(t, res, http.StatusConflict, wire.CodeUSDxDust)
	wantRefused(t, w.cmd(acct, key, CmdUSDxRedeem, USDxAmountPayload{ID: "small2", Amount: 5}, ""), http.StatusConflict, wire.CodeUSDxDust)
}

// Token deposits credit the account once per issuer ref, and only tokens
// outside custody can arrive.
func TestUSDxTokenDepositsComeFromOutsideCustodyOnce(t *testing.T) {
	w := newUSDxWorld(t)
	a, k := w.account(btcBTC)
	b, _ := w.account(0)
	w.mintN(a, k, 10)
	wantRefused(t, w.op(CmdUSDxDeposited, USDxDepositedPayload{AccountID: b, Usdx: 1, IssuerRef: "d0"}), http.StatusBadRequest, wire.CodeValidation)
	wantOK(t, w.cmd(a, k, CmdUSDxWithdraw, USDxWithdrawPayload{ID: "w1", Usdx: 4, SparkAddress: "sprt1abcdefgh"}, ""))
	wantRefused(t, w.op(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: "nope"}), http.StatusNotFound, wire.CodeNotFound)
	wantOK(t, w.op(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: "w1", IssuerRef: "iss"}))
	wantRefused(t, w.op(CmdUSDxWithdrawalPaid, USDxWithdrawalPaidPayload{WithdrawalID: "w1", IssuerRef: "iss"}), http.StatusConflict, wire.CodeConflict)
	if st := w.st(); st.u.Outside != 4 || st.u.Supply != 10 || st.u.LedgerCustody() != 6 {
		t.Fatalf("outside %d supply %d", st.u.Outside, st.u.Supply)
	}
	wantRefused(t, w.op(CmdUSDxDeposited, USDxDepositedPayload{AccountID: b, Usdx: 5, IssuerRef: "d1"}), http.StatusBadRequest, wire.CodeValidation)
	wantOK(t, w.op(CmdUSDxDeposited, USDxDepositedPayload{AccountID: b, Usdx: 3, IssuerRef: "d1"}))
	wantRefused(t, w.op(CmdUSDxDeposited, USDxDepositedPayload{AccountID: b, Usdx: 1, IssuerRef: "d1"}), http.StatusConflict, wire.CodeConflict)
	wantRefused(t, w.op(CmdUSDxDeposited, USDxDepositedPayload{AccountID: "acc_nobody", Usdx: 1, IssuerRef: "d2"}), http.StatusNotFound, wire.CodeNotFound)
	if h := w.holder(b); h.Usdx != 3 || w.st().u.Outside != 1 {
		t.Fatalf("%+v", h)
	}
}
