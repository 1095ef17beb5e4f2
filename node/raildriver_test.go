package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/node/rail"
)

// silentPendingRail holds every payout in flight without a reason, which
// the Rail contract allows (Reason is "why it is pending", not required).
type silentPendingRail struct{ *rail.SimRail }

func (r silentPendingRail) Pay(rail.Payout) rail.PayoutResult {
	return rail.PayoutResult{Status: rail.PayoutPending}
}

// A payout the rail keeps pending is proposed once, when it becomes
// queued; asking again and hearing the same is not proposed (no log
// traffic while a payout waits). With no reason from the rail the state
// machine stores a default one, and the driver compared the rail's empty
// reason with it: every re-ask, every 1 to 30 s per pending payout, was
// proposed again as an entry that changed nothing.
func TestPayoutDriverDoesNotReproposeAnUnchangedPending(t *testing.T) {
	sim, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: make32(), Book: rail.NewSimBook()})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{ID: "payer", DataDir: t.TempDir(), RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:1",
		AdminAddr: "127.0.0.1:2", Bootstrap: true, AdminToken: "payout-test-token", TickInterval: 50 * time.Millisecond,
		Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n.AddLeaderDriver(RailDriver(silentPendingRail{sim}))
	n.Start()
	t.Cleanup(func() { _ = n.Shutdown() })
	waitFor(t, 10*time.Second, "genesis", func() bool {
		ok := false
		n.Machine().Read(func(st *fsm.State, _ uint64) { ok = st.Genesis != nil })
		return ok
	})
	propose := func(cmd *fsm.Command) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := n.Propose(ctx, cmd)
		if err != nil || !res.OK() {
			t.Fatalf("%v: %v %+v", cmd.Type, err, res)
		}
	}
	sum := sha256.Sum256([]byte("k"))
	signup, _ := fsm.NewCommand(fsm.CmdSignup, access.NewAccount{AccountID: "acc", KeyID: "key", KeyHashHex: hex.EncodeToString(sum[:])})
	propose(signup)
	deposit, _ := fsm.NewCommand(fsm.CmdDepositSettled, funds.Settlement{AccountID: "acc", AmountMsat: 1_000_000, RailRef: "in-1", Path: funds.PathSpark})
	propose(deposit)
	wd, _ := fsm.NewCommand(fsm.CmdWithdrawalRequested, funds.WithdrawalRequest{AmountMsat: 1_000, FeeMsat: 2_001,
		Path: funds.PathLightning, Destination: "lntb1held", RailRef: "wd-held"})
	wd.Account, wd.KeyID = "acc", "key"
	propose(wd)

	// The first answer queues it; the driver then asks again after 1 s and
	// after 2 s more.
	time.Sleep(3500 * time.Millisecond)
	var state string
	n.Machine().Read(func(st *fsm.State, _ uint64) {
		state = st.Funds.Withdrawals[st.Funds.WithdrawalByRailRef["wd-held"]].State
	})
	if state != funds.StateQueued {
		t.Fatalf("withdrawal is %s, want queued", state)
	}
	first, _ := n.store.FirstIndex()
	last, _ := n.store.LastIndex()
	results := 0
	var count func(b []byte)
	count = func(b []byte) {
		cmd, err := fsm.DecodeCommand(b)
		switch {
		case err != nil:
		case cmd.Type == fsm.CmdWithdrawalResult:
			results++
		case cmd.Type == fsm.CmdGroup:
			var g fsm.GroupPayload
			if fsm.Unmarshal(cmd.Payload, &g) == nil {
				for _, sub := range g.Cmds {
					count(sub)
				}
			}
		}
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := n.store.GetLog(i, &l); err == nil && l.Type == raft.LogCommand {
			count(l.Data)
		}
	}
	if results != 1 {
		t.Fatalf("%d payout results proposed for one payout pending throughout, want 1", results)
	}
}

func make32() []byte {
	k := make([]byte, 32)
	k[31] = 7
	return k
}
