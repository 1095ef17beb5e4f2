package httpapi

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/node/rail"
)

// A withdrawal retried with the same idempotency-key and body after its
// invoice expired gets the stored 201. The serving node's clock refuses
// nothing before the state machine's idempotency replay: a client that
// timed out and retried must not be told its withdrawal failed (it exists,
// and may be paid), or it may withdraw again.
func TestWithdrawalRetriedAfterItsInvoiceExpiredGetsTheStoredAnswer(t *testing.T) {
	a := newRailAPI(t)
	key, _ := a.funded()
	inv := payeeInvoice(t, rail.InvoiceRequest{AmountMsat: 5_000_000, ExpirySeconds: 3, NowMs: time.Now().UnixMilli()})
	body := map[string]any{"invoice": inv.PaymentRequest, "amountMsat": strconv.Itoa(5_000_000)}
	idem := nextIdem()
	first := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem, body: body})
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	time.Sleep(time.Until(time.UnixMilli(inv.ExpiresAtMs)) + 200*time.Millisecond)
	retry := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem, body: body})
	if retry.status != 201 || string(retry.body) != string(first.body) {
		t.Fatalf("retry with the same key and body: %d %s, want the stored 201 %s", retry.status, retry.body, first.body)
	}
}

// A new withdrawal to an expired invoice is refused with 400 validation
// (by the state machine, in log time) and moves no money; its quote is
// refused the same way (by the serving node).
func TestNewWithdrawalToAnExpiredInvoiceIsRefused(t *testing.T) {
	a := newRailAPI(t)
	key, acct := a.funded()
	issued := time.Now().Add(-time.Minute).UnixMilli()
	inv := payeeInvoice(t, rail.InvoiceRequest{AmountMsat: 5_000_000, ExpirySeconds: 10, NowMs: issued})
	body := map[string]any{"invoice": inv.PaymentRequest, "amountMsat": "5000000"}
	free0 := a.free(acct)
	for _, path := range []string{"/v1/withdrawals/quote", "/v1/withdrawals"} {
		r := a.do(req{method: "POST", path: path, key: key, idem: nextIdem(), body: body})
		msg, _ := r.json(t)["error"].(string)
		if r.status != 400 || r.code() != "validation" || !strings.Contains(msg, "invoice expired at "+strconv.FormatInt(inv.ExpiresAtMs, 10)) {
			t.Errorf("%s to an expired invoice: %d %s", path, r.status, r.body)
		}
	}
	if a.free(acct) != free0 {
		t.Fatal("a refused withdrawal moved money")
	}
	page := a.do(req{method: "GET", path: "/v1/withdrawals", key: key}).json(t)
	if ws := page["withdrawals"].([]any); len(ws) != 0 {
		t.Fatalf("a refused withdrawal was recorded: %v", ws)
	}
}
