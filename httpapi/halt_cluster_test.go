package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/httpapi"
)

// Test-only commands: a handler that credits money and then panics, the
// shape of a money path broken halfway. cmdBreakOne breaks only on the
// replica whose state haltOn names (a fault on one machine); cmdBreakAll
// breaks on every replica at the same entry (a deterministic bug).
const (
	cmdBreakOne = fsm.TestCmdBase + 0x100
	cmdBreakAll = fsm.TestCmdBase + 0x101
)

var haltOn atomic.Pointer[fsm.State]

func init() {
	creditThenPanic := func(c *fsm.Ctx) (int, any, *wire.Refusal) {
		if err := c.St.Ledger.Credit(ledger.Free("victim"), 1_000_000); err != nil {
			return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "%v", err)
		}
		panic("fee transfer failed after the credit")
	}
	fsm.RegisterTestCommand(cmdBreakOne, func(c *fsm.Ctx) (int, any, *wire.Refusal) {
		if c.St == haltOn.Load() {
			return creditThenPanic(c)
		}
		return http.StatusOK, struct{}{}, nil
	})
	fsm.RegisterTestCommand(cmdBreakAll, creditThenPanic)
}

func healthOf(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	st, _, b := call(t, base, "GET", "/healthz", "", "", "")
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("healthz body %s: %v", b, err)
	}
	return st, h
}

// wantHaltedNode checks what a client and an operator see of a halted
// replica: /healthz 503 with the reason, every read and write refused.
func wantHaltedNode(t *testing.T, c *clustertest.Cluster, id string, index uint64) {
	t.Helper()
	m := c.Member(id)
	h := m.Node.Halted()
	if h == nil || h.Index != index || !strings.Contains(h.Reason, "fee transfer failed") {
		t.Fatalf("%s: halt %+v, want the panic at index %d", id, h, index)
	}
	st, body := healthOf(t, c.HTTP(id))
	if reason, _ := body["reason"].(string); st != http.StatusServiceUnavailable || body["ok"] != false || !strings.Contains(reason, "halted") {
		t.Fatalf("%s: healthz %d %v, want 503 with the halt reason", id, st, body)
	}
	// /healthz is public: it names the halt and its index, never the
	// panic's text (which may hold account ids, positions, amounts and
	// idempotency keys); that is for the operator's log and admin status.
	if reason, _ := body["reason"].(string); strings.Contains(reason, "fee transfer failed") || !strings.Contains(reason, fmt.Sprint(index)) {
		t.Fatalf("%s: public healthz reason %q: want the index and not the panic", id, reason)
	}
	for _, r := range []struct{ method, path, idem string }{
		{"GET", "/v1/markets", ""},
		{"GET", "/deployment", ""},
		{"POST", "/v1/signup", "after-halt-" + id},
	} {
		st, h, b := call(t, c.HTTP(id), r.method, r.path, "", r.idem, "{}")
		if st != http.StatusServiceUnavailable || !strings.Contains(string(b), `"code":"unavailable"`) || !strings.Contains(string(b), "halted") ||
			h.Get(httpapi.HeaderNotApplied) != "1" {
			t.Fatalf("%s %s %s on a halted node: %d %v %s", id, r.method, r.path, st, h, b)
		}
	}
	if m.Node.Machine().Applied() >= index {
		t.Fatalf("%s applied the halting entry (applied %d)", id, m.Node.Machine().Applied())
	}
	// The operator's status of the node names the halt and what to do; it
	// read as a member in raft state "Shutdown", with a state hash, and no
	// word of why.
	sv, err := c.Admin(id).Status(context.Background())
	if err != nil || !strings.Contains(sv.Halted, fmt.Sprintf("halted at index %d", index)) || !strings.Contains(sv.Halted, "rejoin") {
		t.Fatalf("%s: admin status on a halted node: %v %+v", id, err, sv)
	}
}

func readyCluster(t *testing.T) *clustertest.Cluster {
	c := clustertest.Start(t, 3, clustertest.CheckInvariants(false), clustertest.Assemble(cli.Assemble))
	for _, m := range c.Live() {
		if !clustertest.Poll(15*time.Second, func() bool { st, _ := healthOf(t, c.HTTP(m.ID)); return st == http.StatusOK }) {
			t.Fatalf("%s never became ready", m.ID)
		}
	}
	return c
}

// The leader alone breaks (a fault of its machine): it halts and leaves
// raft; the two others elect a leader, apply the entry and keep serving.
func TestHaltedLeaderServesNothingAndTheOthersCarryOn(t *testing.T) {
	c := readyCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := c.Leader()
	leader.Node.Machine().Read(func(st *fsm.State, _ uint64) { haltOn.Store(st) })
	res, err := leader.Node.Propose(ctx, &fsm.Command{Type: cmdBreakOne})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusServiceUnavailable || res.Code != wire.CodeUnavailable {
		t.Fatalf("the halting leader answered %+v, want 503 unavailable", res)
	}
	wantHaltedNode(t, c, leader.ID, res.Index)
	var others []*clustertest.Member
	for _, m := range c.Live() {
		if m.ID != leader.ID {
			others = append(others, m)
		}
	}
	if !clustertest.Poll(15*time.Second, func() bool {
		for _, m := range others {
			if m.Node.IsLeader() {
				return true
			}
		}
		return false
	}) {
		t.Fatal("the others did not elect a new leader")
	}
	st, _, b := call(t, c.HTTP(others[0].ID), "POST", "/v1/signup", "", "after-leader-halt", "{}")
	if st != http.StatusCreated {
		t.Fatalf("signup after the leader halted: %d %s", st, b)
	}
	for _, m := range others {
		if m.Node.Halted() != nil || m.Node.Machine().Applied() < res.Index {
			t.Fatalf("%s: halted %v, applied %d; want the entry %d applied", m.ID, m.Node.Halted(), m.Node.Machine().Applied(), res.Index)
		}
		if st, h := healthOf(t, c.HTTP(m.ID)); st != http.StatusOK {
			t.Fatalf("%s: healthz %d %v", m.ID, st, h)
		}
	}
}

// A deterministic bug: every replica halts at the same entry (the leader
// first; the two others once they elect one of them and commit it), and
// the cluster stops rather than serve a half-applied state.
func TestEveryReplicaHaltsAtADeterministicBreak(t *testing.T) {
	c := readyCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Followers()[0].Node.Propose(ctx, &fsm.Command{Type: cmdBreakAll})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusServiceUnavailable {
		t.Fatalf("the halting entry answered %+v", res)
	}
	for _, m := range c.Live() {
		if !clustertest.Poll(15*time.Second, func() bool { return m.Node.Halted() != nil }) {
			t.Fatalf("%s did not halt", m.ID)
		}
		wantHaltedNode(t, c, m.ID, res.Index)
	}
}
