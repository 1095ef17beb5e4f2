package fsm

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/wire"
)

// newRailWorldAt is a railWorld whose cluster started at feature level.
func newRailWorldAt(t *testing.T, level uint32) *railWorld {
	w := &railWorld{replica: newReplica(t), ts: railT0}
	wantOK(t, w.apply(mustCommand(t, CmdGenesis, railT0, GenesisPayload{FeatureLevel: level, Seed: 42, Deployment: "testnet"})))
	wantOK(t, w.apply(tickAt(w.ts)))
	return w
}

// TestLightningInvoiceIsWithdrawnToOnce: a client retrying a withdrawal
// to the same invoice under a new idempotency key made a second one, which
// a rail that finds payments by their hash could report paid with nothing
// sent. From LevelInvoicePaidOnce the second is refused while the first is
// open or paid; once the first is returned the invoice may be tried again.
// A retry under the first key still gets the first answer.
func TestLightningInvoiceIsWithdrawnToOnce(t *testing.T) {
	for _, level := range []uint32{funds.LevelInvoicePaidOnce - 1, funds.LevelInvoicePaidOnce} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newRailWorldAt(t, level)
			acct, key := w.account(big)
			ln := func(ref string) funds.WithdrawalRequest {
				r := wreq(ref, 10_000, 1_000)
				r.Path, r.Destination, r.DestExpiresAtMs = funds.PathLightning, "lntb1sameinvoice", w.ts+3_600_000
				return r
			}
			wantOK(t, w.request(acct, key, ln("ln-1")))
			wantOK(t, w.request(acct, key, ln("ln-1"))) // the same key: its answer again
			second := w.request(acct, key, ln("ln-2"))
			if level < funds.LevelInvoicePaidOnce {
				wantOK(t, second)
				return
			}
			wantRefused(t, second, http.StatusConflict, wire.CodeConflict)
			wantOK(t, w.result("ln-1", funds.PayoutPaid, ""))
			wantRefused(t, w.request(acct, key, ln("ln-3")), http.StatusConflict, wire.CodeConflict)

			// Another invoice goes through; a returned one may be tried again.
			other := ln("ln-4")
			other.Destination = "lntb1otherinvoice"
			wantOK(t, w.request(acct, key, other))
			wantOK(t, w.result("ln-4", funds.PayoutReturned, "no route"))
			again := ln("ln-5")
			again.Destination = "lntb1otherinvoice"
			wantOK(t, w.request(acct, key, again))

			// Each account is held to its own withdrawals.
			b, kb := w.account(big)
			wantOK(t, w.request(b, kb, ln("ln-6")))
		})
	}
}
