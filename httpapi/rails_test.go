package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
	"github.com/perpd/perpd/node/rail/railtest"
)

// railAPI is the test API with the rail wired as `perpd serve` wires it:
// one simulated rail behind the API and the leader's payout driver.
type railAPI struct {
	*testAPI
	rail *rail.SimRail
}

func newRailAPI(t *testing.T) *railAPI {
	t.Helper()
	return newRailAPIWith(t, nil)
}

// newRailAPIWith is newRailAPI with the payout driver and the API on
// wrap(sim) instead of the simulated rail itself (nil wrap: the simulated
// rail). The simulation keeps its own payout book, so Book().Executed()
// counts this test's payouts only.
func newRailAPIWith(t *testing.T, wrap func(*rail.SimRail) rail.Rail) *railAPI {
	t.Helper()
	key, err := rail.NodeKeyFromSecret("test-token") // the fixture's AdminToken
	if err != nil {
		t.Fatal(err)
	}
	sim, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: key, Book: rail.NewSimBook()})
	if err != nil {
		t.Fatal(err)
	}
	var r rail.Rail = sim
	if wrap != nil {
		r = wrap(sim)
	}
	a := newDrivenTestAPI(t, []Option{WithRail(r), WithBudgets(withdrawHeavyBudgets())}, []func(*node.Node){node.RailDriver(r)})
	return &railAPI{testAPI: a, rail: sim}
}

// withdrawHeavyBudgets lifts the withdraw budget, so that one test can
// walk many refusals with one key; the budget itself is tested in
// meter_test.go.
func withdrawHeavyBudgets() map[string]Budget {
	b := map[string]Budget{}
	for k, v := range Budgets {
		b[k] = v
	}
	b["withdraw"] = Budget{Name: "withdraw", PerKeyPerMin: 6000, KeyBurst: 1000, PerAccountPerMin: 6000, AccountBurst: 1000}
	return b
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// funded signs up an account and takes one faucet grant (1,000,000 sats).
func (a *railAPI) funded() (key, account string) {
	a.t.Helper()
	key, account = a.signup()
	if r := a.do(req{method: "POST", path: "/v1/faucet", key: key, idem: nextIdem(), body: "{}"}); r.status != 201 {
		a.t.Fatalf("faucet: %d %s", r.status, r.body)
	}
	return key, account
}

func (a *railAPI) free(account string) (v int64) {
	a.node.Machine().Read(func(st *fsm.State, _ uint64) { v = st.Ledger.Balance(ledger.Free(account)) })
	return v
}

// sparkAddr is a valid testnet Spark address nobody at the venue owns.
func (a *railAPI) sparkAddr(label string) string {
	seed := sha256.Sum256([]byte(label))
	return a.rail.AccountAddress(seed[:])
}

// payoutInvoice is a Lightning invoice of another node (a payee's), for
// withdrawals.
func payoutInvoice(t testing.TB, amountMsat int64) string {
	t.Helper()
	return payeeInvoice(t, rail.InvoiceRequest{AmountMsat: amountMsat, NowMs: time.Now().UnixMilli()}).PaymentRequest
}

// payeeInvoice is the payee's invoice for ir (its amount, issue time and
// expiry).
func payeeInvoice(t testing.TB, ir rail.InvoiceRequest) rail.Invoice {
	t.Helper()
	key, err := rail.NodeKeyFromSecret("some payee")
	if err != nil {
		t.Fatal(err)
	}
	payee, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: key})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := payee.CreateInvoice(ir)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func (a *railAPI) withdraw(key string, body map[string]any) resp {
	a.t.Helper()
	return a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: nextIdem(), body: body})
}

func (a *railAPI) quote(key string, body map[string]any) map[string]any {
	a.t.Helper()
	r := a.do(req{method: "POST", path: "/v1/withdrawals/quote", key: key, body: body})
	if r.status != 200 {
		a.t.Fatalf("quote %v: %d %s", body, r.status, r.body)
	}
	return r.json(a.t)
}

