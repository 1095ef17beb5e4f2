package rail

import (
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/perpd/perpd/node/rail/railtest"
)

// The cross-check decodes our invoices with the npm package `bolt11`, an
// implementation that shares no code with ours, driven through Node.js
// (railtest.DecodeWithNPM).

// jsDecoded is what testdata/bolt11js/decode.js reports for one invoice.
type jsDecoded struct {
	OK                      bool    `json:"ok"`
	Error                   string  `json:"error"`
	Prefix                  string  `json:"prefix"`
	Bech32Currency          string  `json:"bech32Currency"`
	Millisatoshis           *string `json:"millisatoshis"`
	Timestamp               int64   `json:"timestamp"`
	TimeExpireDate          *int64  `json:"timeExpireDate"`
	PayeeNodeKey            string  `json:"payeeNodeKey"`
	PaymentHash             string  `json:"paymentHash"`
	PaymentSecret           string  `json:"paymentSecret"`
	Description             string  `json:"description"`
	ExpireTime              int64   `json:"expireTime"`
	MinFinalCltvExpiry      int64   `json:"minFinalCltvExpiry"`
	VarOnionOptinRequired   bool    `json:"varOnionOptinRequired"`
	PaymentSecretRequired   bool    `json:"paymentSecretRequired"`
	UnknownRequiredFeatures bool    `json:"unknownRequiredFeatures"`
}

func decodeWithJS(t *testing.T, invoices []string) []jsDecoded {
	t.Helper()
	var res []jsDecoded
	railtest.DecodeWithNPM(t, invoices, &res)
	return res
}

