package fsm

import (
	"bytes"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

// lnReq is a Lightning withdrawal of 10,000 msat to the invoice string
// dest with payment hash hash, under the client key "k-"+railRef.
func (w *railWorld) lnReq(railRef, dest, hash string) funds.WithdrawalRequest {
	r := wreq(railRef, 10_000, 1_000)
	r.Path, r.Destination, r.DestExpiresAtMs, r.PaymentHash = funds.PathLightning, dest, w.ts+3_600_000, hash
	return r
}

// TestLightningPaymentIsWithdrawnToOnceUnderAnyInvoice: the payee (here
// the client itself) can sign its invoice again with another description
// or expiry and the same payment hash. The invoice string differs, so
// LevelInvoicePaidOnce let a second withdrawal to the same payment
// through, which a rail that finds payments by their hash reports paid
// with nothing sent. From LevelInvoiceHashPaidOnce the second is refused
// while the first is open or paid, and once the first is returned the
// payment may be tried again. A retry under the first key still gets the
// first answer.
func TestLightningPaymentIsWithdrawnToOnceUnderAnyInvoice(t *testing.T) {
	hash, otherHash := ref64('a'), ref64('b')
	for _, level := range []uint32{funds.LevelInvoiceHashPaidOnce - 1, funds.LevelInvoiceHashPaidOnce} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newRailWorldAt(t, level)
			acct, key := w.account(big)
			first := w.request(acct, key, w.lnReq("ln-1", "lntb1firstsigning", hash))
			wantOK(t, first)
			// The same key and invoice: the first answer, from the
			// idempotency store and, past it, from the withdrawal itself.
			if again := w.request(acct, key, w.lnReq("ln-1", "lntb1firstsigning", hash)); !bytes.Equal(again.Body, first.Body) {
				t.Fatalf("retry answered %d %s, want %s", again.Status, again.Body, first.Body)
			}
			retry := w.lnReq("ln-1b", "lntb1firstsigning", hash) // a fresh railRef, as the serving node draws
			retry.IdempotencyKey = "k-ln-1"
			if late := w.at(w.cmd(CmdWithdrawalRequested, acct, key, "", retry)); late.Status != http.StatusCreated ||
				!strings.Contains(string(late.Body), `"railRef":"ln-1"`) {
				t.Fatalf("late retry answered %d %s, want the first withdrawal", late.Status, late.Body)
			}
			free := w.balance(ledger.Free(acct))

			resigned := w.request(acct, key, w.lnReq("ln-2", "lntb1resignedwithanotherdescription", hash))
			if level < funds.LevelInvoiceHashPaidOnce {
				wantOK(t, resigned) // the hole: the same payment, charged twice
				if got := w.withdrawal("ln-1").PaymentHash; got != "" {
					t.Fatalf("below the level the hash %q was recorded", got)
				}
				return
			}
			wantRefused(t, resigned, http.StatusConflict, wire.CodeConflict)
			if !strings.Contains(string(resigned.Body), "ln-1") {
				t.Fatalf("the refusal does not name the first withdrawal: %s", resigned.Body)
			}
			if got := w.balance(ledger.Free(acct)); got != free {
				t.Fatalf("free %d after the refusal, want %d", got, free)
			}
			if got := w.withdrawal("ln-1").PaymentHash; got != hash {
				t.Fatalf("recorded payment hash %q, want %q", got, hash)
			}
			// Paid: still refused under a third string.
			wantOK(t, w.result("ln-1", funds.PayoutPaid, ""))
			wantRefused(t, w.request(acct, key, w.lnReq("ln-3", "lntb1thirdsigning", hash)), http.StatusConflict, wire.CodeConflict)

			// Another payment goes through; once returned its hash is free.
			wantOK(t, w.request(acct, key, w.lnReq("ln-4", "lntb1otherpayment", otherHash)))
			wantRefused(t, w.request(acct, key, w.lnReq("ln-5", "lntb1otherpaymentresigned", otherHash)), http.StatusConflict, wire.CodeConflict)
			wantOK(t, w.result("ln-4", funds.PayoutReturned, "no route"))
			wantOK(t, w.request(acct, key, w.lnReq("ln-6", "lntb1otherpaymentresigned", otherHash)))

			// Each account is held to its own withdrawals.
			b, kb := w.account(big)
			wantOK(t, w.request(b, kb, w.lnReq("ln-7", "lntb1thirdsigning", hash)))
		})
	}
}

