package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/node/rail"
)

// MaxPayoutsPerPass bounds how many open withdrawals one payout pass sends
// to the rail; the rest wait for the next pass (the next tick at most).
const MaxPayoutsPerPass = 64

// RailDriver returns the leader driver of the payment rail: on every tick,
// and at once when a withdrawal is requested, the leader sends open
// withdrawals (requested or queued) to r.Pay and proposes each answer as
// CmdWithdrawalResult, which is where money moves.
//
// A pass sends first the withdrawals this leader has not sent yet,
// requested ones before queued ones, oldest first, then asks again about
// payouts the rail answered "pending" once each one's back-off is over (a
// retrySchedule), so payouts held in flight by the rail never keep a newer
// withdrawal from it.
//
// Passes run one at a time on their own goroutine, so a slow rail never
// delays the tick. Pay is idempotent by RailRef across nodes (the Rail
// contract; the simulated rail keeps it through its shared SimBook), and
// the state machine applies one final answer per withdrawal and refuses the
// rest, so a pass repeated by a new leader, or racing an old one's last
// proposals, never pays twice. Register it once per node, before Start.
func RailDriver(r rail.Rail) func(*Node) {
	var once sync.Once
	kick := make(chan struct{}, 1)
	return func(n *Node) {
		once.Do(func() {
			n.wg.Add(1)
			go n.runPayouts(r, kick)
		})
		select {
		case kick <- struct{}{}:
		default: // a pass is already due
		}
	}
}

func (n *Node) runPayouts(r rail.Rail, kick chan struct{}) {
	defer n.wg.Done()
	sub := n.Events.Subscribe()
	defer n.Events.Unsubscribe(sub)
	var sched retrySchedule
	for {
		select {
		case <-n.stop:
			return
		case evs, ok := <-sub.C:
			if !ok {
				return
			}
			if !hasNewWithdrawal(evs) {
				continue
			}
		case <-kick:
		}
		if n.IsLeader() {
			n.payoutPass(r, &sched)
		}
	}
}

// hasNewWithdrawal reports whether evs hold a withdrawal just requested or
// queued, which the leader can send now instead of at the next tick.
func hasNewWithdrawal(evs []fsm.Event) bool {
	for _, ev := range evs {
		if v, ok := ev.Data.(funds.WithdrawalView); ok && ev.Kind == "withdrawal" && (v.State == funds.StateRequested || v.State == funds.StateQueued) {
			return true
		}
	}
	return false
}

type payoutJob struct {
	payout rail.Payout
	state  string
	reason string
}

// payoutPass sends up to MaxPayoutsPerPass open withdrawals, in the order
// sched picks them.
func (n *Node) payoutPass(r rail.Rail, sched *retrySchedule) {
	sched.inTerm(n.Raft.CurrentTerm())
	var open []payoutJob
	n.machine.Read(func(st *fsm.State, _ uint64) {
		open = make([]payoutJob, 0, len(st.Funds.Open))
		// Requested before queued: a requested withdrawal was promised to
		// the rail at once (its create answer said queued: false), while a
		// queued one waits behind the rail already.
		for _, state := range [...]string{funds.StateRequested, funds.StateQueued} {
			for _, seq := range st.Funds.Open {
				if w := st.Funds.Withdrawals[seq]; w.State == state {
					open = append(open, payoutJob{
						payout: rail.Payout{RailRef: w.RailRef, Path: w.Path, Destination: w.Destination, AmountMsat: w.AmountMsat},
						state:  w.State, reason: w.Reason})
				}
			}
		}
	})
	picked := sched.pick(len(open), func(i int) string { return open[i].payout.RailRef }, time.Now(), MaxPayoutsPerPass)
	for _, i := range picked {
		select {
		case <-n.stop:
			return
		default:
		}
		if !n.IsLeader() {
			return
		}
		j := open[i]
		res := r.Pay(j.payout)
		if res.Status == rail.PayoutPending && j.state == funds.StateQueued && funds.PendingReason(res.Reason) == j.reason {
			sched.wait(j.payout.RailRef, time.Now()) // nothing new to record
			continue
		}
		_, err := n.proposeInternal(fsm.CmdWithdrawalResult, funds.PayoutResult{RailRef: j.payout.RailRef, Status: res.Status, Reason: res.Reason})
		if err != nil {
			// No quorum now: the payout keeps its place in sched, the
			// next pass asks again, and Pay answers the same.
			return
		}
		if res.Status == rail.PayoutPending {
			sched.wait(j.payout.RailRef, time.Now())
		} else {
			sched.forget(j.payout.RailRef)
		}
	}
}

// SettleInvoice plays the payer of a deposit invoice on a rail that can
// simulate payments (perpd admin rail pay-invoice): the rail checks that it
// issued the invoice, that it has not expired and the amount (0 = the
// invoice's own), then the settlement is proposed as CmdDepositSettled with
// the payment ref as rail reference. The state machine finds the account in
// its record of the invoice, and refuses an unknown, expired or already
// paid invoice. A rail refusal is returned as its *rail.ValidationError.
//
// The payment happens at the leader's log clock (ClockMs), not its wall
// clock: the state machine judges the settlement time against log time
// (not before the invoice was recorded, not after the entry), and log time
// may lag the calendar for hours after an outage (it catches up at a tenth
// of real time) or lead it after a wall-clock step back. A wall-clock
// stamp then lay outside that window and a paid invoice was refused.
func (n *Node) SettleInvoice(ctx context.Context, sim rail.Simulator, invoice string, amountMsat int64) (*fsm.Result, error) {
	st, err := sim.SimulatePayment(invoice, amountMsat, n.ClockMs())
	if err != nil {
		return nil, err
	}
	cmd, err := fsm.NewCommand(fsm.CmdDepositSettled, funds.Settlement{AmountMsat: st.AmountMsat, FeeMsat: st.FeeMsat,
		RailRef: st.PaymentRef, Path: funds.PathLightning, SettledTsMs: st.SettledAtMs})
	if err != nil {
		return nil, err
	}
	// A fresh key per call: a retry inside Propose (a leader change) applies
	// once, while a second pay-invoice is judged afresh, and refused.
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	cmd.IdemKey, cmd.ReqHash = "rail:settle:"+hex.EncodeToString(nonce[:]), []byte(st.PaymentRef)
	return n.Propose(ctx, cmd)
}
