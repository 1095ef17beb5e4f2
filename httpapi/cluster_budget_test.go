package httpapi_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/httpapi"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

// smallBudgets shrinks the order and withdraw budgets so that a test's
// count of admitted writes is the burst plus at most one refill, however
// slow the machine: one token a minute.
func smallBudgets() map[string]httpapi.Budget {
	b := map[string]httpapi.Budget{}
	for k, v := range httpapi.Budgets {
		b[k] = v
	}
	b["order"] = httpapi.Budget{Name: "order", PerKeyPerMin: 1, KeyBurst: 4, PerAccountPerMin: 1, AccountBurst: 4}
	b["withdraw"] = httpapi.Budget{Name: "withdraw", PerKeyPerMin: 1, KeyBurst: 2, PerAccountPerMin: 1, AccountBurst: 2}
	return b
}

// budgetCluster is a 3-node core cluster whose members all run budgets.
func budgetCluster(t *testing.T, budgets map[string]httpapi.Budget, opts ...clustertest.Option) *clustertest.Cluster {
	t.Helper()
	assemble := func(n *node.Node, log hclog.Logger) (*cluster.AdminServer, *httpapi.Server, error) {
		r, err := rail.NewSimRail(rail.SimConfig{Network: httpapi.RailNetwork(n.Config().Deployment), NodeKey: n.RailNodeKey()})
		if err != nil {
			return nil, nil, err
		}
		return cluster.NewAdminServer(n), httpapi.New(n, log.Named("http"), httpapi.WithRail(r), httpapi.WithBudgets(budgets)), nil
	}
	return clustertest.Start(t, 3, append([]clustertest.Option{clustertest.Assemble(assemble)}, opts...)...)
}