// TestPaymentHashFallsBackToTheInvoiceString: a withdrawal recorded
// without a payment hash (before the level, or from a serving node that
// sent none) is matched by its invoice string only, as before.
func TestPaymentHashFallsBackToTheInvoiceString(t *testing.T) {
	w := newRailWorldAt(t, funds.LevelInvoiceHashPaidOnce)
	acct, key := w.account(big)
	hash := ref64('c')
	wantOK(t, w.request(acct, key, w.lnReq("old-1", "lntb1recordedwithouthash", "")))
	// The same string with a hash: refused by the string.
	wantRefused(t, w.request(acct, key, w.lnReq("old-2", "lntb1recordedwithouthash", hash)), http.StatusConflict, wire.CodeConflict)
	// Another string, the hash unknown to the record: nothing to compare.
	wantOK(t, w.request(acct, key, w.lnReq("old-3", "lntb1anotherstring", hash)))
	// A request without a hash is compared by its string only.
	wantOK(t, w.request(acct, key, w.lnReq("old-4", "lntb1yetanotherstring", "")))
	wantRefused(t, w.request(acct, key, w.lnReq("old-5", "lntb1anotherstring", "")), http.StatusConflict, wire.CodeConflict)
}

// TestWithdrawalPaymentHashIsValidated: the serving node writes the hash
// from the decoded invoice; from the level a malformed one (or one on a
// Spark withdrawal) is refused and nothing is recorded. Below the level
// the field is ignored, as a build before it ignores it.
func TestWithdrawalPaymentHashIsValidated(t *testing.T) {
	bad := []struct {
		name string
		mut  func(r *funds.WithdrawalRequest)
	}{
		{"upper case", func(r *funds.WithdrawalRequest) { r.PaymentHash = strings.ToUpper(ref64('d')) }},
		{"63 digits", func(r *funds.WithdrawalRequest) { r.PaymentHash = ref64('d')[1:] }},
		{"65 digits", func(r *funds.WithdrawalRequest) { r.PaymentHash = ref64('d') + "0" }},
		{"not hex", func(r *funds.WithdrawalRequest) { r.PaymentHash = ref64('g') }},
		{"on spark", func(r *funds.WithdrawalRequest) {
			r.Path, r.Destination, r.DestExpiresAtMs = funds.PathSpark, sparkDest, 0
		}},
	}
	for _, level := range []uint32{funds.LevelInvoiceHashPaidOnce - 1, funds.LevelInvoiceHashPaidOnce} {
		for i, c := range bad {
			t.Run(fmt.Sprintf("level=%d/%s", level, c.name), func(t *testing.T) {
				w := newRailWorldAt(t, level)
				acct, key := w.account(big)
				free := w.balance(ledger.Free(acct))
				r := w.lnReq(fmt.Sprint("bad-", i), "lntb1invoice", ref64('d'))
				c.mut(&r)
				res := w.request(acct, key, r)
				if level < funds.LevelInvoiceHashPaidOnce {
					wantOK(t, res)
					if got := w.withdrawal(r.RailRef).PaymentHash; got != "" {
						t.Fatalf("below the level the hash %q was recorded", got)
					}
					return
				}
				wantRefused(t, res, http.StatusBadRequest, wire.CodeValidation)
				if got := w.balance(ledger.Free(acct)); got != free {
					t.Fatalf("free %d after the refusal, want %d", got, free)
				}
				w.m.Read(func(st *State, _ uint64) {
					if _, ok := st.Funds.WithdrawalByRailRef[r.RailRef]; ok {
						t.Fatal("the refused withdrawal was recorded")
					}
				})
			})
		}
	}
}