// waitState waits until the withdrawal with railRef reaches state and
// returns its view.
func (a *railAPI) waitState(key, railRef, state string) map[string]any {
	a.t.Helper()
	var found map[string]any
	waitFor(a.t, railRef+" "+state, func() bool {
		r := a.do(req{method: "GET", path: "/v1/withdrawals", key: key})
		var page struct {
			Withdrawals []map[string]any `json:"withdrawals"`
		}
		_ = json.Unmarshal(r.body, &page)
		for _, w := range page.Withdrawals {
			if w["railRef"] == railRef && w["state"] == state {
				found = w
				return true
			}
		}
		return false
	})
	return found
}

func mustInt(t testing.TB, v any) int64 {
	t.Helper()
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%v is not a decimal string", v)
	}
	return n
}

const overThreshold = 200_000_000 // 200,000 sats

// The 428 flow end to end: quote, refused without the token, accepted
// with it, paid, and the balance down by exactly amount + fee.
func TestWithdrawalConfirmationFlow(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.funded()
	dest := a.sparkAddr("first-seen")
	q := a.quote(key, map[string]any{"toAddress": dest, "amountMsat": strconv.Itoa(overThreshold)})
	if q["path"] != "spark" || q["feeMsat"] != "10000" || q["firstSeen"] != true || q["confirmRequired"] != true ||
		q["confirmThresholdMsat"] != strconv.FormatInt(funds.ConfirmThresholdMsat, 10) || !strings.HasPrefix(q["confirmToken"].(string), "wct1_") {
		t.Fatalf("quote %v", q)
	}
	free0 := a.free(acct)
	r := a.withdraw(key, map[string]any{"toAddress": dest, "amountMsat": strconv.Itoa(overThreshold)})
	m := r.json(t)
	if r.status != 428 || m["error"] != "confirmation_required" || m["code"] != "confirmation_required" ||
		m["firstSeen"] != true || m["confirmThresholdMsat"] != q["confirmThresholdMsat"] || m["reason"] == "" {
		t.Fatalf("without the token: %d %s", r.status, r.body)
	}
	if a.free(acct) != free0 {
		t.Fatal("a 428 moved money")
	}
	r = a.withdraw(key, map[string]any{"toAddress": dest, "amountMsat": strconv.Itoa(overThreshold), "confirmToken": q["confirmToken"]})
	if r.status != 201 || r.json(t)["queued"] != false {
		t.Fatalf("with the token: %d %s", r.status, r.body)
	}
	ref := r.json(t)["railRef"].(string)
	w := a.waitState(key, ref, "paid")
	if w["amountMsat"] != strconv.Itoa(overThreshold) || w["feeMsat"] != "10000" || w["path"] != "spark" ||
		w["queuedReason"] != nil || w["paidTsMs"] == nil {
		t.Fatalf("paid withdrawal %v", w)
	}
	if got := a.free(acct); got != free0-overThreshold-10_000 {
		t.Fatalf("free %d, want exactly %d - amount - fee", got, free0)
	}
	// Paid once: no longer first-seen, no token needed.
	q = a.quote(key, map[string]any{"toAddress": dest, "amountMsat": strconv.Itoa(overThreshold)})
	if q["firstSeen"] != false || q["confirmRequired"] != false || q["confirmToken"] != nil {
		t.Fatalf("second quote %v", q)
	}
}