// signupVia signs up through m and waits until every member knows the key.
func signupVia(t *testing.T, c *clustertest.Cluster, m *clustertest.Member, idem string) string {
	t.Helper()
	st, h, body := call(t, c.HTTP(m.ID), "POST", "/v1/signup", "", idem, "{}")
	if st != 201 {
		t.Fatalf("signup: %d %s", st, body)
	}
	var su struct{ APIKey string }
	_ = json.Unmarshal(body, &su)
	idx, err := strconv.ParseUint(h.Get("X-Raft-Index"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range c.Live() {
		if !clustertest.Poll(10*time.Second, func() bool { return o.Node.Machine().Applied() >= idx }) {
			t.Fatalf("%s never applied the signup", o.ID)
		}
	}
	return su.APIKey
}

// admittedAtMost is the most a budget may admit in elapsed: its burst and
// what refills meanwhile.
func admittedAtMost(b httpapi.Budget, elapsed time.Duration) int {
	return b.KeyBurst + int(elapsed.Seconds()*float64(b.PerKeyPerMin)/60) + 1
}

// check429 asserts a refusal is the meter's, with its headers.
func check429(t *testing.T, what string, b httpapi.Budget, st int, h http.Header, body []byte) {
	t.Helper()
	var e struct{ Code string }
	_ = json.Unmarshal(body, &e)
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	if st != 429 || e.Code != "rate_limited" || err != nil || ra < 1 {
		t.Fatalf("%s: %d %s Retry-After %q", what, st, body, h.Get("Retry-After"))
	}
	if h.Get("X-RateLimit-Limit") != strconv.Itoa(b.PerKeyPerMin) || h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("%s: rate headers %v", what, h)
	}
}

// TestOrderBudgetHoldsAcrossTheCluster: one key sending order-budget
// writes round-robin over the three members gets one key's budget, not
// three (issue 10, point 8). Each member metered on its own would admit
// three bursts.
func TestOrderBudgetHoldsAcrossTheCluster(t *testing.T) {
	budgets := smallBudgets()
	ob := budgets["order"]
	c := budgetCluster(t, budgets)
	ms := c.Members()
	key := signupVia(t, c, ms[0], "budget-signup")

	sent, admitted := 3*ob.KeyBurst+3, 0
	start := time.Now()
	for i := 0; i < sent; i++ {
		m := ms[i%3]
		var st int
		var h http.Header
		var body []byte
		idem := fmt.Sprintf("ob-%d", i)
		// Every order-budget write shares the budget: arm/disarm the
		// switch, and cancel an order that does not exist (the state
		// machine answers 404, after the budget was drawn).
		if i%2 == 0 {
			st, h, body = call(t, c.HTTP(m.ID), "POST", "/v1/cancel-all-after", key, idem, `{"timeoutMs":"0"}`)
		} else {
			st, h, body = call(t, c.HTTP(m.ID), "DELETE", "/v1/orders/ord-"+idem, key, idem, "")
		}
		switch {
		case st == 429:
			check429(t, fmt.Sprintf("write %d via %s", i, m.ID), ob, st, h, body)
		case st == 200 || st == 404:
			admitted++
			if h.Get("X-RateLimit-Limit") != strconv.Itoa(ob.PerKeyPerMin) || h.Get("X-RateLimit-Remaining") == "" {
				t.Fatalf("write %d via %s: admitted without rate headers: %v", i, m.ID, h)
			}
		default:
			t.Fatalf("write %d via %s: %d %s", i, m.ID, st, body)
		}
	}
	if most := admittedAtMost(ob, time.Since(start)); admitted > most || admitted < ob.KeyBurst {
		t.Fatalf("%d of %d order writes over three nodes admitted, want between the burst %d and %d", admitted, sent, ob.KeyBurst, most)
	}

	// A replay of an admitted write draws a token like any request, as it
	// always did: with the budget empty it is refused, on any node.
	st, h, body := call(t, c.HTTP(ms[1].ID), "POST", "/v1/cancel-all-after", key, "ob-0", `{"timeoutMs":"0"}`)
	check429(t, "a replay with the budget empty", ob, st, h, body)

	// Every member reports the leader's order budget (drained), and the
	// untouched withdraw budget.
	for _, m := range ms {
		order, withdraw := limitsVia(t, c.HTTP(m.ID), key)
		if order > 1 || withdraw != budgets["withdraw"].KeyBurst {
			t.Fatalf("%s reports order %d, withdraw %d remaining", m.ID, order, withdraw)
		}
	}
}

// limitsVia reads the order and withdraw tokens left from GET /v1/limits.
func limitsVia(t *testing.T, base, key string) (order, withdraw int) {
	t.Helper()
	st, _, body := call(t, base, "GET", "/v1/limits", key, "", "")
	var l struct {
		Budgets struct {
			Order, Withdraw struct{ Remaining int }
		}
	}
	if err := json.Unmarshal(body, &l); st != 200 || err != nil {
		t.Fatalf("limits: %d %s", st, body)
	}
	return l.Budgets.Order.Remaining, l.Budgets.Withdraw.Remaining
}

// TestWithdrawBudgetIsDrawnAtTheLeader: withdrawals sent to the two
// followers draw on one budget, the leader's.
func TestWithdrawBudgetIsDrawnAtTheLeader(t *testing.T) {
	budgets := smallBudgets()
	wb := budgets["withdraw"]
	c := budgetCluster(t, budgets)
	fs := c.Followers()
	key := signupVia(t, c, fs[0], "withdraw-signup")
	payee, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: mustNodeKey(t, "payee")})
	if err != nil {
		t.Fatal(err)
	}
	seed := sha256.Sum256([]byte("cluster-budget"))
	body := fmt.Sprintf(`{"toAddress":%q,"amountMsat":"1000000"}`, payee.AccountAddress(seed[:]))

	sent, admitted := 3*wb.KeyBurst+2, 0
	start := time.Now()
	for i := 0; i < sent; i++ {
		f := fs[i%2]
		st, h, b := call(t, c.HTTP(f.ID), "POST", "/v1/withdrawals", key, fmt.Sprintf("wd-%d", i), body)
		if st == 429 {
			check429(t, fmt.Sprintf("withdrawal %d via %s", i, f.ID), wb, st, h, b)
			continue
		}
		// The account holds nothing: the state machine refuses, after the
		// budget was drawn.
		if st >= 500 || h.Get("X-RateLimit-Limit") != strconv.Itoa(wb.PerKeyPerMin) {
			t.Fatalf("withdrawal %d via %s: %d %s headers %v", i, f.ID, st, b, h)
		}
		admitted++
	}
	if most := admittedAtMost(wb, time.Since(start)); admitted > most || admitted < wb.KeyBurst {
		t.Fatalf("%d of %d withdrawals over two followers admitted, want between the burst %d and %d", admitted, sent, wb.KeyBurst, most)
	}
	for _, m := range c.Live() {
		if order, withdraw := limitsVia(t, c.HTTP(m.ID), key); order != budgets["order"].KeyBurst || withdraw > 1 {
			t.Fatalf("%s reports order %d, withdraw %d remaining", m.ID, order, withdraw)
		}
	}
}

