package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node/rail"
)

// resignedInvoices are two invoices of one payee for one payment: the
// same payment hash, signed again with another description and expiry.
func resignedInvoices(t *testing.T, amountMsat int64) (first, second, hashHex string) {
	t.Helper()
	key, err := rail.NodeKeyFromSecret("some payee")
	if err != nil {
		t.Fatal(err)
	}
	preimage := sha256.Sum256([]byte("the payee's preimage"))
	f := rail.InvoiceFields{Network: rail.Testnet, AmountMsat: amountMsat, TimestampSec: time.Now().Unix(),
		PaymentHash: sha256.Sum256(preimage[:]), PaymentSecret: sha256.Sum256([]byte("secret")),
		Description: "coffee", ExpirySeconds: 3600, MinFinalCLTVExpiry: 80}
	if first, err = rail.EncodeInvoice(f, key); err != nil {
		t.Fatal(err)
	}
	f.Description, f.ExpirySeconds = "coffee, again", 7200
	if second, err = rail.EncodeInvoice(f, key); err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatal("the two signings are the same invoice")
	}
	return first, second, hex.EncodeToString(f.PaymentHash[:])
}

// A client that signs its own invoice again (another description, the
// same payment hash) cannot withdraw to the same payment twice: the
// second is refused 409 conflict while the first is in flight, though
// the invoice strings differ (funds.LevelInvoiceHashPaidOnce). A retry
// of the first under its idempotency key still gets the first answer.
func TestWithdrawalToAResignedInvoiceIsRefused(t *testing.T) {
	// Lightning payouts stay in flight, so the first withdrawal stays open.
	a := newRailAPIWith(t, func(s *rail.SimRail) rail.Rail { return inFlightRail{s} })
	key, _ := a.funded()
	first, second, hash := resignedInvoices(t, 1_000)

	idem := nextIdem()
	body := map[string]any{"invoice": first, "amountMsat": "1000"}
	r1 := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem, body: body})
	if r1.status != 201 {
		t.Fatalf("first withdrawal: %d %s", r1.status, r1.body)
	}
	ref := r1.json(t)["railRef"].(string)
	if r := a.do(req{method: "POST", path: "/v1/withdrawals", key: key, idem: idem, body: body}); r.status != 201 || r.json(t)["railRef"] != ref {
		t.Fatalf("retry under the first key: %d %s, want 201 with railRef %s", r.status, r.body, ref)
	}
	r2 := a.withdraw(key, map[string]any{"invoice": second, "amountMsat": "1000"})
	wantCode(t, r2, 409, "conflict")

	var recorded string
	a.node.Machine().Read(func(st *fsm.State, _ uint64) {
		recorded = st.Funds.Withdrawals[st.Funds.WithdrawalByRailRef[ref]].PaymentHash
	})
	if recorded != hash {
		t.Fatalf("recorded payment hash %q, want %q", recorded, hash)
	}
}