func TestConfirmTokenMisuseIsRefused(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.funded()
	otherKey, _ := a.funded()
	dest := a.sparkAddr("misuse")
	amount := strconv.Itoa(overThreshold)
	tok := a.quote(key, map[string]any{"toAddress": dest, "amountMsat": amount})["confirmToken"]
	inv := payoutInvoice(t, overThreshold)
	invTok := a.quote(key, map[string]any{"invoice": inv})["confirmToken"]
	theirs := a.quote(otherKey, map[string]any{"toAddress": dest, "amountMsat": amount})["confirmToken"]
	short, err := a.srv.mintConfirmToken(acct, mustParse(t, a, dest), overThreshold, time.Now().UnixMilli()+30)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // log time passes the short token's expiry with the next entry
	free0 := a.free(acct)
	cases := []struct {
		name string
		body map[string]any
		want string
	}{
		{"other amount", map[string]any{"toAddress": dest, "amountMsat": strconv.Itoa(overThreshold + 1000), "confirmToken": tok}, "not"},
		{"other destination", map[string]any{"toAddress": a.sparkAddr("elsewhere"), "amountMsat": amount, "confirmToken": tok}, "another account or destination"},
		{"another account's token", map[string]any{"toAddress": dest, "amountMsat": amount, "confirmToken": theirs}, "another account or destination"},
		{"expired", map[string]any{"toAddress": dest, "amountMsat": amount, "confirmToken": short}, "expired"},
		{"garbage", map[string]any{"toAddress": dest, "amountMsat": amount, "confirmToken": "wct1_AAAA"}, "malformed"},
	}
	for _, c := range cases {
		r := a.withdraw(key, c.body)
		if r.status != 428 || r.code() != "confirmation_required" || !strings.Contains(r.json(t)["reason"].(string), c.want) {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	if a.free(acct) != free0 {
		t.Fatal("a refused withdrawal moved money")
	}
	// Reuse: a Lightning payout is returned, so its invoice stays
	// first-seen, and the spent token must not confirm it again.
	first := a.withdraw(key, map[string]any{"invoice": inv, "amountMsat": amount, "confirmToken": invTok})
	if first.status != 201 {
		t.Fatalf("first use: %d %s", first.status, first.body)
	}
	a.waitState(key, first.json(t)["railRef"].(string), "returned")
	again := a.withdraw(key, map[string]any{"invoice": inv, "amountMsat": amount, "confirmToken": invTok})
	if again.status != 428 || !strings.Contains(again.json(t)["reason"].(string), "already used") {
		t.Fatalf("reuse: %d %s", again.status, again.body)
	}
}

func mustParse(t testing.TB, a *railAPI, dest string) string {
	t.Helper()
	d, err := a.rail.ParseDestination(dest)
	if err != nil {
		t.Fatal(err)
	}
	return d.Normalized
}

// Every Lightning payout is returned on the simulated rail, and the refund
// is exact: amount and fee.
func TestLightningWithdrawalReturnedRefundsExactly(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.funded()
	free0 := a.free(acct)
	inv := payoutInvoice(t, 50_000_000)
	q := a.quote(key, map[string]any{"invoice": inv})
	if q["path"] != "lightning" || q["feeMsat"] != "52000" || q["confirmRequired"] != false {
		t.Fatalf("lightning quote %v", q)
	}
	r := a.withdraw(key, map[string]any{"invoice": "lightning:" + strings.ToUpper(inv), "amountMsat": "50000000"})
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	w := a.waitState(key, r.json(t)["railRef"].(string), "returned")
	if w["queuedReason"] != rail.ReasonUnknownPayoutInvoice || w["paidTsMs"] != nil || w["feeMsat"] != "52000" {
		t.Fatalf("returned withdrawal %v", w)
	}
	if a.free(acct) != free0 {
		t.Fatalf("free %d after the return, want exactly %d", a.free(acct), free0)
	}
	a.node.Machine().Read(func(st *fsm.State, _ uint64) {
		if st.Ledger.Balance(ledger.PendingWithdrawals) != 0 || st.Ledger.PaidMsat != 0 {
			t.Fatal("a returned payout left money pending or paid")
		}
	})
}

// A retry with the same idempotency key answers the original and never
// pays twice.
func TestWithdrawalRetryNeverPaysTwice(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.funded()
	free0 := a.free(acct)
	body := map[string]any{"toAddress": a.sparkAddr("retry"), "amountMsat": "5000000"}
	idem := nextIdem()
	first := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem, body: body})
	second := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem, body: body})
	if first.status != 201 || second.status != 201 || string(first.body) != string(second.body) || second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s / %d %s", first.status, first.body, second.status, second.body)
	}
	a.waitState(key, first.json(t)["railRef"].(string), "paid")
	third := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem, body: body})
	if string(third.body) != string(first.body) {
		t.Fatalf("retry after payment: %s", third.body)
	}
	r := a.do(req{method: "GET", path: "/v1/withdrawals", key: key})
	if n := strings.Count(string(r.body), `"railRef"`); n != 1 {
		t.Fatalf("%d withdrawals listed, want 1: %s", n, r.body)
	}
	if a.free(acct) != free0-5_000_000-rail.SparkWithdrawalFeeMsat {
		t.Fatal("paid more than once")
	}
	reuse := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem,
		body: map[string]any{"toAddress": a.sparkAddr("retry"), "amountMsat": "6000000"}})
	if reuse.status != 409 || reuse.code() != "idempotency_key_reused" {
		t.Fatalf("reuse: %d %s", reuse.status, reuse.body)
	}
}

