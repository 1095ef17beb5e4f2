package workload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/jepsen/client"
	"github.com/perpd/perpd/jepsen/history"
)

// fakeNodes starts one faucet server per entry of faulty; a faulty node
// answers every write 503 unavailable after "proposing" it (a write that
// may have been committed: no X-Not-Applied), the others grant. It returns
// their addresses.
func fakeNodes(t *testing.T, faulty ...bool) []string {
	t.Helper()
	var addrs []string
	for _, f := range faulty {
		f := f
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if f {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"no leader accepted the write in time; retry with the same idempotency-key","code":"unavailable"}`))
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"creditedMsat":"1000","grantsRemainingThisHour":5}`))
		}))
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	return addrs
}

func faucetEnv(t *testing.T, nodes []string) *Env {
	t.Helper()
	rec, err := history.NewRecorder("")
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(2 * time.Second)
	t.Cleanup(cl.Close)
	return &Env{Client: cl, Rec: rec, Nodes: nodes, Accounts: []*Account{{ID: "a", APIKey: "k"}}}
}

func runFaucets(t *testing.T, e *Env, workers int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := Run(ctx, e, Options{Workers: workers, Rate: 200, Seed: 1,
		Kinds: []Kind{{Name: history.FFaucet, Weight: 1, Run: Faucet}}})
	if err != nil {
		t.Fatal(err)
	}
}

// Workers stay on their nodes through unknown outcomes, so the load stays
// spread (moving every worker that failed on a node to the same next node
// herded them all onto one), and what a faulty node left unknown is
// settled at once on another node under the same idempotency key.
func TestWorkersKeepTheirNodesAndSettleUnknownWritesElsewhere(t *testing.T) {
	nodes := fakeNodes(t, true, false, false)
	e := faucetEnv(t, nodes)
	runFaucets(t, e, 6, 700*time.Millisecond)

	ops := e.Rec.Ops()
	byID := map[int]history.Op{}
	perNode := map[string]int{}
	settled := map[int]history.Op{}
	for _, op := range ops {
		if op.Type == history.Invoke {
			byID[op.ID] = op
			if op.Resolves == 0 {
				perNode[op.Node]++
			} else if op.Node == nodes[0] {
				t.Fatalf("op #%d retried on the node that left it unknown", op.ID)
			}
			continue
		}
		inv := byID[op.ID]
		if inv.Resolves != 0 {
			if !op.InRun {
				t.Fatalf("in-run retry #%d not marked InRun", op.ID)
			}
			if op.Type == history.OK {
				settled[inv.Resolves] = op
			}
		}
	}
	total := perNode[nodes[0]] + perNode[nodes[1]] + perNode[nodes[2]]
	for _, n := range nodes {
		if share := float64(perNode[n]) / float64(total); share < 0.2 {
			t.Fatalf("node %s got %.0f%% of %d operations: %v", n, 100*share, total, perNode)
		}
	}
	unknown := 0
	for _, p := range history.Pairs(ops) {
		if p.Invoke.Resolves != 0 || p.Outcome() != history.Info {
			continue
		}
		unknown++
		if p.Invoke.Node != nodes[0] {
			t.Fatalf("op #%d unknown on a healthy node", p.Invoke.ID)
		}
		s, ok := settled[p.Invoke.ID]
		if !ok {
			// Only a write left unknown as the run ended may go unsettled.
			continue
		}
		if s.IdemKey != p.Invoke.IdemKey || s.Msat == nil || *s.Msat != 1000 {
			t.Fatalf("op #%d settled by %+v", p.Invoke.ID, s)
		}
	}
	if unknown == 0 || len(settled) < unknown-2 {
		t.Fatalf("%d unknown outcomes, %d settled in the run", unknown, len(settled))
	}
	if left := e.TakePending(); len(left) != unknown-len(settled) {
		t.Fatalf("%d writes left pending, want %d", len(left), unknown-len(settled))
	}
}

// A write no node acknowledges goes back to the pending writes after a
// bounded number of attempts, for the harness to settle after the heal.
func TestUnsettledWriteGoesBackToPending(t *testing.T) {
	nodes := fakeNodes(t, true, true, true)
	e := faucetEnv(t, nodes)
	p := &Process{ID: e.newPID(), Node: nodes[0]}
	calls := 0
	inv := e.Rec.Invoke(history.Op{Process: 99, Node: nodes[1], F: history.FFaucet, Account: "a", IdemKey: "k1"})
	e.AddPending(Pending{Op: inv, Account: e.Accounts[0], Body: struct{}{}})
	e.AddPending(Pending{Op: history.Op{ID: 1234, Process: 98, F: history.FFaucet}})
	for _, pend := range e.takePendingOf(99) {
		calls++
		if settleNow(context.Background(), e, p, pend) {
			t.Fatal("settled by a refusal")
		}
	}
	if calls != 1 {
		t.Fatalf("took %d pending writes of process 99, want 1", calls)
	}
	retries := 0
	for _, op := range e.Rec.Ops() {
		if op.Type == history.Invoke && op.Resolves == inv.ID {
			retries++
			if op.Node == nodes[1] {
				t.Fatal("retried on the node that left it unknown")
			}
		}
	}
	if retries != settleRounds*(len(nodes)-1) {
		t.Fatalf("%d attempts, want %d", retries, settleRounds*(len(nodes)-1))
	}
	left := e.TakePending()
	if len(left) != 2 || left[0].Op.ID != 1234 || left[1].Op.ID != inv.ID {
		t.Fatalf("pending after settling: %+v", left)
	}
}

// Processes that failed on the same node at once retry on different
// nodes.
func TestRetryNodeSpreadsProcesses(t *testing.T) {
	others := otherNodes([]string{"n1", "n2", "n3"}, "n2")
	if len(others) != 2 || others[0] != "n1" || others[1] != "n3" {
		t.Fatalf("others %v", others)
	}
	first := map[string]int{}
	for pid := 10; pid < 14; pid++ {
		first[retryNode(others, pid, 0)]++
		if retryNode(others, pid, 0) == retryNode(others, pid, 1) {
			t.Fatalf("process %d retries on one node only", pid)
		}
	}
	if first["n1"] != 2 || first["n3"] != 2 {
		t.Fatalf("first retries of 4 processes: %v", first)
	}
}
