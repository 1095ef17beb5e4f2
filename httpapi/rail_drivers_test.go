package httpapi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
	"github.com/perpd/perpd/node/tokenrail"
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
	for i := 0; i < node.MaxPayoutsPerPass; i++ {
		// An invoice each: one is withdrawn to once (funds.LevelInvoicePaidOnce).
		r := a.withdraw(key, map[string]any{"invoice": payoutInvoice(t, 1_000), "amountMsat": "1000"})
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

// refusingTokenRail is the simulated token rail, except that the issuer
// refuses every transfer to one address: a USDx withdrawal that keeps
// failing.
type refusingTokenRail struct {
	*tokenrail.Sim
	refused  string
	attempts atomic.Int64 // transfers to refused
}

func (r *refusingTokenRail) Transfer(ctx context.Context, id string, usdx int64, addr string) (string, error) {
	if addr == r.refused {
		r.attempts.Add(1)
		return "", errors.New("the issuer refuses this address")
	}
	return r.Sim.Transfer(ctx, id, usdx, addr)
}

// A USDx withdrawal whose transfer keeps failing does not block the token
// rail: a later withdrawal is paid and a later freeze applied, while the
// failing one stays requested and is tried again on a later pass. Before,
// one failing Transfer ended every pass, so nothing after it was sent.
func TestTokenRailDriverPassesAFailingTransfer(t *testing.T) {
	tr := &refusingTokenRail{Sim: tokenrail.NewSim(), refused: "sprt1refused"}
	a := newDrivenTestAPI(t, []Option{WithTokenRail(tr)}, []func(*node.Node){node.TokenRailDriver(tr)})
	a.listMarkets()
	a.freshPrices()
	key, _ := a.tradingAccount()
	a.mintUSDx(key, "10")
	withdraw := func(addr, amount string) string {
		r := a.do(req{method: "POST", path: "/v1/usdx/withdrawals", key: key, idem: nextIdem(),
			body: map[string]any{"usdx": amount, "sparkAddress": addr}})
		if r.status != 201 {
			t.Fatalf("withdraw to %s: %d %s", addr, r.status, r.body)
		}
		return r.json(t)["withdrawalId"].(string)
	}
	stuck := withdraw(tr.refused, "2")
	waitFor(t, "the failing transfer to be tried", func() bool { return tr.attempts.Load() > 0 })
	later := withdraw("sprt1receiver", "3")
	a.usdxOp(fsm.CmdUSDxFreeze, fsm.USDxFreezePayload{SparkAddress: "sprt1badactor", Action: "freeze", Reason: "sanctions"})
	state := func(id string) (s string) {
		a.node.Machine().Read(func(st *fsm.State, _ uint64) { s = st.USDx.Withdrawals[id].State })
		return s
	}
	waitFor(t, "the later withdrawal paid and the freeze applied", func() bool {
		applied := false
		a.node.Machine().Read(func(st *fsm.State, _ uint64) {
			applied = len(st.USDx.Freezes) == 1 && st.USDx.Freezes[0].State == usdx.FreezeApplied
		})
		return applied && state(later) == usdx.WithdrawalPaid
	})
	if s := state(stuck); s != usdx.WithdrawalRequested {
		t.Fatalf("the refused withdrawal is %s, want still requested", s)
	}
	waitFor(t, "the failing transfer to be tried again", func() bool { return tr.attempts.Load() > 1 })
}

// flakyFreezeRail is the simulated token rail whose issuer fails freeze
// calls (not unfreezes) while failing is set, and records the actions it
// carried out, in order.
type flakyFreezeRail struct {
	*tokenrail.Sim
	failing  atomic.Bool
	attempts atomic.Int64
	mu       sync.Mutex
	done     []string // "freeze addr" / "unfreeze addr", in the order the issuer applied them
}

func (r *flakyFreezeRail) Freeze(ctx context.Context, addr string, freeze bool) (string, int64, error) {
	if freeze && r.failing.Load() {
		r.attempts.Add(1)
		return "", 0, errors.New("issuer unavailable")
	}
	ref, impacted, err := r.Sim.Freeze(ctx, addr, freeze)
	if err == nil {
		r.mu.Lock()
		action := "unfreeze "
		if freeze {
			action = "freeze "
		}
		r.done = append(r.done, action+addr)
		r.mu.Unlock()
	}
	return ref, impacted, err
}

// Freeze log entries of one address reach the issuer in the order they
// were written, even when the issuer fails the earlier one for a while:
// the address ends as the latest entry says. Before, the driver sent the
// later entry past the failing one (it passes failing items) and applied
// the earlier one last, so "freeze, then unfreeze" left the address frozen
// and "unfreeze, then freeze" left a sanctioned address unfrozen, at the
// issuer and in the state alike.
func TestTokenRailDriverKeepsEachAddressesFreezesInOrder(t *testing.T) {
	tr := &flakyFreezeRail{Sim: tokenrail.NewSim()}
	tr.failing.Store(true)
	a := newDrivenTestAPI(t, []Option{WithTokenRail(tr)}, []func(*node.Node){node.TokenRailDriver(tr)})
	const addr = "sprt1flipflop"
	a.usdxOp(fsm.CmdUSDxFreeze, fsm.USDxFreezePayload{SparkAddress: addr, Action: "freeze", Reason: "by mistake"})
	waitFor(t, "the freeze to be tried", func() bool { return tr.attempts.Load() > 0 })
	a.usdxOp(fsm.CmdUSDxFreeze, fsm.USDxFreezePayload{SparkAddress: addr, Action: "unfreeze", Reason: "the mistake undone"})
	time.Sleep(300 * time.Millisecond) // several passes while the issuer still fails freezes
	tr.failing.Store(false)
	var frozen []string
	waitFor(t, "both entries applied", func() bool {
		pending := 1
		a.node.Machine().Read(func(st *fsm.State, _ uint64) {
			pending, frozen = len(st.USDx.PendingFreezes()), append([]string(nil), st.USDx.Frozen...)
		})
		return pending == 0
	})
	tr.mu.Lock()
	done := append([]string(nil), tr.done...)
	tr.mu.Unlock()
	if len(done) == 0 || done[len(done)-1] != "unfreeze "+addr || len(frozen) != 0 {
		t.Fatalf("issuer applied %v, state frozen %v: want the unfreeze last and nothing frozen", done, frozen)
	}
}