func TestWithdrawalRefusals(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.funded()
	dest := a.sparkAddr("refusals")
	inv := payoutInvoice(t, 5_000_000)
	mainnetKey, _ := rail.NodeKeyFromSecret("mainnet payee")
	mainnet, _ := rail.NewSimRail(rail.SimConfig{Network: rail.Mainnet, NodeKey: mainnetKey})
	seed := sha256.Sum256([]byte("x"))
	free0 := a.free(acct)
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"no destination", map[string]any{"amountMsat": "5000"}, 400, "validation"},
		{"two destinations", map[string]any{"amountMsat": "5000", "toAddress": dest, "invoice": inv}, 400, "validation"},
		{"no amount", map[string]any{"toAddress": dest}, 400, "validation"},
		{"amount as number", `{"toAddress":"` + dest + `","amountMsat":5000}`, 400, "validation"},
		{"zero amount", map[string]any{"toAddress": dest, "amountMsat": "0"}, 400, "validation"},
		{"negative amount", map[string]any{"toAddress": dest, "amountMsat": "-1000"}, 400, "validation"},
		{"spark msat", map[string]any{"toAddress": dest, "amountMsat": "5001"}, 400, "validation"},
		{"garbage address", map[string]any{"toAddress": "hello", "amountMsat": "5000"}, 400, "validation"},
		{"on-chain address", map[string]any{"toAddress": "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", "amountMsat": "5000"}, 400, "validation"},
		{"mainnet spark", map[string]any{"toAddress": mainnet.AccountAddress(seed[:]), "amountMsat": "5000"}, 400, "validation"},
		{"invoice as toAddress", map[string]any{"toAddress": inv, "amountMsat": "5000000"}, 400, "validation"},
		{"address as invoice", map[string]any{"invoice": dest, "amountMsat": "5000"}, 400, "validation"},
		{"invoice amount differs", map[string]any{"invoice": inv, "amountMsat": "5000001"}, 400, "validation"},
		{"more than free", map[string]any{"toAddress": dest, "amountMsat": strconv.FormatInt(free0, 10)}, 409, "insufficient_balance"},
	}
	for _, c := range cases {
		r := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: nextIdem(), body: c.body})
		if r.status != c.status || r.code() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
	}
	if a.free(acct) != free0 {
		t.Fatal("a refused withdrawal moved money")
	}
	// Exactly the free balance, fee included, is allowed.
	r := a.withdraw(key, map[string]any{"toAddress": dest, "amountMsat": strconv.FormatInt(free0-rail.SparkWithdrawalFeeMsat, 10)})
	if r.status == 428 {
		tok := a.quote(key, map[string]any{"toAddress": dest, "amountMsat": strconv.FormatInt(free0-rail.SparkWithdrawalFeeMsat, 10)})["confirmToken"]
		r = a.withdraw(key, map[string]any{"toAddress": dest, "amountMsat": strconv.FormatInt(free0-rail.SparkWithdrawalFeeMsat, 10), "confirmToken": tok})
	}
	if r.status != 201 {
		t.Fatalf("withdraw everything: %d %s", r.status, r.body)
	}
	a.waitState(key, r.json(t)["railRef"].(string), "paid")
	if a.free(acct) != 0 {
		t.Fatalf("free %d after withdrawing everything", a.free(acct))
	}
}