func TestIndependentDecoderAcceptsOurInvoices(t *testing.T) {
	type made struct {
		rail *SimRail
		req  InvoiceRequest
		inv  Invoice
	}
	testnet, regtest, mainnet := newTestRail(t, Testnet), newTestRail(t, Regtest), newTestRail(t, Mainnet)
	reqs := []struct {
		rail *SimRail
		req  InvoiceRequest
	}{
		{testnet, InvoiceRequest{AmountMsat: 250_000_000, ExpirySeconds: 900, Memo: "deposit", NowMs: testNowMs}},
		{testnet, InvoiceRequest{AmountMsat: 1, ExpirySeconds: 60, Memo: "one msat", NowMs: testNowMs}},
		{testnet, InvoiceRequest{AmountMsat: 1_000, Memo: "one sat", NowMs: testNowMs}},
		{testnet, InvoiceRequest{AmountMsat: 1_001, Memo: "not whole pico multiples of larger units", NowMs: testNowMs}},
		{testnet, InvoiceRequest{AmountMsat: 123_456_789_012_345, Memo: "odd amount", NowMs: testNowMs}},
		{testnet, InvoiceRequest{AmountMsat: MaxInvoiceAmountMsat, Memo: "every bitcoin", NowMs: testNowMs}},
		{testnet, InvoiceRequest{NowMs: testNowMs}}, // amountless, default memo and expiry
		{testnet, InvoiceRequest{AmountMsat: 5_000, Memo: "ナンセンス 1杯 ☕", NowMs: testNowMs}},
		{testnet, InvoiceRequest{AmountMsat: 5_000, Memo: strings.Repeat("x", MaxMemoBytes), NowMs: testNowMs}},
		// The SPEC allows expirySeconds up to 2^53-1, and our own decoder
		// reads that (TestInvoiceFieldBoundaries), but JavaScript dates end
		// in the year 275760, so this decoder stops short of it: cross-check
		// a century instead.
		{testnet, InvoiceRequest{AmountMsat: 5_000, ExpirySeconds: 100 * 365 * 86_400, Memo: "century expiry", NowMs: testNowMs}},
		{testnet, InvoiceRequest{AmountMsat: 5_000, ExpirySeconds: 1, Memo: "shortest expiry", NowMs: 0}},
		{regtest, InvoiceRequest{AmountMsat: 100_000, Memo: "regtest", NowMs: testNowMs}},
		{mainnet, InvoiceRequest{AmountMsat: 100_000_000_000, Memo: "mainnet", NowMs: testNowMs}},
	}
	var all []made
	var strs []string
	for _, q := range reqs {
		inv, err := q.rail.CreateInvoice(q.req)
		if err != nil {
			t.Fatalf("CreateInvoice(%+v): %v", q.req, err)
		}
		all = append(all, made{q.rail, q.req, inv})
		strs = append(strs, inv.PaymentRequest)
	}
	for i, js := range decodeWithJS(t, strs) {
		m := all[i]
		name := m.req.Memo
		if !js.OK {
			t.Errorf("%q: npm bolt11 refused %s: %s", name, m.inv.PaymentRequest, js.Error)
			continue
		}
		wantCurrency := map[Network]string{Testnet: "tb", Regtest: "bcrt", Mainnet: "bc"}[m.rail.Network()]
		if js.Bech32Currency != wantCurrency || !strings.HasPrefix(js.Prefix, m.rail.Network().InvoicePrefix()) {
			t.Errorf("%q: network %s (prefix %s), want %s", name, js.Bech32Currency, js.Prefix, wantCurrency)
		}
		var gotMsat int64
		if js.Millisatoshis != nil {
			gotMsat, _ = strconv.ParseInt(*js.Millisatoshis, 10, 64)
		}
		if gotMsat != m.req.AmountMsat {
			t.Errorf("%q: amount %v msat, want %d", name, js.Millisatoshis, m.req.AmountMsat)
		}
		if js.PaymentHash != m.inv.PaymentRef {
			t.Errorf("%q: payment hash %s, want %s", name, js.PaymentHash, m.inv.PaymentRef)
		}
		wantMemo, wantExpiry := m.req.Memo, m.req.ExpirySeconds
		if wantMemo == "" {
			wantMemo = DefaultInvoiceMemo
		}
		if wantExpiry == 0 {
			wantExpiry = DefaultInvoiceExpirySeconds
		}
		if js.Description != wantMemo || js.ExpireTime != wantExpiry || js.Timestamp != m.req.NowMs/1000 {
			t.Errorf("%q: description %q expiry %d timestamp %d, want %q %d %d", name, js.Description, js.ExpireTime, js.Timestamp, wantMemo, wantExpiry, m.req.NowMs/1000)
		}
		if exp := m.inv.ExpiresAtMs / 1000; js.TimeExpireDate == nil || *js.TimeExpireDate != exp {
			t.Errorf("%q: expiry date %v, want %d", name, js.TimeExpireDate, exp)
		}
		if js.PayeeNodeKey != hex.EncodeToString(m.rail.NodePubKey()) || js.PayeeNodeKey != specPayeeHex {
			t.Errorf("%q: recovered payee %s, want %s", name, js.PayeeNodeKey, specPayeeHex)
		}
		if len(js.PaymentSecret) != 64 || js.MinFinalCltvExpiry != DefaultMinFinalCLTVExpiry {
			t.Errorf("%q: payment secret %q, min_final_cltv_expiry %d", name, js.PaymentSecret, js.MinFinalCltvExpiry)
		}
		if !js.VarOnionOptinRequired || !js.PaymentSecretRequired || js.UnknownRequiredFeatures {
			t.Errorf("%q: features var_onion_optin=%v payment_secret=%v unknown-required=%v", name, js.VarOnionOptinRequired, js.PaymentSecretRequired, js.UnknownRequiredFeatures)
		}
	}
}

// Both decoders agree on the spec's vectors and refuse a typo.
func TestIndependentDecoderAgreesOnSpecVectors(t *testing.T) {
	good := mustEncode(t, testInvoiceFields(Testnet))
	invoices := []string{specCoffee, specTestnet, specPico, specBeans, typo(good, 30)}
	res := decodeWithJS(t, invoices)
	for i, js := range res {
		d, err := DecodeInvoice(invoices[i])
		if js.OK != (err == nil) {
			t.Errorf("invoice %d: npm bolt11 ok=%v (%s), ours err=%v", i, js.OK, js.Error, err)
			continue
		}
		if err == nil && (js.PaymentHash != hex.EncodeToString(d.PaymentHash[:]) || js.PayeeNodeKey != hex.EncodeToString(d.PayeePubKey)) {
			t.Errorf("invoice %d: decoders disagree: %+v vs %+v", i, js, d)
		}
	}
}
