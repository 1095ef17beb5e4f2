package rail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const testNowMs int64 = 1_700_000_000_123

func TestNewSimRailRefusesBadConfig(t *testing.T) {
	key := mustHex(t, specKeyHex)
	for _, cfg := range []SimConfig{
		{Network: "", NodeKey: key},
		{Network: "litecoin", NodeKey: key},
		{Network: Testnet, NodeKey: nil},
		{Network: Testnet, NodeKey: key[:31]},
		{Network: Testnet, NodeKey: make([]byte, 32)},
	} {
		if _, err := NewSimRail(cfg); err == nil {
			t.Errorf("NewSimRail(%+v) succeeded", cfg)
		}
	}
}

func TestCreateInvoiceIssuesAVerifiableTestnetInvoice(t *testing.T) {
	r := newTestRail(t, Testnet)
	inv, err := r.CreateInvoice(InvoiceRequest{AccountID: "acct-1", AmountMsat: 21_000, ExpirySeconds: 600, Memo: "top up", NowMs: testNowMs})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inv.PaymentRequest, "lntb210n1") {
		t.Fatalf("payment request %q, want lntb210n1...", inv.PaymentRequest)
	}
	d, err := DecodeInvoice(inv.PaymentRequest)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(d.PaymentHash[:]) != inv.PaymentRef {
		t.Errorf("PaymentRef %s is not the invoice's payment hash %x", inv.PaymentRef, d.PaymentHash)
	}
	if d.AmountMsat != 21_000 || d.Description != "top up" || d.ExpirySeconds != 600 ||
		d.TimestampSec != testNowMs/1000 || d.MinFinalCLTVExpiry != DefaultMinFinalCLTVExpiry ||
		len(d.PaymentSecret) != 32 || !bytes.Equal(d.PayeePubKey, r.NodePubKey()) {
		t.Errorf("decoded %+v", d)
	}
	if want := (testNowMs/1000 + 600) * 1000; inv.ExpiresAtMs != want || d.ExpiresAtMs() != want {
		t.Errorf("ExpiresAtMs %d (decoded %d), want %d", inv.ExpiresAtMs, d.ExpiresAtMs(), want)
	}
	dest, err := r.ParseDestination(inv.PaymentRequest)
	if err != nil || dest.PaymentRef != inv.PaymentRef {
		t.Errorf("own invoice as a destination: %+v, %v", dest, err)
	}
}

func TestCreateInvoiceDefaults(t *testing.T) {
	r := newTestRail(t, Testnet)
	inv, err := r.CreateInvoice(InvoiceRequest{AccountID: "a", NowMs: testNowMs})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := DecodeInvoice(inv.PaymentRequest)
	if d.AmountMsat != 0 || d.ExpirySeconds != DefaultInvoiceExpirySeconds || d.Description != DefaultInvoiceMemo {
		t.Errorf("defaults: amount %d expiry %d memo %q", d.AmountMsat, d.ExpirySeconds, d.Description)
	}
	if !strings.HasPrefix(inv.PaymentRequest, "lntb1") {
		t.Errorf("amountless invoice %q should have no amount in its prefix", inv.PaymentRequest)
	}
}

func TestCreateInvoiceRefusesBadRequests(t *testing.T) {
	r := newTestRail(t, Testnet)
	base := InvoiceRequest{AccountID: "a", AmountMsat: 1_000, ExpirySeconds: 60, NowMs: testNowMs}
	cases := map[string]func(*InvoiceRequest){
		"negative amount":     func(q *InvoiceRequest) { q.AmountMsat = -1 },
		"amount over 21e6":    func(q *InvoiceRequest) { q.AmountMsat = MaxInvoiceAmountMsat + 1 },
		"negative expiry":     func(q *InvoiceRequest) { q.ExpirySeconds = -1 },
		"expiry over 2^53-1":  func(q *InvoiceRequest) { q.ExpirySeconds = MaxInvoiceExpirySeconds + 1 },
		"memo over 639 bytes": func(q *InvoiceRequest) { q.Memo = strings.Repeat("m", MaxMemoBytes+1) },
		"memo not UTF-8":      func(q *InvoiceRequest) { q.Memo = "\xc3\x28" },
	}
	for name, mod := range cases {
		q := base
		mod(&q)
		if _, err := r.CreateInvoice(q); !IsValidation(err) {
			t.Errorf("%s: err %v, want a validation error", name, err)
		}
	}
	q := base
	q.NowMs = -1
	if _, err := r.CreateInvoice(q); err == nil {
		t.Error("negative clock accepted")
	}
	q = base
	q.ExpirySeconds = MaxInvoiceExpirySeconds
	if inv, err := r.CreateInvoice(q); err != nil || inv.ExpiresAtMs != (testNowMs/1000+MaxInvoiceExpirySeconds)*1000 {
		t.Errorf("largest expiry: %+v, %v", inv, err)
	}
}