func TestQuoteRefusals(t *testing.T) {
	a := newRailAPI(t)
	key, _ := a.funded()
	dest := a.sparkAddr("quote")
	anyAmount := payoutInvoice(t, 0)
	for name, body := range map[string]map[string]any{
		"nothing":              {},
		"both":                 {"toAddress": dest, "invoice": anyAmount, "amountMsat": "1000"},
		"spark without amount": {"toAddress": dest},
		"amountless invoice":   {"invoice": anyAmount},
		"bad address":          {"toAddress": "sparkt1nope", "amountMsat": "1000"},
		"spark msat":           {"toAddress": dest, "amountMsat": "1500"},
	} {
		r := a.do(req{method: "POST", path: "/v1/withdrawals/quote", key: key, body: body})
		if r.status != 400 || r.code() != "validation" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	q := a.quote(key, map[string]any{"invoice": anyAmount, "amountMsat": "1000"})
	if q["path"] != "lightning" || q["feeMsat"] != "2001" || q["confirmRequired"] != false {
		t.Fatalf("amountless invoice with an amount: %v", q)
	}
	// Below the threshold: first-seen but no token.
	q = a.quote(key, map[string]any{"toAddress": dest, "amountMsat": strconv.FormatInt(funds.ConfirmThresholdMsat-1000, 10)})
	if q["firstSeen"] != true || q["confirmRequired"] != false || q["confirmToken"] != nil {
		t.Fatalf("below threshold %v", q)
	}
	// Exactly at the threshold: confirmation required.
	q = a.quote(key, map[string]any{"toAddress": dest, "amountMsat": strconv.FormatInt(funds.ConfirmThresholdMsat, 10)})
	if q["confirmRequired"] != true {
		t.Fatalf("at threshold %v", q)
	}
}

func TestWithdrawalsPagination(t *testing.T) {
	a := newRailAPI(t)
	key, _ := a.funded()
	var refs []string
	for i := range 3 {
		r := a.withdraw(key, map[string]any{"toAddress": a.sparkAddr("page"), "amountMsat": strconv.Itoa(1000 * (i + 1))})
		if r.status != 201 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		refs = append(refs, r.json(t)["railRef"].(string))
	}
	// The leader's payout driver pays them meanwhile, and every change
	// takes a fresh seq (the listing is by latest change): list once all
	// three are final, so the pages are stable.
	deadline := time.Now().Add(5 * time.Second)
	for {
		body := string(a.do(req{method: "GET", path: "/v1/withdrawals?limit=3", key: key}).body)
		if strings.Count(body, `"state":"paid"`) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the three withdrawals were not paid in 5 s: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p1 := a.do(req{method: "GET", path: "/v1/withdrawals?limit=2", key: key}).json(t)
	ws := p1["withdrawals"].([]any)
	if len(ws) != 2 || p1["nextBeforeSeq"] == nil {
		t.Fatalf("page 1 %v", p1)
	}
	p2 := a.do(req{method: "GET", path: "/v1/withdrawals?limit=2&beforeSeq=" + p1["nextBeforeSeq"].(string), key: key}).json(t)
	ws = append(ws, p2["withdrawals"].([]any)...)
	if len(ws) != 3 || p2["nextBeforeSeq"] != nil {
		t.Fatalf("page 2 %v", p2)
	}
	seen := map[string]bool{}
	for i, w := range ws {
		m := w.(map[string]any)
		seen[m["railRef"].(string)] = true
		if i > 0 && mustInt(t, m["seq"]) >= mustInt(t, ws[i-1].(map[string]any)["seq"]) {
			t.Fatalf("pages not newest change first: %v then %v", ws[i-1], m)
		}
	}
	for _, ref := range refs {
		if !seen[ref] {
			t.Fatalf("withdrawal %s missing from the pages %v", ref, ws)
		}
	}
	if r := a.do(req{method: "GET", path: "/v1/withdrawals?limit=0", key: key}); r.status != 400 {
		t.Fatalf("limit=0: %d", r.status)
	}
	other, _ := a.signup()
	if r := a.do(req{method: "GET", path: "/v1/withdrawals", key: other}); !strings.Contains(string(r.body), `"withdrawals":[]`) {
		t.Fatalf("another account sees withdrawals: %s", r.body)
	}
}

// decodeWithNPM decodes invoices with the independent npm bolt11 decoder.
func decodeWithNPM(t *testing.T, invoices ...string) []map[string]any {
	t.Helper()
	var res []map[string]any
	railtest.DecodeWithNPM(t, invoices, &res)
	return res
}

// Invoice creation, payment by the simulated payer, the deposit listed
// with railRef = paymentRef; a second payment is refused.
func TestDepositInvoicePaidOnce(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.signup()
	idem := nextIdem()
	body := map[string]any{"amountMsat": "250000000", "expirySeconds": 900, "memo": "agent deposit"}
	r := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, idem: idem, body: body})
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	inv, ref := m["invoice"].(string), m["paymentRef"].(string)
	if !strings.HasPrefix(inv, "lntb2500u1") || len(ref) != 64 || len(m["depositFees"].([]any)) != 3 {
		t.Fatalf("invoice result %v", m)
	}
	if again := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, idem: idem, body: body}); string(again.body) != string(r.body) {
		t.Fatalf("retry returned another invoice: %s", again.body)
	}
	js := decodeWithNPM(t, inv)[0]
	if js["ok"] != true || js["paymentHash"] != ref || js["millisatoshis"] != "250000000" || js["description"] != "agent deposit" ||
		js["expireTime"] != float64(900) || int64(js["timeExpireDate"].(float64))*1000 != mustInt(t, m["expiresAtMs"]) {
		t.Fatalf("npm bolt11 read %v", js)
	}
	res, err := a.node.SettleInvoice(context.Background(), a.rail, inv, 0)
	if err != nil || !res.OK() {
		t.Fatalf("pay: %v %+v", err, res)
	}
	deps := a.do(req{method: "GET", path: "/v1/deposits", key: key}).json(t)["deposits"].([]any)
	if len(deps) != 1 || deps[0].(map[string]any)["railRef"] != ref || deps[0].(map[string]any)["amountMsat"] != "250000000" ||
		deps[0].(map[string]any)["feeMsat"] != "0" || deps[0].(map[string]any)["accountId"] != acct {
		t.Fatalf("deposits %v", deps)
	}
	if a.free(acct) != 250_000_000 {
		t.Fatalf("free %d", a.free(acct))
	}
	res, err = a.node.SettleInvoice(context.Background(), a.rail, inv, 0)
	if err != nil || res.OK() || res.Status != 409 {
		t.Fatalf("second payment: %v %+v", err, res)
	}
	if _, err := a.node.SettleInvoice(context.Background(), a.rail, inv, 1); !rail.IsValidation(err) {
		t.Fatalf("wrong amount: %v", err)
	}
	if a.free(acct) != 250_000_000 {
		t.Fatal("paid twice")
	}
}