func mustNodeKey(t *testing.T, secret string) []byte {
	t.Helper()
	k, err := rail.NodeKeyFromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyedWritesOnTheReadBudgetHoldAcrossTheCluster: keyed writes that
// draw the read budget (here leaderboard settings) sent round-robin over
// the three members are drawn at the leader too, so they get one key's
// budget of log entries, not one per member. Each member's local read
// bucket alone would admit three bursts.
func TestKeyedWritesOnTheReadBudgetHoldAcrossTheCluster(t *testing.T) {
	budgets := smallBudgets()
	rb := httpapi.Budget{Name: "read", PerKeyPerMin: 1, KeyBurst: 4, PerAccountPerMin: 1, AccountBurst: 4}
	budgets["read"] = rb
	c := budgetCluster(t, budgets)
	ms := c.Members()
	key := signupVia(t, c, ms[0], "read-writes-signup")

	sent, admitted := 3*rb.KeyBurst+3, 0
	start := time.Now()
	for i := 0; i < sent; i++ {
		m := ms[i%3]
		st, h, body := call(t, c.HTTP(m.ID), "POST", "/v1/leaderboard/settings", key, fmt.Sprintf("rw-%d", i), `{"optedOut":true}`)
		switch {
		case st == 429:
			var e struct{ Code string }
			_ = json.Unmarshal(body, &e)
			if e.Code != "rate_limited" || h.Get("Retry-After") == "" {
				t.Fatalf("write %d via %s: %d %s", i, m.ID, st, body)
			}
		case st == 200:
			admitted++
		default:
			t.Fatalf("write %d via %s: %d %s", i, m.ID, st, body)
		}
	}
	if most := admittedAtMost(rb, time.Since(start)); admitted > most || admitted < rb.KeyBurst {
		t.Fatalf("%d of %d read-budget writes over three nodes admitted, want between the burst %d and %d", admitted, sent, rb.KeyBurst, most)
	}
}

// TestUSDxQuotesHoldTheReadBudgetAcrossTheCluster: a USDx quote is a
// keyed write (each one a log entry) without an idempotency key, so it
// must be drawn at the leader like the other keyed writes on the read
// budget: sent round-robin over the three members it gets one key's
// budget of log entries, not one per member.
func TestUSDxQuotesHoldTheReadBudgetAcrossTheCluster(t *testing.T) {
	budgets := smallBudgets()
	rb := httpapi.Budget{Name: "read", PerKeyPerMin: 1, KeyBurst: 4, PerAccountPerMin: 1, AccountBurst: 4}
	budgets["read"] = rb
	c := budgetCluster(t, budgets)
	ms := c.Members()
	key := signupVia(t, c, ms[0], "quote-writes-signup")

	sent, admitted := 3*rb.KeyBurst+3, 0
	start := time.Now()
	for i := 0; i < sent; i++ {
		m := ms[i%3]
		st, h, body := call(t, c.HTTP(m.ID), "POST", "/v1/usdx/quotes", key, "", `{"side":"mint","usdx":"1"}`)
		if st == 429 {
			var e struct{ Code string }
			_ = json.Unmarshal(body, &e)
			if e.Code != "rate_limited" || h.Get("Retry-After") == "" {
				t.Fatalf("quote %d via %s: %d %s", i, m.ID, st, body)
			}
			continue
		}
		// Anything else (a quote, or the state machine's refusal of one)
		// went through the log.
		admitted++
	}
	if most := admittedAtMost(rb, time.Since(start)); admitted > most || admitted < rb.KeyBurst {
		t.Fatalf("%d of %d quotes over three nodes reached the log, want between the burst %d and %d", admitted, sent, rb.KeyBurst, most)
	}
}