func TestCreateInvoiceDrawsFreshSecretsEachCall(t *testing.T) {
	r := newTestRail(t, Testnet)
	seen := map[string]bool{}
	for range 50 {
		inv, err := r.CreateInvoice(InvoiceRequest{AccountID: "a", NowMs: testNowMs})
		if err != nil {
			t.Fatal(err)
		}
		if seen[inv.PaymentRef] {
			t.Fatalf("payment hash %s issued twice", inv.PaymentRef)
		}
		seen[inv.PaymentRef] = true
	}
	// The randomness comes from the injected reader: the first preimage is
	// its first 32 bytes.
	first, _ := newTestRail(t, Testnet).CreateInvoice(InvoiceRequest{NowMs: testNowMs})
	var pre [32]byte
	newDetReader(t.Name()).Read(pre[:])
	if h := sha256.Sum256(pre[:]); hex.EncodeToString(h[:]) != first.PaymentRef {
		t.Error("payment hash is not SHA-256 of the first 32 bytes drawn")
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

func TestCreateInvoiceReportsARandomSourceFailure(t *testing.T) {
	r, _ := NewSimRail(SimConfig{Network: Testnet, NodeKey: mustHex(t, specKeyHex), Rand: failingReader{}})
	if _, err := r.CreateInvoice(InvoiceRequest{NowMs: testNowMs}); err == nil || IsValidation(err) {
		t.Fatalf("err %v, want a non-validation error", err)
	}
	if _, err := DrawSeed(failingReader{}); err == nil {
		t.Fatal("DrawSeed ignored a failing reader")
	}
	if _, err := NewNodeKey(failingReader{}); err == nil {
		t.Fatal("NewNodeKey ignored a failing reader")
	}
}

func TestPayOutcomesOnTheSimulatedRail(t *testing.T) {
	r := newTestRail(t, Testnet)
	spark := r.AccountAddress([]byte("recipient"))
	mainSpark, _ := EncodeSparkAddress(Mainnet, mustHex(t, sparkDocsKey))
	validInvoice := mustEncode(t, testInvoiceFields(Testnet))
	cases := []struct {
		name   string
		p      Payout
		status string
		reason string
	}{
		{"Spark payout is paid", Payout{"w1", PathSpark, spark, 50_000}, PayoutPaid, ""},
		{"1 sat Spark payout is paid", Payout{"w2", PathSpark, spark, 1_000}, PayoutPaid, ""},
		{"Lightning payout to a valid invoice fails as unknown", Payout{"w3", PathLightning, validInvoice, 250_000_000}, PayoutReturned, ReasonUnknownPayoutInvoice},
		{"Lightning payout to anything fails as unknown", Payout{"w4", PathLightning, "lntb1garbage", 1}, PayoutReturned, ReasonUnknownPayoutInvoice},
		{"Spark payout of part of a sat", Payout{"w5", PathSpark, spark, 1_500}, PayoutReturned, "whole sats"},
		{"Spark payout of nothing", Payout{"w6", PathSpark, spark, 0}, PayoutReturned, "positive"},
		{"Spark payout to a mainnet address", Payout{"w7", PathSpark, mainSpark, 1_000}, PayoutReturned, "testnet"},
		{"Spark payout to garbage", Payout{"w8", PathSpark, "sparkt1nope", 1_000}, PayoutReturned, "invalid Spark address"},
		{"unknown path", Payout{"w9", PathL1, spark, 1_000}, PayoutReturned, "unknown payout path"},
		{"no railRef", Payout{"", PathSpark, spark, 1_000}, PayoutReturned, "railRef"},
	}
	for _, c := range cases {
		got := r.Pay(c.p)
		if got.Status != c.status || !strings.Contains(got.Reason, c.reason) || (c.reason == "" && got.Reason != "") {
			t.Errorf("%s: %+v, want status %s reason containing %q", c.name, got, c.status, c.reason)
		}
	}
}

func TestPayIsIdempotentByRailRef(t *testing.T) {
	r := newTestRail(t, Testnet)
	spark := r.AccountAddress([]byte("recipient"))
	first := r.Pay(Payout{"w1", PathSpark, spark, 1_000})
	// A retry after a leadership change reports the first outcome, even if
	// the retried payout differs (it is the same withdrawal).
	again := r.Pay(Payout{"w1", PathLightning, "x", 1})
	if first != again || first.Status != PayoutPaid {
		t.Fatalf("first %+v, retry %+v", first, again)
	}
	returned := r.Pay(Payout{"w2", PathLightning, "x", 1})
	if r.Pay(Payout{"w2", PathSpark, spark, 1_000}) != returned {
		t.Fatal("a returned payout turned into another outcome on retry")
	}
}

func TestSimulatePaymentSettlesOwnInvoices(t *testing.T) {
	r := newTestRail(t, Testnet)
	fixed, _ := r.CreateInvoice(InvoiceRequest{AccountID: "acct-fixed", AmountMsat: 5_000, ExpirySeconds: 60, NowMs: testNowMs})
	open, _ := r.CreateInvoice(InvoiceRequest{AccountID: "acct-open", ExpirySeconds: 60, NowMs: testNowMs})

	s, err := r.SimulatePayment(fixed.PaymentRequest, 0, testNowMs)
	if err != nil || s != (Settlement{PaymentRef: fixed.PaymentRef, AmountMsat: 5_000, FeeMsat: 0, AccountID: "acct-fixed", SettledAtMs: testNowMs}) {
		t.Fatalf("fixed-amount invoice: %+v, %v", s, err)
	}
	if s, err = r.SimulatePayment(fixed.PaymentRequest, 5_000, testNowMs); err != nil || s.AmountMsat != 5_000 {
		t.Fatalf("fixed-amount invoice paid its exact amount: %+v, %v", s, err)
	}
	if s, err = r.SimulatePayment("lightning:"+strings.ToUpper(open.PaymentRequest), 1, fixed.ExpiresAtMs-1); err != nil ||
		s != (Settlement{PaymentRef: open.PaymentRef, AmountMsat: 1, AccountID: "acct-open", SettledAtMs: fixed.ExpiresAtMs - 1}) {
		t.Fatalf("amountless invoice paid 1 msat just before expiry: %+v, %v", s, err)
	}
	// After a restart the cache is empty, but the signature still proves the
	// invoice is ours: it settles, and the state machine names the account.
	restarted := newTestRail(t, Testnet)
	if s, err = restarted.SimulatePayment(fixed.PaymentRequest, 0, testNowMs); err != nil || s.AccountID != "" || s.PaymentRef != fixed.PaymentRef {
		t.Fatalf("after restart: %+v, %v", s, err)
	}
}

func TestSimulatePaymentRefusals(t *testing.T) {
	r := newTestRail(t, Testnet)
	fixed, _ := r.CreateInvoice(InvoiceRequest{AmountMsat: 5_000, ExpirySeconds: 60, NowMs: testNowMs})
	open, _ := r.CreateInvoice(InvoiceRequest{ExpirySeconds: 60, NowMs: testNowMs})
	foreign, _ := EncodeInvoice(testInvoiceFields(Testnet), otherKey(t))
	mainnet := mustEncode(t, testInvoiceFields(Mainnet)) // signed by our key, wrong network
	cases := []struct {
		name   string
		pr     string
		amount int64
		nowMs  int64
		cause  error
	}{
		{"expired at its expiry instant", fixed.PaymentRequest, 0, fixed.ExpiresAtMs, ErrInvoiceExpired},
		{"long expired", fixed.PaymentRequest, 0, fixed.ExpiresAtMs + 86_400_000, ErrInvoiceExpired},
		{"issued by another node", foreign, 0, testNowMs, ErrUnknownInvoice},
		{"mainnet invoice", mainnet, 0, testNowMs, ErrWrongNetwork},
		{"amountless without an amount", open.PaymentRequest, 0, testNowMs, ErrAmountRequired},
		{"amount differs from the invoice's", fixed.PaymentRequest, 4_999, testNowMs, ErrAmountMismatch},
		{"negative amount", open.PaymentRequest, -1, testNowMs, nil},
		{"amount over 21e6 BTC", open.PaymentRequest, MaxInvoiceAmountMsat + 1, testNowMs, nil},
		{"not an invoice", "hello", 0, testNowMs, nil},
		{"a Spark address", r.AccountAddress([]byte("x")), 0, testNowMs, nil},
	}
	for _, c := range cases {
		_, err := r.SimulatePayment(c.pr, c.amount, c.nowMs)
		if !IsValidation(err) || (c.cause != nil && !errors.Is(err, c.cause)) {
			t.Errorf("%s: err %v, want a validation error wrapping %v", c.name, err, c.cause)
		}
	}
}

func TestIssuedInvoiceMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("signs MaxIssuedInvoices invoices")
	}
	r := newTestRail(t, Testnet)
	first, _ := r.CreateInvoice(InvoiceRequest{AccountID: "oldest", NowMs: testNowMs})
	var last Invoice
	for i := range MaxIssuedInvoices {
		last, _ = r.CreateInvoice(InvoiceRequest{AccountID: fmt.Sprint("acct-", i), NowMs: testNowMs})
	}
	if n := r.issued.len(); n != MaxIssuedInvoices {
		t.Fatalf("remembers %d invoices, want %d", n, MaxIssuedInvoices)
	}
	s, err := r.SimulatePayment(first.PaymentRequest, 1, testNowMs)
	if err != nil || s.AccountID != "" {
		t.Fatalf("evicted invoice: %+v, %v; want a settlement with no account", s, err)
	}
	if s, _ := r.SimulatePayment(last.PaymentRequest, 1, testNowMs); s.AccountID != fmt.Sprint("acct-", MaxIssuedInvoices-1) {
		t.Fatalf("newest invoice lost its account: %+v", s)
	}
}