func TestExpiredDepositInvoiceIsNotCredited(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.signup()
	r := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, idem: nextIdem(), body: map[string]any{"expirySeconds": 1}})
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	if js := decodeWithNPM(t, m["invoice"].(string))[0]; js["millisatoshis"] != nil || js["expireTime"] != float64(1) {
		t.Fatalf("any-amount invoice read as %v", js)
	}
	exp := mustInt(t, m["expiresAtMs"])
	time.Sleep(time.Until(time.UnixMilli(exp + 10)))
	if _, err := a.node.SettleInvoice(context.Background(), a.rail, m["invoice"].(string), 5_000); !rail.IsValidation(err) {
		t.Fatalf("expired invoice paid: %v", err)
	}
	// The state machine refuses it too, by log time, whatever the rail says.
	cmd, _ := fsm.NewCommand(fsm.CmdDepositSettled, funds.Settlement{AmountMsat: 5_000, RailRef: m["paymentRef"].(string), Path: funds.PathLightning})
	res, err := a.node.Propose(context.Background(), cmd)
	if err != nil || res.Status != 409 || !strings.Contains(string(res.Body), "expired") {
		t.Fatalf("state machine on an expired invoice: %v %+v", err, res)
	}
	if a.free(acct) != 0 {
		t.Fatal("expired invoice credited")
	}
}

