package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/cluster/clustertest"
)

// usdxCall is one public API call; it returns the status and JSON body.
func usdxCall(t *testing.T, base, method, path, key, idem string, body any) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if idem != "" {
		req.Header.Set("idempotency-key", idem)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// TestAdminUSDxAndTheTokenRail runs a node as `perpd serve` builds it (the
// simulated token rail and its driver wired): a new user mints USDx and
// withdraws some to an address, which the token rail pays; the operator
// freezes an address through `perpd admin usdx freeze` (the custody
// worker applies it), halts and resumes mints, and an attestation that
// disagrees with the ledger halts mints until a passing one and a resume.
func TestAdminUSDxAndTheTokenRail(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Assemble(Assemble), clustertest.TickInterval(50*time.Millisecond))
	base, admin := c.HTTP("node1"), c.Member("node1").AdminAddr
	flags := []string{"--addr", admin, "--admin-token-file", tokenFile(t, c.Token)}
	run := func(args ...string) (string, error) { return runAdmin(t, append(args, flags...)...) }

	st, m := usdxCall(t, base, "POST", "/v1/signup", "", "s1", map[string]any{})
	if st != 201 {
		t.Fatalf("signup %d %v", st, m)
	}
	key, acctID := m["apiKey"].(string), m["accountId"].(string)
	if st, m := usdxCall(t, base, "POST", "/v1/faucet", key, "f1", map[string]any{}); st != 201 {
		t.Fatalf("faucet %d %v", st, m)
	}
	var q map[string]any
	if !clustertest.Poll(15*time.Second, func() bool {
		st, q = usdxCall(t, base, "POST", "/v1/usdx/quotes", key, "", map[string]any{"side": "mint", "usdx": "10"})
		return st == 201
	}) {
		t.Fatalf("no mint quote (the oracle never printed?): %d %v", st, q)
	}
	qid := q["quoteId"].(string)
	if st, m := usdxCall(t, base, "POST", "/v1/usdx/mints", key, qid, map[string]any{"quoteId": qid}); st != 201 || m["state"] != "minted" {
		t.Fatalf("mint %d %v", st, m)
	}
	_, addr := usdxCall(t, base, "GET", "/v1/usdx/deposit-address", key, "", nil)
	if !strings.HasPrefix(addr["address"].(string), "sprt1") {
		t.Fatalf("deposit address %v", addr)
	}
	if st, m := usdxCall(t, base, "POST", "/v1/usdx/withdrawals", key, "wd1", map[string]any{"usdx": "3", "sparkAddress": "sprt1receiver"}); st != 201 || m["state"] != "requested" {
		t.Fatalf("withdraw %d %v", st, m)
	}
	var w map[string]any
	if !clustertest.Poll(10*time.Second, func() bool {
		_, page := usdxCall(t, base, "GET", "/v1/usdx/withdrawals", key, "", nil)
		l, _ := page["withdrawals"].([]any)
		if len(l) == 1 {
			w = l[0].(map[string]any)
		}
		return w != nil && w["state"] == "paid"
	}) {
		t.Fatalf("the token rail never paid the withdrawal: %v", w)
	}
	if w["issuerRef"] == nil || w["paidTsMs"] == nil {
		t.Fatalf("paid without the issuer's ref: %v", w)
	}

	// Two of the three tokens come back to the deposit address.
	if _, err := run("usdx", "deposit", acctID, "--usdx", "5"); err == nil {
		t.Fatal("a deposit of more tokens than are outside custody")
	}
	if _, err := run("usdx", "deposit", acctID, "--usdx", "2"); err != nil {
		t.Fatal(err)
	}
	if _, a := usdxCall(t, base, "GET", "/v1/account", key, "", nil); a["usdx"] != "9" {
		t.Fatalf("after the deposit: %v", a)
	}
	if _, err := run("usdx", "freeze", "sprt1badactor", "--reason", "sanctions"); err != nil {
		t.Fatal(err)
	}
	var fz map[string]any
	if !clustertest.Poll(10*time.Second, func() bool {
		_, fz = usdxCall(t, base, "GET", "/v1/usdx/freezes", "", "", nil)
		l, _ := fz["frozen"].([]any)
		return len(l) == 1
	}) {
		t.Fatalf("the freeze was never applied: %v", fz)
	}
	if e := fz["freezes"].([]any)[0].(map[string]any); e["state"] != "applied" || e["reason"] != "sanctions" {
		t.Fatalf("%v", e)
	}
	if st, m := usdxCall(t, base, "POST", "/v1/usdx/withdrawals", key, "wd2", map[string]any{"usdx": "1", "sparkAddress": "sprt1badactor"}); st != 403 || m["code"] != "compliance_refused" {
		t.Fatalf("withdraw to a frozen address: %d %v", st, m)
	}

	if _, err := run("usdx", "halt"); err == nil {
		t.Fatal("halt without a reason")
	}
	if _, err := run("usdx", "halt", "--reason", "drill"); err != nil {
		t.Fatal(err)
	}
	if _, pub := usdxCall(t, base, "GET", "/v1/usdx", "", "", nil); pub["mintsHalted"] != true || pub["mintsHaltedReason"] != "drill" {
		t.Fatalf("%v", pub)
	}
	if _, err := run("usdx", "resume"); err != nil {
		t.Fatal(err)
	}
	// Supply 10, 1 outside custody: an issuer reporting 9 fails.
	if _, err := run("usdx", "attest", "--supply", "9", "--issued", "9", "--custody", "8"); err != nil {
		t.Fatal(err)
	}
	if _, pub := usdxCall(t, base, "GET", "/v1/usdx", "", "", nil); pub["mintsHaltedReason"] != "attestation_failed" {
		t.Fatalf("%v", pub)
	}
	if _, err := run("usdx", "resume"); err == nil || !strings.Contains(err.Error(), "attestation") {
		t.Fatalf("resume after a failed attestation: %v", err)
	}
	if _, err := run("usdx", "attest", "--supply", "10", "--issued", "10", "--custody", "9"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("usdx", "resume"); err != nil {
		t.Fatal(err)
	}
	if _, pub := usdxCall(t, base, "GET", "/v1/usdx", "", "", nil); pub["mintsHalted"] != false || pub["lastAttestation"].(map[string]any)["ok"] != true {
		t.Fatalf("%v", pub)
	}
	if _, err := run("usdx", "params", `{"hardCap":"5"}`); err != nil {
		t.Fatal(err)
	}
	if _, pub := usdxCall(t, base, "GET", "/v1/usdx", "", "", nil); pub["params"].(map[string]any)["hardCap"] != "5" {
		t.Fatalf("%v", pub)
	}
	// The operator's books list every account: with USDx minted (a reserve
	// and a hedge position of the venue's own) they still add up.
	out, err := run("ledger")
	if err != nil {
		t.Fatal(err)
	}
	var v AdminLedgerView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	listed := v.HouseMsat + v.InsuranceMsat + v.FeeRevenueMsat + v.PendingWithdrawalsMsat + v.FaucetMsat +
		v.ReferralPayableMsat + v.PromoterPayableMsat + v.USDxReserveMsat + v.USDxYieldMsat + v.USDxHedgeMsat + v.TradersMsat
	if !v.Conservation.OK || v.USDxReserveMsat <= 0 || v.USDxHedgeMsat <= 0 || listed != v.CreditedMsat-v.PaidMsat {
		t.Fatalf("the books list %d msat, credited - paid is %d: %s", listed, v.CreditedMsat-v.PaidMsat, out)
	}
}

// TestAdminUSDxAttestNeedsEveryComparedFigure: a figure left out was sent
// as 0, and the ledger's supply or custody is not 0 once anyone minted, so
// `admin usdx attest --supply 9 --issued 9` (custody forgotten) halted
// mints for the whole venue until a later attestation passed and an
// operator resumed them. --supply, --issued and --custody are required
// (--burned stays 0 by default: no burns is an ordinary figure), and the
// refusal sends nothing.
func TestAdminUSDxAttestNeedsEveryComparedFigure(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	flags := []string{"--addr", strings.TrimPrefix(srv.URL, "http://"), "--admin-token-file", tokenFile(t, "tok")}
	for _, args := range [][]string{
		{"usdx", "attest"},
		{"usdx", "attest", "--supply", "9", "--issued", "9"},
		{"usdx", "attest", "--supply", "9", "--custody", "8", "--burned", "0"},
	} {
		if _, err := runAdmin(t, append(args, flags...)...); err == nil || !strings.Contains(err.Error(), "required") {
			t.Errorf("%v: %v, want a refusal naming the missing figures", args, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d attestation(s) sent with a figure missing", n)
	}
	if _, err := runAdmin(t, append([]string{"usdx", "attest", "--supply", "9", "--issued", "9", "--custody", "8"}, flags...)...); err != nil {
		t.Fatalf("a full attestation: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the full attestation: %d calls", n)
	}
}