func TestFIFOCacheEvictsOldestFirst(t *testing.T) {
	c := newFIFOCache[int](3)
	for i, k := range []string{"a", "b", "c"} {
		c.put(k, i)
	}
	c.put("a", 10) // replacing keeps a's age
	c.put("d", 3)  // evicts a, the oldest
	if _, ok := c.get("a"); ok {
		t.Fatal("oldest entry survived")
	}
	c.put("e", 4) // evicts b
	for k, want := range map[string]int{"c": 2, "d": 3, "e": 4} {
		if v, ok := c.get(k); !ok || v != want {
			t.Errorf("get(%q) = %d, %v; want %d", k, v, ok, want)
		}
	}
	if c.len() != 3 {
		t.Errorf("len %d, want 3", c.len())
	}
}

func TestPayoutMemoryIsBounded(t *testing.T) {
	r := newTestRail(t, Testnet)
	for i := range MaxRememberedPayouts + 10 {
		r.Pay(Payout{fmt.Sprint("w", i), PathLightning, "x", 1})
	}
	if n := r.book.outcomes.len(); n != MaxRememberedPayouts {
		t.Fatalf("remembers %d payouts, want %d", n, MaxRememberedPayouts)
	}
}

func TestSimRailIsSafeForConcurrentUse(t *testing.T) {
	r := newTestRail(t, Testnet)
	spark := r.AccountAddress([]byte("recipient"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				inv, err := r.CreateInvoice(InvoiceRequest{AccountID: "a", AmountMsat: 1_000, NowMs: testNowMs})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := r.SimulatePayment(inv.PaymentRequest, 0, testNowMs); err != nil {
					t.Error(err)
				}
				r.Pay(Payout{fmt.Sprint(g, "-", i), PathSpark, spark, 1_000})
				r.ParseDestination(inv.PaymentRequest)
			}
		})
	}
	wg.Wait()
}