func TestDepositInvoiceRefusals(t *testing.T) {
	a := newRailAPI(t)
	key, _ := a.signup()
	for name, body := range map[string]string{
		"expiry zero":           `{"expirySeconds":0}`,
		"expiry negative":       `{"expirySeconds":-5}`,
		"expiry fraction":       `{"expirySeconds":1.5}`,
		"expiry as string":      `{"expirySeconds":"60"}`,
		"expiry above 2^53-1":   `{"expirySeconds":9007199254740992}`,
		"amount zero":           `{"amountMsat":"0"}`,
		"amount as number":      `{"amountMsat":1000}`,
		"amount above supply":   `{"amountMsat":"2100000000000000001"}`,
		"memo too long":         `{"memo":"` + strings.Repeat("x", 640) + `"}`,
		"memo not a string":     `{"memo":5}`,
		"body not an object":    `[]`,
		"amount not an integer": `{"amountMsat":"1.5"}`,
	} {
		r := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, idem: nextIdem(), body: body})
		if r.status != 400 || r.code() != "validation" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	r := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, idem: nextIdem(),
		body: `{"expirySeconds":9007199254740991,"memo":"` + strings.Repeat("é", 319) + `"}`})
	if r.status != 201 {
		t.Fatalf("largest expiry and memo: %d %s", r.status, r.body)
	}
	if r := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, body: `{}`}); r.status != 400 {
		t.Fatalf("without idempotency-key: %d", r.status)
	}
	if _, err := a.node.SettleInvoice(context.Background(), a.rail, payoutInvoice(t, 1000), 0); !rail.IsValidation(err) {
		t.Fatalf("an invoice the venue did not issue: %v", err)
	}
}

// Withdrawals answer from every route with the rail's error text, and a
// withdraw-only key cannot quote (quotes need trade).
func TestRailRoutesScopes(t *testing.T) {
	a := newRailAPI(t)
	master, _ := a.funded()
	withdrawOnly, _ := a.mint(master, "withdraw")
	r := a.do(req{method: "POST", path: "/v1/withdrawals/quote", key: withdrawOnly, body: map[string]any{}})
	if r.status != http.StatusForbidden || r.code() != "insufficient_scope" {
		t.Fatalf("quote with a withdraw key: %d %s", r.status, r.body)
	}
	r = a.withdraw(withdrawOnly, map[string]any{"toAddress": a.sparkAddr("scoped"), "amountMsat": "1000"})
	if r.status != 201 {
		t.Fatalf("withdraw with a withdraw key: %d %s", r.status, r.body)
	}
}
