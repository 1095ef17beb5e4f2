package httpapi

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// TestContractMathMatchesTheVenue recomputes fills, margins, PnL and
// liquidation prices from the formulas /llms-full.txt states (contractMath),
// written here again with math/big, and holds the running venue's figures
// to them: the text is what an agent checks its fills with, so a formula
// that drifts from the code must fail here.
func TestContractMathMatchesTheVenue(t *testing.T) {
	a := newTestAPI(t)
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	// The text states the formulas this test applies below.
	doc := string(a.do(req{method: "GET", path: "/llms-full.txt"}).body)
	for _, formula := range []string{"## Contract math",
		"impactQ9 = ceil(5000000 * (2*side*netOI + n) / (2*cap))", "cap = 100 * maxOrderContracts",
		"a buy at ceil(mid*(1e9+spreadQ9) / (1e9*tick)) * tick, a sell at floor(mid*(1e9-spreadQ9) / (1e9*tick)) * tick",
		"n contracts at P are worth n*1e19/P msat", "n contracts at P are worth n*P*k/1e8 msat",
		"that value at the execution price, rounded up", "Taker fee = ceil(notional * takerFeeQ9 / 1e9)",
		"Initial margin = ceil(notional * rate / 1e9), rate = max(imRateQ9, ceil(1e9 / leverage))",
		"inverse side*n*1e19*(X-E) / (E*X), quanto side*n*(X-E)*k / 1e8; rounded down",
		"floor(M * n / contracts)", "impactMsat reports floor(value at mid * impactQ9 / 1e9)",
		"inverse long n*1e19*E*(1e9+mm) / (1e9*(M*E + n*1e19))", "quanto short 1e9*(n*E*k + M*1e8) / (n*k*(1e9+mm))",
		"rounded down for a long (due at a mid at or below it), up for a short",
		"rate = skewQ9 * 100000 / 1e9", "held within a cap per market (50000 on the shipped markets"} {
		if !strings.Contains(doc, formula) {
			t.Errorf("llms-full.txt does not state %q", formula)
		}
	}
	params := func(id string) map[string]any { return a.do(req{method: "GET", path: "/v1/markets/" + id}).json(t) }
	fill := func(idem string) map[string]any {
		page := a.do(req{method: "GET", path: "/v1/fills?limit=1", key: key}).json(t)
		f := page["fills"].([]any)[0].(map[string]any)
		if f["orderId"] != idem {
			t.Fatalf("newest fill is of %v, want %s", f["orderId"], idem)
		}
		return f
	}
	place := func(idem, mkt, side, contracts, leverage string) map[string]any {
		r := a.do(req{method: "POST", path: "/v1/orders", key: key, idem: idem,
			body: orderBody(mkt, side, "market", contracts, map[string]any{"leverage": leverage})})
		if r.status != 201 || r.json(t)["status"] != "filled" {
			t.Fatalf("%s: %d %s", idem, r.status, r.body)
		}
		return fill(idem)
	}
	position := func(mkt string) map[string]any {
		var list []map[string]any
		if err := json.Unmarshal(a.do(req{method: "GET", path: "/v1/positions", key: key}).body, &list); err != nil {
			t.Fatal(err)
		}
		for _, p := range list {
			if p["marketId"] == mkt {
				return p
			}
		}
		t.Fatalf("no %s position", mkt)
		return nil
	}
	want := func(what string, got any, w *big.Int) {
		t.Helper()
		if got != w.String() {
			t.Errorf("%s: the venue says %v, the documented formula %s", what, got, w)
		}
	}

	// An inverse buy opening 1000 contracts at 10x on a book without open
	// interest, then a sell closing 400 of them.
	btc := params("BTC-PERP")
	f := place("math-1", "BTC-PERP", "buy", "1000", "10")
	n := mI(1000)
	mid := num(t, f["oracle"].(map[string]any)["midQ8"])
	capC := mMul(num(t, btc["maxOrderContracts"]), mI(trade.OICapOrders))
	impact := mCeil(mMul(mI(trade.ImpactAtCapQ9), n), mMul(mI(2), capC)) // netOI 0
	spread := mAdd(num(t, btc["baseSpreadQ9"]), impact)
	want("spreadQ9", f["spreadQ9"], spread)
	tick := num(t, btc["tickSizeQ8"])
	exec := mMul(mCeil(mMul(mid, mAdd(mI(1e9), spread)), mMul(mI(1e9), tick)), tick)
	want("execPriceQ8", f["execPriceQ8"], exec)
	notional := mCeil(mMul(n, e19), exec)
	want("tradeNotionalMsat", f["tradeNotionalMsat"], notional)
	want("feeMsat", f["feeMsat"], mCeil(mMul(notional, num(t, btc["takerFeeQ9"])), mI(1e9)))
	want("impactMsat", f["impactMsat"], mFloor(mMul(mMul(n, e19), impact), mMul(mid, mI(1e9))))
	rate := mMax(num(t, btc["imRateQ9"]), mCeil(mI(1e9), mI(10)))
	margin := mCeil(mMul(notional, rate), mI(1e9))
	pos := position("BTC-PERP")
	want("marginMsat", pos["marginMsat"], margin)
	want("entryPriceQ8", pos["entryPriceQ8"], exec)
	mm := num(t, btc["mmRateQ9"])
	nv := mMul(n, e19)
	liq := mFloor(mMul(mMul(nv, exec), mAdd(mI(1e9), mm)), mMul(mI(1e9), mAdd(mMul(margin, exec), nv)))
	want("liquidationPriceQ8 (inverse long)", pos["liquidationPriceQ8"], liq)

	g := place("math-2", "BTC-PERP", "sell", "400", "10")
	x := num(t, g["execPriceQ8"])
	want("spreadQ9 of a skew-reducing sell", g["spreadQ9"], num(t, btc["baseSpreadQ9"]))
	want("execPriceQ8 of the sell", g["execPriceQ8"],
		mMul(mFloor(mMul(num(t, g["oracle"].(map[string]any)["midQ8"]), mSub(mI(1e9), num(t, btc["baseSpreadQ9"]))), mMul(mI(1e9), tick)), tick))
	want("realizedPnlMsat (inverse long)", g["realizedPnlMsat"], mFloor(mMul(mMul(mI(400), e19), mSub(x, exec)), mMul(exec, x)))
	want("releasedMarginMsat", g["releasedMarginMsat"], mFloor(mMul(margin, mI(400)), n))

	// A quanto sell opening 100 contracts at 5x.
	eth := params("ETH-PERP")
	h := place("math-3", "ETH-PERP", "sell", "100", "5")
	n, k := mI(100), num(t, eth["quantoMultiplierMsat"])
	mid = num(t, h["oracle"].(map[string]any)["midQ8"])
	capC = mMul(num(t, eth["maxOrderContracts"]), mI(trade.OICapOrders))
	spread = mAdd(num(t, eth["baseSpreadQ9"]), mCeil(mMul(mI(trade.ImpactAtCapQ9), n), mMul(mI(2), capC)))
	tick = num(t, eth["tickSizeQ8"])
	exec = mMul(mFloor(mMul(mid, mSub(mI(1e9), spread)), mMul(mI(1e9), tick)), tick)
	want("execPriceQ8 (quanto sell)", h["execPriceQ8"], exec)
	notional = mCeil(mMul(mMul(n, exec), k), mI(1e8))
	want("tradeNotionalMsat (quanto)", h["tradeNotionalMsat"], notional)
	want("feeMsat (quanto)", h["feeMsat"], mCeil(mMul(notional, num(t, eth["takerFeeQ9"])), mI(1e9)))
	margin = mCeil(mMul(notional, mMax(num(t, eth["imRateQ9"]), mCeil(mI(1e9), mI(5)))), mI(1e9))
	pos = position("ETH-PERP")
	want("marginMsat (quanto)", pos["marginMsat"], margin)
	mm = num(t, eth["mmRateQ9"])
	liq = mCeil(mMul(mI(1e9), mAdd(mMul(mMul(n, exec), k), mMul(margin, mI(1e8)))), mMul(mMul(n, k), mAdd(mI(1e9), mm)))
	want("liquidationPriceQ8 (quanto short)", pos["liquidationPriceQ8"], liq)

	// The funding rate the market shows follows the documented skew rule:
	// a book of shorts only has skew -1e9, so -1e5 held within the cap.
	eth = params("ETH-PERP")
	want("skewQ9 (shorts only)", eth["skewQ9"], mI(-1e9))
	want("fundingRateHourlyQ9 (shorts only)", eth["fundingRateHourlyQ9"], mMax(mI(-market.DefaultFundingCapQ9), mI(-market.FundingSkewCoefQ9)))
}

var e19 = new(big.Int).Exp(big.NewInt(10), big.NewInt(19), nil)

func mI(v int64) *big.Int         { return big.NewInt(v) }
func mAdd(a, b *big.Int) *big.Int { return new(big.Int).Add(a, b) }
func mSub(a, b *big.Int) *big.Int { return new(big.Int).Sub(a, b) }
func mMul(a, b *big.Int) *big.Int { return new(big.Int).Mul(a, b) }
func mNeg(a *big.Int) *big.Int    { return new(big.Int).Neg(a) }

// mFloor is floor(a/b) for b > 0 (DivMod's Euclidean quotient).
func mFloor(a, b *big.Int) *big.Int {
	q, _ := new(big.Int).DivMod(a, b, new(big.Int))
	return q
}
func mCeil(a, b *big.Int) *big.Int { return mNeg(mFloor(mNeg(a), b)) }
func mMax(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

// num reads a decimal string field.
func num(t *testing.T, v any) *big.Int {
	t.Helper()
	s, ok := v.(string)
	n, ok2 := new(big.Int).SetString(s, 10)
	if !ok || !ok2 {
		t.Fatalf("not a decimal string: %v", v)
	}
	return n
}
