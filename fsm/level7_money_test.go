package fsm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/usdx"
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

// TestFreezeLogNeverDropsAWaitingEntry: the freeze log keeps
// usdx.FreezesKept entries. Below LevelFreezesKeptPending a full log
// dropped its oldest entry whatever its state, so a freeze still waiting
// for the custody worker was never sent. From the level an applied entry
// makes room, and with every kept entry waiting a new request is refused.
func TestFreezeLogNeverDropsAWaitingEntry(t *testing.T) {
	for _, level := range []uint32{usdx.LevelFreezesKeptPending - 1, usdx.LevelFreezesKeptPending} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := &usdxWorld{tradeWorld: newTradeWorldAt(t, level)}
			w.unchecked, w.m.opts.CheckInvariants = true, false // a thousand entries: the checks would dominate
			freeze := func(i int) *Result {
				return w.op(CmdUSDxFreeze, USDxFreezePayload{OpID: fmt.Sprintf("fz-%d", i), SparkAddress: fmt.Sprintf("sprt1addr%06d", i),
					Action: "unfreeze", Reason: "test"})
			}
			first := freeze(0)
			wantOK(t, first)
			var view struct{ Seq wire.Int }
			if err := json.Unmarshal(first.Body, &view); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < usdx.FreezesKept; i++ {
				wantOK(t, freeze(i))
			}
			pending := func() (n int, firstWaits bool) {
				w.m.Read(func(st *State, _ uint64) {
					for _, f := range st.USDx.PendingFreezes() {
						n++
						firstWaits = firstWaits || f.Seq == uint64(view.Seq)
					}
				})
				return n, firstWaits
			}
			res := freeze(usdx.FreezesKept)
			if level < usdx.LevelFreezesKeptPending {
				wantOK(t, res)
				if _, waits := pending(); waits {
					t.Fatal("below the level the oldest waiting entry was expected to be dropped")
				}
				return
			}
			wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
			if n, waits := pending(); n != usdx.FreezesKept || !waits {
				t.Fatalf("%d entries wait (the first among them: %v), want all %d", n, waits, usdx.FreezesKept)
			}
			// The custody worker applies the first: it makes room, and it is
			// the entry dropped for the next request.
			wantOK(t, w.op(CmdUSDxFreezeApplied, USDxFreezeAppliedPayload{Seq: uint64(view.Seq), IssuerRef: "iss-0"}))
			wantOK(t, freeze(usdx.FreezesKept+1))
			if n, _ := pending(); n != usdx.FreezesKept {
				t.Fatalf("%d entries wait, want %d", n, usdx.FreezesKept)
			}
		})
	}
}