// legacyWithdrawal is funds.Withdrawal before PaymentHash: a record
// without a hash must encode to exactly its bytes, and its bytes must
// decode to the record.
type legacyWithdrawal struct {
	Seq            uint64 `cbor:"1,keyasint"`
	AccountID      string `cbor:"2,keyasint"`
	IdempotencyKey string `cbor:"3,keyasint"`
	AmountMsat     int64  `cbor:"4,keyasint"`
	FeeMsat        int64  `cbor:"5,keyasint"`
	State          string `cbor:"6,keyasint"`
	Path           string `cbor:"7,keyasint"`
	Destination    string `cbor:"8,keyasint"`
	Reason         string `cbor:"9,keyasint,omitempty"`
	RailRef        string `cbor:"10,keyasint"`
	RequestedTsMs  int64  `cbor:"11,keyasint"`
	PaidTsMs       int64  `cbor:"12,keyasint,omitempty"`
	ClosedTsMs     int64  `cbor:"13,keyasint,omitempty"`
	CreatedQueued  bool   `cbor:"14,keyasint,omitempty"`
	LastSeq        uint64 `cbor:"15,keyasint,omitempty"`
}

// TestWithdrawalPaymentHashSnapshot: a withdrawal without a payment hash
// encodes to the bytes it had before the field (so existing snapshots and
// state hashes are unchanged) and old bytes restore; one with a hash
// survives a snapshot through both restore paths, and the rule still
// holds after the restore.
func TestWithdrawalPaymentHashSnapshot(t *testing.T) {
	old := legacyWithdrawal{Seq: 7, AccountID: "acc_1", IdempotencyKey: "k", AmountMsat: 10_000, FeeMsat: 1_000,
		State: funds.StatePaid, Path: funds.PathLightning, Destination: "lntb1x", Reason: "r", RailRef: "ln-1",
		RequestedTsMs: railT0, PaidTsMs: railT0 + 1, ClosedTsMs: railT0 + 1, CreatedQueued: true, LastSeq: 9}
	cur := funds.Withdrawal{Seq: old.Seq, AccountID: old.AccountID, IdempotencyKey: old.IdempotencyKey,
		AmountMsat: old.AmountMsat, FeeMsat: old.FeeMsat, State: old.State, Path: old.Path, Destination: old.Destination,
		Reason: old.Reason, RailRef: old.RailRef, RequestedTsMs: old.RequestedTsMs, PaidTsMs: old.PaidTsMs,
		ClosedTsMs: old.ClosedTsMs, CreatedQueued: old.CreatedQueued, LastSeq: old.LastSeq}
	if n := reflect.TypeOf(cur).NumField(); n != reflect.TypeOf(old).NumField()+1 {
		t.Fatalf("funds.Withdrawal has %d fields: a field besides PaymentHash needs this test extended", n)
	}
	oldBytes, curBytes := mustMarshal(t, old), mustMarshal(t, cur)
	if !bytes.Equal(oldBytes, curBytes) {
		t.Fatalf("a withdrawal without a hash encodes to %x, before the field %x", curBytes, oldBytes)
	}
	var back funds.Withdrawal
	if err := Unmarshal(oldBytes, &back); err != nil || !reflect.DeepEqual(back, cur) {
		t.Fatalf("old bytes decode to %+v (%v), want %+v", back, err, cur)
	}

	w := newRailWorldAt(t, funds.LevelInvoiceHashPaidOnce)
	acct, key := w.account(big)
	hash := ref64('e')
	wantOK(t, w.request(acct, key, w.lnReq("ln-1", "lntb1firstsigning", hash)))
	wantOK(t, w.request(acct, key, w.lnReq("ln-2", "lntb1nohash", "")))
	snap := snapOf(t, w.m)
	wantSameRestore(t, snap)

	w2 := &railWorld{replica: newReplica(t), ts: w.ts}
	if err := w2.m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if got := w2.withdrawal("ln-1").PaymentHash; got != hash {
		t.Fatalf("restored payment hash %q, want %q", got, hash)
	}
	if got := w2.withdrawal("ln-2").PaymentHash; got != "" {
		t.Fatalf("restored payment hash %q, want none", got)
	}
	wantRefused(t, w2.request(acct, key, w2.lnReq("ln-3", "lntb1resigned", hash)), http.StatusConflict, wire.CodeConflict)
}
