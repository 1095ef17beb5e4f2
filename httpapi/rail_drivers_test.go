package httpapi

import (
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

// inFlightRail is the simulated rail, except that a Lightning payout stays
// in flight: Pay answers "pending" (the Rail contract's "ask again later"),
// as a real Lightning rail does while an HTLC is unresolved.
type inFlightRail struct{ *rail.SimRail }

func (r inFlightRail) Pay(p rail.Payout) rail.PayoutResult {
	if p.Path == rail.PathLightning {
		return rail.PayoutResult{Status: rail.PayoutPending, Reason: "HTLC in flight"}
	}
	return r.SimRail.Pay(p)
}

// A withdrawal created with queued:false is handed to the rail at once,
// however many older payouts the rail holds in flight: a full pass of
// pending Lightning payouts (MaxPayoutsPerPass of them) does not keep a
// later Spark withdrawal from the rail. Found by a review: the driver
// took the oldest MaxPayoutsPerPass open withdrawals on every pass, so the
// Spark payout was never sent.
func TestPayoutDriverSendsNewWithdrawalsPastPendingPayouts(t *testing.T) {
	a := newRailAPIWith(t, func(s *rail.SimRail) rail.Rail { return inFlightRail{s} })
	key, _ := a.funded()
	inv := payoutInvoice(t, 1_000)
	for i := 0; i < node.MaxPayoutsPerPass; i++ {
		r := a.withdraw(key, map[string]any{"invoice": inv, "amountMsat": "1000"})
		if r.status != 201 {
			t.Fatalf("lightning withdrawal %d: %d %s", i, r.status, r.body)
		}
	}
	r := a.withdraw(key, map[string]any{"toAddress": a.sparkAddr("starved"), "amountMsat": "1000000"})
	if r.status != 201 || r.json(t)["queued"] != false {
		t.Fatalf("spark withdrawal: %d %s", r.status, r.body)
	}
	ref := r.json(t)["railRef"].(string)
	// The simulated rail pays a Spark payout at once; give the driver
	// plenty of passes (a tick is 50 ms).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if a.rail.Book().Executed() > 0 {
			a.waitState(key, ref, "paid")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	var state string
	a.node.Machine().Read(func(st *fsm.State, _ uint64) {
		state = st.Funds.Withdrawals[st.Funds.WithdrawalByRailRef[ref]].State
	})
	t.Fatalf("spark withdrawal %s never reached the rail (state %s): it waits behind %d pending Lightning payouts",
		ref, state, node.MaxPayoutsPerPass)
}
