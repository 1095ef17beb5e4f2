package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/cli"
	"github.com/perpd/perpd/cluster/clustertest"
	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/node/rail"
)

// railMinIndex is the highest log index a response reported: every call
// asks its node to have applied it (X-Min-Index), so a write made through
// one node is seen on the next, whichever node serves it. Atomic: tests
// call railCall from several goroutines at once.
var railMinIndex atomic.Uint64

// seeRailIndex raises railMinIndex to idx.
func seeRailIndex(idx uint64) {
	for {
		cur := railMinIndex.Load()
		if idx <= cur || railMinIndex.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// railCall sends one public API request and decodes a JSON object answer.
func railCall(t *testing.T, base, method, path, key, idem string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if idem != "" {
		req.Header.Set("idempotency-key", idem)
	}
	req.Header.Set("X-Min-Index", strconv.FormatUint(railMinIndex.Load(), 10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if idx, err := strconv.ParseUint(res.Header.Get("X-Raft-Index"), 10, 64); err == nil && res.StatusCode < 500 {
		seeRailIndex(idx)
	}
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return res.StatusCode, m
}

// Across a leader change: an invoice issued by one node is paid through
// another node's admin listener, and a withdrawal retried with the same
// idempotency key on another node after the leader is killed answers the
// original and is paid exactly once, on every replica.
func TestRailAcrossLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster; skipped with -short")
	}
	c := clustertest.Start(t, 3, clustertest.Assemble(cli.Assemble), clustertest.TickInterval(50*time.Millisecond))
	railMinIndex.Store(0) // a fresh cluster: indexes another test's cluster reported mean nothing here
	fs := c.Followers()
	a, b := fs[0], fs[1]
	st, m := railCall(t, c.HTTP(a.ID), "POST", "/v1/signup", "", "signup-1", map[string]any{})
	if st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	key, acct := m["apiKey"].(string), m["accountId"].(string)

	st, m = railCall(t, c.HTTP(a.ID), "POST", "/v1/deposit-invoices", key, "inv-1", map[string]any{"amountMsat": "300000000"})
	if st != 201 {
		t.Fatalf("invoice: %d %v", st, m)
	}
	var dep fsm.DepositView
	err := c.Admin(b.ID).Do(context.Background(), "POST", cli.PayInvoicePath, cli.PayInvoiceRequest{Invoice: m["invoice"].(string)}, &dep)
	if err != nil || dep.RailRef != m["paymentRef"] || dep.AccountID != acct || dep.AmountMsat != 300_000_000 {
		t.Fatalf("pay-invoice through another node: %v %+v", err, dep)
	}
	if err := c.Admin(a.ID).Do(context.Background(), "POST", cli.PayInvoicePath, cli.PayInvoiceRequest{Invoice: m["invoice"].(string)}, nil); err == nil {
		t.Fatal("an invoice was paid twice")
	}

	// A Spark withdrawal below the confirmation threshold, then the
	// leader dies; the retry goes to the other follower.
	body := map[string]any{"toAddress": railAddressOf(t, c.HTTP(a.ID)), "amountMsat": "50000000"}
	st, first := railCall(t, c.HTTP(a.ID), "POST", "/v1/withdrawals", key, "wd-1", body)
	if st != 201 {
		t.Fatalf("withdraw: %d %v", st, first)
	}
	old := c.Leader().ID
	c.Kill(old)
	if _, err := c.WaitLeader(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	var again map[string]any
	if !clustertest.Poll(20*time.Second, func() bool {
		st, again = railCall(t, c.HTTP(b.ID), "POST", "/v1/withdrawals", key, "wd-1", body)
		return st != 503
	}) || st != 201 || again["railRef"] != first["railRef"] || again["queued"] != first["queued"] {
		t.Fatalf("retry after the leader change: %d %v, first %v", st, again, first)
	}
	var paid bool
	clustertest.Poll(20*time.Second, func() bool {
		_, page := railCall(t, c.HTTP(b.ID), "GET", "/v1/withdrawals", key, "", nil)
		ws, _ := page["withdrawals"].([]any)
		paid = len(ws) == 1 && ws[0].(map[string]any)["state"] == "paid"
		return paid
	})
	if !paid {
		t.Fatal("the withdrawal was not paid after the leader change")
	}
	c.Restart(old)
	if err := c.WaitConverged(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	want := int64(300_000_000 - 50_000_000 - rail.SparkWithdrawalFeeMsat)
	for _, mem := range c.Live() {
		mem.Node.Machine().Read(func(st *fsm.State, _ uint64) {
			if st.Ledger.PaidMsat != 50_000_000 || st.Ledger.Balance(ledger.Free(acct)) != want ||
				st.Ledger.Balance(ledger.FeeRevenue) != rail.SparkWithdrawalFeeMsat || len(st.Funds.Withdrawals) != 1 ||
				st.Funds.WithdrawalAt(st.Funds.WithdrawalsByAccount[acct][0]).State != funds.StatePaid {
				t.Errorf("%s: paid %d, free %d (want %d), fees %d, %d withdrawals", mem.ID, st.Ledger.PaidMsat,
					st.Ledger.Balance(ledger.Free(acct)), want, st.Ledger.Balance(ledger.FeeRevenue), len(st.Funds.Withdrawals))
			}
		})
	}
}

// railAddressOf signs up a second account and returns its Spark address:
// a valid destination of the cluster's network.
func railAddressOf(t *testing.T, base string) string {
	t.Helper()
	st, m := railCall(t, base, "POST", "/v1/signup", "", "signup-dest-"+strconv.FormatInt(time.Now().UnixNano(), 10), map[string]any{})
	if st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	return m["railAddress"].(string)
}
