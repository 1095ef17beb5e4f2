package checker

import (
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/jepsen/history"
)

// The checkers' copies of the nodes' history bounds are the nodes' own.
func TestHistoryBoundsAreTheStateMachines(t *testing.T) {
	for _, c := range []struct {
		name         string
		checker, fsm int
	}{
		{"deposits", DepositsKept, funds.MaxDepositsPerAccount},
		{"fills", FillsKept, trade.FillsKept},
		{"closed orders", ClosedOrdersKept, trade.ClosedOrdersKept},
		{"liquidations", LiquidationsKept, trade.LiquidationsKept},
		{"funding flows", FundingFlowsKept, trade.FundingFlowsKept},
	} {
		if c.checker != c.fsm {
			t.Errorf("%s: the checker assumes %d kept, the state machine keeps %d", c.name, c.checker, c.fsm)
		}
	}
}

// grants records n acknowledged faucet grants of one grant each to acct.
func grants(b *builder, acct string, n int) {
	for i := range n {
		b.deposit(1, acct, int64(20*i), int64(20*i+10), history.OK)
	}
}

// A long run gives an account more grants than its deposit history keeps
// (the 10-minute run of 2026-11-29: 502-554 grants an account): the
// listing holds the newest DepositsKept, so it cannot count the grants,
// and the balance judges them. Before, every such account was reported
// as lost writes and a money violation.
func TestDepositHistoryAtItsBoundIsJudgedByTheBalance(t *testing.T) {
	const n = DepositsKept + 10
	b := &builder{}
	grants(b, "a", n)
	ops := b.sorted()
	samples := map[string][]StateSample{"n1": {{5, "h"}}, "n2": {{5, "h"}}}

	f := finalWith("a", n*grant, DepositsKept)
	f.Samples = samples
	if res, c := LostWrites(ops, f); res.Verdict != Valid || c.Lost != 0 || c.Acknowledged != n {
		t.Fatalf("lost-writes: verdict %s counts %+v details %v", res.Verdict, c, res.Details)
	}
	if res, rep := Money(ops, f); res.Verdict != Valid || rep.DriftMsat != 0 {
		t.Fatalf("money: verdict %s report %+v details %v", res.Verdict, rep, res.Details)
	}

	// A grant acknowledged but never credited still shows, in the balance.
	lost := finalWith("a", (n-1)*grant, DepositsKept)
	lost.Samples = samples
	if res, rep := Money(ops, lost); res.Verdict != Violation || rep.DriftMsat != grant {
		t.Fatalf("money with a grant missing: verdict %s report %+v details %v", res.Verdict, rep, res.Details)
	}
	// So does one credited twice.
	twice := finalWith("a", (n+1)*grant, DepositsKept)
	twice.Samples = samples
	if res, _ := Money(ops, twice); res.Verdict != Violation {
		t.Fatalf("money with a grant doubled: verdict %s details %v", res.Verdict, res.Details)
	}
	// Below the bound a short listing is still a loss.
	short := finalWith("a", n*grant, DepositsKept-1)
	if res, c := LostWrites(ops, short); res.Verdict != Violation || c.Lost != 11 {
		t.Fatalf("listing below the bound: verdict %s counts %+v", res.Verdict, c)
	}
	// A node never lists more than it keeps.
	over := finalWith("a", n*grant, DepositsKept+1)
	if res, _ := LostWrites(ops, over); res.Verdict != Violation {
		t.Fatalf("listing past the bound: verdict %s details %v", res.Verdict, res.Details)
	}
}

func TestDepositCreditPastTheBoundIsTheGrants(t *testing.T) {
	b := &builder{}
	grants(b, "a", DepositsKept+3)
	ws := Writes(b.sorted(), history.FFaucet)

	below := finalWith("a", 0, 7)
	if credit, known, trimmed := depositCredit(below.Accounts["a"], ws); credit != 7*grant || !known || trimmed {
		t.Fatalf("below the bound: credit %d known %t trimmed %t, want the listing's %d", credit, known, trimmed, 7*grant)
	}
	at := finalWith("a", 0, DepositsKept)
	if credit, known, trimmed := depositCredit(at.Accounts["a"], ws); credit != (DepositsKept+3)*grant || !known || !trimmed {
		t.Fatalf("at the bound: credit %d known %t trimmed %t, want the grants' %d", credit, known, trimmed, (DepositsKept+3)*grant)
	}
	// An unsettled grant leaves a trimmed credit unknown.
	b.deposit(1, "a", 1e6, 1e6+10, history.Info)
	ws = Writes(b.sorted(), history.FFaucet)
	if _, known, trimmed := depositCredit(at.Accounts["a"], ws); known || !trimmed {
		t.Fatalf("at the bound with a grant unsettled: known %t trimmed %t", known, trimmed)
	}
	if _, known, _ := depositCredit(&AccountFinal{}, ws); known {
		t.Fatal("an unlisted history has no known credit")
	}
}
