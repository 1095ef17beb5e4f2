package httpapi

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/rail"
)

// offsetClock is the real clock with its calendar shifted by offsetMs: a
// node whose log time and wall clock disagree, as after an outage (log
// time resumes where it stopped and catches up at a tenth of real time)
// or a stepped wall clock.
type offsetClock struct {
	start    time.Time
	offsetMs atomic.Int64
}

func (c *offsetClock) WallMs() int64       { return time.Now().UnixMilli() + c.offsetMs.Load() }
func (c *offsetClock) Mono() time.Duration { return time.Since(c.start) }

// newRailAPIClocked is newRailAPI on a node reading time from clk.
func newRailAPIClocked(t *testing.T, clk node.Clock) *railAPI {
	t.Helper()
	key, err := rail.NodeKeyFromSecret("test-token")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: key, Book: rail.NewSimBook()})
	if err != nil {
		t.Fatal(err)
	}
	a := newDrivenTestAPI(t, []Option{WithRail(sim), WithBudgets(withdrawHeavyBudgets())},
		[]func(*node.Node){node.RailDriver(sim)}, func(c *node.Config) { c.Clock = clk })
	return &railAPI{testAPI: a, rail: sim}
}

// A deposit invoice paid while the log's time lags the calendar (a cluster
// back from an outage longer than a few seconds catches up over ten times
// the outage) or leads it (the wall clock stepped back) is credited. The
// simulated payer stamped the settlement with the wall clock, which the
// state machine compares with log time, and refused it as lying after the
// entry or before the invoice ("outside the invoice's life"): the payer's
// money taken, nothing credited.
func TestInvoicePaidWhileLogTimeLagsTheCalendarIsCredited(t *testing.T) {
	for _, offset := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(offset.String(), func(t *testing.T) { invoicePaidOffCalendar(t, offset) })
	}
}

func invoicePaidOffCalendar(t *testing.T, logMinusCalendar time.Duration) {
	clk := &offsetClock{start: time.Now()}
	clk.offsetMs.Store(logMinusCalendar.Milliseconds()) // a new cluster's log starts at the node's calendar
	a := newRailAPIClocked(t, clk)
	key, acct := a.signup()
	r := a.do(req{method: "POST", path: "/v1/deposit-invoices", key: key, idem: nextIdem(),
		body: map[string]any{"amountMsat": "5000000"}})
	if r.status != 201 {
		t.Fatalf("invoice: %d %s", r.status, r.body)
	}
	res, err := a.node.SettleInvoice(context.Background(), a.rail, r.json(t)["invoice"].(string), 0)
	if err != nil {
		t.Fatalf("pay: %v", err)
	}
	if !res.OK() {
		t.Fatalf("a paid invoice was refused: %d %s", res.Status, res.Body)
	}
	if got := a.free(acct); got != 5_000_000 {
		t.Fatalf("free %d msat, want 5000000", got)
	}
}

// A confirmToken quoted while log time lags the calendar confirms the
// withdrawal. The token's expiry was stamped with the serving node's wall
// clock, and the state machine refuses an expiry beyond log time plus the
// token's lifetime and a minute of skew: after an outage of more than a
// minute every token was refused ("expiry lies beyond its lifetime: quote
// again", and quoting again gave the same), so no first-seen withdrawal at
// or above the threshold could be made until log time caught up, ten
// times the outage later.
func TestConfirmTokenQuotedWhileLogTimeLagsTheCalendarConfirms(t *testing.T) {
	clk := &offsetClock{start: time.Now()}
	clk.offsetMs.Store(-time.Hour.Milliseconds())
	a := newRailAPIClocked(t, clk)
	key, _ := a.funded()
	dest := a.sparkAddr("first-seen, log behind")
	amount := strconv.Itoa(overThreshold)
	q := a.quote(key, map[string]any{"toAddress": dest, "amountMsat": amount})
	r := a.withdraw(key, map[string]any{"toAddress": dest, "amountMsat": amount, "confirmToken": q["confirmToken"]})
	if r.status != 201 {
		t.Fatalf("withdrawal with a fresh token: %d %s", r.status, r.body)
	}
}