// Two leaders in turn, each with its own SimRail of the same cluster (the
// same node key), ask for the same payout: it is executed once and both
// hear the first outcome. Before the shared book, the second leader's rail
// remembered nothing and paid again.
func TestPayoutIsExecutedOnceAcrossLeaders(t *testing.T) {
	key, err := NewNodeKey(newDetReader(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	var leaders []*SimRail
	for range 2 {
		r, err := NewSimRail(SimConfig{Network: Testnet, NodeKey: key})
		if err != nil {
			t.Fatal(err)
		}
		leaders = append(leaders, r)
	}
	spark := leaders[0].AccountAddress([]byte("payee"))
	p := Payout{RailRef: "wd-across-leaders", Path: PathSpark, Destination: spark, AmountMsat: 5_000}
	first := leaders[0].Pay(p)
	second := leaders[1].Pay(p)
	if first.Status != PayoutPaid || second != first {
		t.Fatalf("first leader %+v, second %+v", first, second)
	}
	if leaders[0].Book() != leaders[1].Book() {
		t.Fatal("the SimRails of one cluster do not share their simulated network")
	}
	if n := leaders[1].Book().Executed(); n != 1 {
		t.Fatalf("the payout was executed %d times", n)
	}
	// A rail of another cluster (another key) is another network.
	other, _ := NewSimRail(SimConfig{Network: Testnet, NodeKey: otherKey(t)})
	if other.Book() == leaders[0].Book() {
		t.Fatal("two clusters share a simulated network")
	}
}

// A settlement carries the rail's settlement time: the instant expiry is
// judged at.
func TestSimulatedSettlementCarriesItsTime(t *testing.T) {
	r := newTestRail(t, Testnet)
	inv, err := r.CreateInvoice(InvoiceRequest{AccountID: "a", AmountMsat: 5_000, ExpirySeconds: 60, NowMs: testNowMs})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.SimulatePayment(inv.PaymentRequest, 0, inv.ExpiresAtMs-1)
	if err != nil || st.SettledAtMs != inv.ExpiresAtMs-1 {
		t.Fatalf("settlement %+v, %v", st, err)
	}
}

// Nodes in separate processes (a devnet) share the simulated network
// through a directory book: two books on one directory stand for two
// processes, and the payout is executed once, whichever asks first, even
// when both ask at once.
func TestDirBookExecutesAPayoutOnceAcrossProcesses(t *testing.T) {
	key, err := NewNodeKey(newDetReader(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rails []*SimRail
	for range 2 {
		book, err := NewDirSimBook(dir)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewSimRail(SimConfig{Network: Testnet, NodeKey: key, Book: book})
		if err != nil {
			t.Fatal(err)
		}
		rails = append(rails, r)
	}
	spark := rails[0].AccountAddress([]byte("payee"))
	for i := range 20 {
		p := Payout{RailRef: fmt.Sprintf("wd-%d", i), Path: PathSpark, Destination: spark, AmountMsat: 5_000}
		results := make(chan PayoutResult, 2)
		for _, r := range rails {
			go func(r *SimRail) { results <- r.Pay(p) }(r)
		}
		a, b := <-results, <-results
		if a.Status != PayoutPaid || a != b {
			t.Fatalf("payout %d: outcomes %+v and %+v", i, a, b)
		}
	}
	if n := rails[0].Book().Executed() + rails[1].Book().Executed(); n != 20 {
		t.Fatalf("20 payouts were executed %d times across the two processes", n)
	}
	// Every outcome is readable by processes of other users sharing the
	// book (the harness runs each node under its own uid).
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("outcome %s: mode %v (%v), want 0644", f, fi.Mode().Perm(), err)
		}
	}
	if len(files) != 20 {
		t.Fatalf("%d outcome files, want 20", len(files))
	}
	// A third process arriving later reads the outcomes and pays nothing.
	late, _ := NewDirSimBook(dir)
	r, _ := NewSimRail(SimConfig{Network: Testnet, NodeKey: key, Book: late})
	if res := r.Pay(Payout{RailRef: "wd-3", Path: PathSpark, Destination: spark, AmountMsat: 5_000}); res.Status != PayoutPaid || late.Executed() != 0 {
		t.Fatalf("a late process got %+v and executed %d", res, late.Executed())
	}
}

// A payout's outcome file that a power loss cut short (or any record the
// book cannot read) is a payout the network may have made: the book must
// not execute it again, but report it pending and leave the record for an
// operator, whichever process asks.
func TestDirBookNeverRepaysAPayoutWhoseRecordIsUnreadable(t *testing.T) {
	dir := t.TempDir()
	book, err := NewDirSimBook(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, damaged := range []string{"", `{"Status":"pa`} {
		p := Payout{RailRef: fmt.Sprintf("wd-%d", i), Path: PathSpark, AmountMsat: 5_000}
		sum := sha256.Sum256([]byte(p.RailRef))
		path := filepath.Join(dir, hex.EncodeToString(sum[:16])+".json")
		if err := os.WriteFile(path, []byte(damaged), 0o644); err != nil {
			t.Fatal(err)
		}
		executed := 0
		res := book.pay(p, func(Payout) PayoutResult { executed++; return PayoutResult{Status: PayoutPaid} })
		if executed != 0 || res.Status != PayoutPending || !strings.Contains(res.Reason, filepath.Base(path)) {
			t.Fatalf("record %q: executed %d times, outcome %+v; want none, pending, naming %s", damaged, executed, res, filepath.Base(path))
		}
		if b, _ := os.ReadFile(path); string(b) != damaged {
			t.Fatalf("record %q was replaced by %q", damaged, b)
		}
	}
}
