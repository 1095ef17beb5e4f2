package node

import (
	"context"
	"sync"
	"time"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/node/tokenrail"
)

// MaxTokenOpsPerPass bounds the USDx withdrawals and freezes one pass of
// the token rail driver sends; the rest wait for the next tick.
const MaxTokenOpsPerPass = 64

// TokenRailDriver returns the leader driver of the USDx token rail: on
// every tick the leader sends the requested USDx withdrawals to
// r.Transfer and the requested freeze log entries to r.Freeze, and
// proposes each answer (CmdUSDxWithdrawalPaid, CmdUSDxFreezeApplied).
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
				for {
					select {
					case <-n.stop:
						return
					case <-kick:
					}
					if n.IsLeader() {
						n.tokenPass(r)
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

func (n *Node) tokenPass(r tokenrail.Rail) {
	type wd struct {
		id, railID, addr string
		usdx             int64
	}
	var wds []wd
	var frz []struct {
		seq    uint64
		addr   string
		freeze bool
	}
	n.machine.Read(func(st *fsm.State, _ uint64) {
		if st.USDx == nil {
			return // below fsm.LevelDomains
		}
		for _, w := range st.USDx.PendingWithdrawals() {
			if len(wds) == MaxTokenOpsPerPass {
				break
			}
			wds = append(wds, wd{w.ID, w.TransferID(), w.SparkAddress, w.Usdx})
		}
		for _, f := range st.USDx.PendingFreezes() {
			if len(frz) == MaxTokenOpsPerPass {
				break
			}
			frz = append(frz, struct {
				seq    uint64
				addr   string
				freeze bool
			}{f.Seq, f.SparkAddress, f.Action == "freeze"})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, w := range wds {
		if !n.IsLeader() {
			return
		}
		ref, err := r.Transfer(ctx, w.railID, w.usdx, w.addr)
		if err != nil {
			return // the next pass asks again
		}
		if _, err := n.proposeInternal(fsm.CmdUSDxWithdrawalPaid, fsm.USDxWithdrawalPaidPayload{WithdrawalID: w.id, IssuerRef: ref}); err != nil {
			return
		}
	}
	for _, f := range frz {
		if !n.IsLeader() {
			return
		}
		ref, impacted, err := r.Freeze(ctx, f.addr, f.freeze)
		if err != nil {
			return
		}
		if _, err := n.proposeInternal(fsm.CmdUSDxFreezeApplied, fsm.USDxFreezeAppliedPayload{Seq: f.seq, IssuerRef: ref, ImpactedMicro: impacted}); err != nil {
			return
		}
	}
}
