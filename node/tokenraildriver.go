package node

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node/tokenrail"
)

// MaxTokenOpsPerPass bounds the USDx withdrawals and freezes one pass of
// the token rail driver sends; the rest wait for the next tick.
const MaxTokenOpsPerPass = 64

// tokenCallTimeout bounds one call to the token rail, so that a call that
// hangs costs its own item a retry, not the rest of the pass.
const tokenCallTimeout = 10 * time.Second

// TokenRailDriver returns the leader driver of the USDx token rail: on
// every tick the leader sends the requested USDx withdrawals to
// r.Transfer and the requested freeze log entries to r.Freeze, and
// proposes each answer (CmdUSDxWithdrawalPaid, CmdUSDxFreezeApplied).
//
// A call that fails is logged and the pass goes on with the next item;
// the failed item is tried again on a later pass after a back-off, and
// the items not tried yet go first (a retrySchedule each for withdrawals
// and freezes), so one transfer the issuer keeps refusing never holds up
// the others. The exception is freeze entries of one address: a later one
// waits until the earlier is applied, so the address ends as the latest
// entry says.
//
// Transfer is idempotent by withdrawal id, and the state machine records
// each withdrawal's payment and each freeze once (a repeat is refused), so
// a pass repeated by a new leader never pays twice. Passes run one at a
// time on their own goroutine, so a slow rail never delays the tick.
func TokenRailDriver(r tokenrail.Rail) func(*Node) {
	var once sync.Once
	kick := make(chan struct{}, 1)
	return func(n *Node) {
		once.Do(func() {
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				var wdSched, frzSched retrySchedule
				for {
					select {
					case <-n.stop:
						return
					case <-kick:
					}
					if n.IsLeader() {
						n.tokenPass(r, &wdSched, &frzSched)
					}
				}
			}()
		})
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

type tokenWithdrawal struct {
	id, railID, addr string
	usdx             int64
}

type tokenFreeze struct {
	seq    uint64
	addr   string
	freeze bool
}

// tokenPass sends up to MaxTokenOpsPerPass requested USDx withdrawals and
// as many requested freezes, in the order their schedules pick them.
func (n *Node) tokenPass(r tokenrail.Rail, wdSched, frzSched *retrySchedule) {
	term := n.Raft.CurrentTerm()
	wdSched.inTerm(term)
	frzSched.inTerm(term)
	var wds []tokenWithdrawal
	var frz []tokenFreeze
	n.machine.Read(func(st *fsm.State, _ uint64) {
		if st.USDx == nil {
			return // below fsm.LevelDomains
		}
		for _, w := range st.USDx.PendingWithdrawals() {
			wds = append(wds, tokenWithdrawal{w.ID, w.TransferID(), w.SparkAddress, w.Usdx})
		}
		// Only the oldest pending entry of each address is sent: entries of
		// one address must reach the issuer in log order, or a later entry
		// sent past an earlier one the issuer failed would be undone when
		// the earlier one is retried (freeze-then-unfreeze ending frozen).
		// Entries of other addresses still pass a failing one.
		held := map[string]bool{}
		for _, f := range st.USDx.PendingFreezes() {
			if held[f.SparkAddress] {
				continue
			}
			held[f.SparkAddress] = true
			frz = append(frz, tokenFreeze{f.Seq, f.SparkAddress, f.Action == "freeze"})
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // shutdown waits for the drivers: it must not wait for the rail
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	now := time.Now()
	for _, i := range wdSched.pick(len(wds), func(i int) string { return wds[i].id }, now, MaxTokenOpsPerPass) {
		if ctx.Err() != nil || !n.IsLeader() {
			return
		}
		w := wds[i]
		callCtx, cancelCall := context.WithTimeout(ctx, tokenCallTimeout)
		ref, err := r.Transfer(callCtx, w.railID, w.usdx, w.addr)
		cancelCall()
		if err != nil {
			delay := wdSched.wait(w.id, time.Now())
			n.cfg.Logger.Warn("usdx transfer failed; the pass goes on", "withdrawal", w.id, "err", err, "retry_in", delay)
			continue
		}
		if _, err := n.proposeInternal(fsm.CmdUSDxWithdrawalPaid, fsm.USDxWithdrawalPaidPayload{WithdrawalID: w.id, IssuerRef: ref}); err != nil {
			return // no quorum now; the next pass asks again, and Transfer answers the same
		}
		wdSched.forget(w.id)
	}
	freezeKey := func(i int) string { return strconv.FormatUint(frz[i].seq, 10) }
	for _, i := range frzSched.pick(len(frz), freezeKey, now, MaxTokenOpsPerPass) {
		if ctx.Err() != nil || !n.IsLeader() {
			return
		}
		f := frz[i]
		callCtx, cancelCall := context.WithTimeout(ctx, tokenCallTimeout)
		ref, impacted, err := r.Freeze(callCtx, f.addr, f.freeze)
		cancelCall()
		if err != nil {
			delay := frzSched.wait(freezeKey(i), time.Now())
			n.cfg.Logger.Warn("usdx freeze failed; the pass goes on", "seq", f.seq, "address", f.addr, "err", err, "retry_in", delay)
			continue
		}
		if _, err := n.proposeInternal(fsm.CmdUSDxFreezeApplied, fsm.USDxFreezeAppliedPayload{Seq: f.seq, IssuerRef: ref, ImpactedMicro: impacted}); err != nil {
			return
		}
		frzSched.forget(freezeKey(i))
	}
}
