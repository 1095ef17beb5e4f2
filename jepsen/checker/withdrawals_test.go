package checker

import (
	"strings"
	"testing"

	"github.com/perpd/perpd/jepsen/history"
	"github.com/perpd/perpd/node/rail"
)

// withdraw records a Spark withdrawal request of amount msat under key,
// completed as typ (ok answers railRef).
func (b *builder) withdraw(acct, key string, amount int64, call, ret int64, typ history.Type, railRef string) int {
	return b.withdrawOn("", nil, acct, key, amount, call, ret, typ, railRef)
}

// withdrawOn is withdraw on path ("" as older histories: spark), quoted
// fee quoted (nil: not quoted).
func (b *builder) withdrawOn(path string, quoted *int64, acct, key string, amount int64, call, ret int64, typ history.Type, railRef string) int {
	b.next++
	id := b.next
	b.add(history.Op{ID: id, Type: history.Invoke, Process: 1, F: history.FWithdraw, Account: acct, IdemKey: key,
		Msat: history.Int64(amount), Path: path, FeeMsat: quoted}, call)
	done := history.Op{ID: id, Type: typ, Process: 1, F: history.FWithdraw, Account: acct, IdemKey: key}
	switch typ {
	case history.OK:
		done.Status, done.RailRef = 201, railRef
	case history.Fail:
		done.Status, done.Code = 409, "insufficient_balance"
	case history.Info:
		done.Status, done.Code = 503, "unavailable"
	}
	b.add(done, ret)
	return id
}

const (
	wdA = 5_000_000  // msat, paid
	wdB = 7_000_000  // msat, returned
	wdC = 3_000_000  // msat, unknown outcome, applied and paid
	wdL = 12_345_678 // msat, to a Lightning invoice, returned
	// feeL is wdL's fee: 2 sats + 0.1% of 12,345,678 msat (12,345.678,
	// rounded up).
	feeL = 2_000 + 12_346
)

// wdScenario is a withdrawer "w" with two grants, a paid Spark withdrawal,
// a returned one, one of unknown outcome that was applied and paid, one
// that certainly failed, and a Lightning one (quoted first) that the rail
// returned, listed alike on three nodes, with the rail's book and the
// ledger to match.
func wdScenario() (*builder, *Final) {
	b := &builder{}
	b.op(1, history.FFaucet, "w", "g1", 0, 5, history.OK, history.Op{Msat: history.Int64(grant)})
	b.op(1, history.FFaucet, "w", "g2", 6, 9, history.OK, history.Op{Msat: history.Int64(grant)})
	b.withdraw("w", "ka", wdA, 10, 20, history.OK, "wd_a")
	b.withdraw("w", "kb", wdB, 30, 40, history.OK, "wd_b")
	b.withdraw("w", "kc", wdC, 50, 60, history.Info, "")
	b.withdraw("w", "kd", 9_000_000, 70, 80, history.Fail, "")
	b.withdrawOn("lightning", history.Int64(feeL), "w", "kl", wdL, 90, 100, history.OK, "wd_l")
	listed := []WithdrawalFinal{
		{IdemKey: "kc", RailRef: "wd_c", State: WithdrawalPaid, Path: "spark", AmountMsat: wdC, FeeMsat: SparkFeeMsat, Seq: "12"},
		{IdemKey: "kb", RailRef: "wd_b", State: WithdrawalReturned, Path: "spark", AmountMsat: wdB, FeeMsat: SparkFeeMsat, Reason: "test", Seq: "11"},
		{IdemKey: "ka", RailRef: "wd_a", State: WithdrawalPaid, Path: "spark", AmountMsat: wdA, FeeMsat: SparkFeeMsat, Seq: "10"},
		{IdemKey: "kl", RailRef: "wd_l", State: WithdrawalReturned, Path: "lightning", AmountMsat: wdL, FeeMsat: feeL,
			Reason: "unknown payout invoice", Seq: "15"},
	}
	free := int64(2*grant) - (wdA + SparkFeeMsat) - (wdC + SparkFeeMsat)
	wf := &WithdrawerFinal{Nodes: map[string]*WithdrawerView{}, Settled: true}
	for _, n := range []string{"n1", "n2", "n3"} {
		wf.Nodes[n] = &WithdrawerView{FreeMsat: free, Withdrawals: append([]WithdrawalFinal(nil), listed...)}
	}
	book := &SimBook{Read: true, Payouts: map[string]SimPayout{
		SimBookName("wd_a"): {Status: "paid"},
		SimBookName("wd_b"): {Status: "returned", Reason: "test"},
		SimBookName("wd_c"): {Status: "paid"},
		SimBookName("wd_l"): {Status: "returned", Reason: "unknown payout invoice"},
	}}
	ledger := LedgerSample{Applied: 100, PaidMsat: wdA + wdC}
	final := &Final{
		Accounts: map[string]*AccountFinal{"w": {DepositsComplete: true, Deposits: []Deposit{
			{Seq: "1", RailRef: "faucet:1", CreditedMsat: grant}, {Seq: "2", RailRef: "faucet:2", CreditedMsat: grant}}}},
		Withdrawers: map[string]*WithdrawerFinal{"w": wf},
		SimBook:     book,
		Ledgers:     map[string][]LedgerSample{"n1": {ledger}, "n2": {ledger}, "n3": {ledger}},
	}
	return b, final
}

func wdCheck(t *testing.T, b *builder, final *Final, want Verdict, detail string) WithdrawalReport {
	t.Helper()
	res, rep := Withdrawals(b.sorted(), final)
	if res.Verdict != want {
		t.Fatalf("verdict %s, want %s: %v", res.Verdict, want, res.Details)
	}
	if detail != "" {
		found := false
		for _, d := range res.Details {
			found = found || strings.Contains(d, detail)
		}
		if !found {
			t.Fatalf("no detail containing %q: %v", detail, res.Details)
		}
	}
	return rep
}

func TestWithdrawalsAcceptAConsistentRun(t *testing.T) {
	b, final := wdScenario()
	rep := wdCheck(t, b, final, Valid, "paid-out")
	if rep.Acknowledged != 3 || rep.Unsettled != 1 || rep.Paid != 2 || rep.Returned != 2 || rep.Listed != 4 || rep.Lightning != 1 ||
		rep.BookPayouts != 4 || rep.PaidMsat != wdA+wdC {
		t.Fatalf("report %+v", rep)
	}
	// Withdrawers are not registers: Money leaves them alone.
	if res, _ := Money(b.sorted(), final); res.Verdict == Violation {
		t.Fatalf("money judged a withdrawer: %v", res.Details)
	}
}

func TestWithdrawalsCatchALostWithdrawal(t *testing.T) {
	b, final := wdScenario()
	v := final.Withdrawers["w"].Nodes["n3"]
	v.Withdrawals = append(v.Withdrawals[:2:2], v.Withdrawals[3:]...) // without ka
	v.FreeMsat += wdA + SparkFeeMsat
	rep := wdCheck(t, b, final, Violation, "op #3 (key ka, railRef wd_a) is not listed")
	if rep.Lost != 1 {
		t.Fatalf("lost %d", rep.Lost)
	}
}

func TestWithdrawalsCatchAWithdrawalAppliedTwice(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals = append(v.Withdrawals, WithdrawalFinal{IdemKey: "ka", RailRef: "wd_a2", State: WithdrawalPaid, Path: "spark",
			AmountMsat: wdA, FeeMsat: SparkFeeMsat, Seq: "13"})
		v.FreeMsat -= wdA + SparkFeeMsat
	}
	final.SimBook.Payouts[SimBookName("wd_a2")] = SimPayout{Status: "paid"}
	rep := wdCheck(t, b, final, Violation, "listed 2 times")
	if rep.Duplicates != 1 {
		t.Fatalf("duplicates %d", rep.Duplicates)
	}
}

func TestWithdrawalsCatchAWithdrawalNoInvocationMade(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals = append(v.Withdrawals, WithdrawalFinal{IdemKey: "jepsen-wd-other", RailRef: "wd_x", State: WithdrawalPaid, Path: "spark",
			AmountMsat: wdA, FeeMsat: SparkFeeMsat, Seq: "13"})
		v.FreeMsat -= wdA + SparkFeeMsat
	}
	final.SimBook.Payouts[SimBookName("wd_x")] = SimPayout{Status: "paid"}
	wdCheck(t, b, final, Violation, "which no invocation of this run sent")
}

func TestWithdrawalsCatchAFailedRequestListed(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals = append(v.Withdrawals, WithdrawalFinal{IdemKey: "kd", RailRef: "wd_d", State: WithdrawalReturned, Path: "spark",
			AmountMsat: 9_000_000, FeeMsat: SparkFeeMsat, Seq: "13"})
	}
	final.SimBook.Payouts[SimBookName("wd_d")] = SimPayout{Status: "returned"}
	wdCheck(t, b, final, Violation, "certainly failed but is listed")
}

func TestWithdrawalsCatchAWrongAmountOrFee(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals[2].AmountMsat++
		v.FreeMsat--
	}
	wdCheck(t, b, final, Violation, "asked for 5000000 msat, listed with 5000001 msat")
	b, final = wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals[2].FeeMsat = 0
		v.FreeMsat += SparkFeeMsat
	}
	wdCheck(t, b, final, Violation, "the spark fee is 10000 msat")
}

func TestWithdrawalsCatchABalanceThatDoesNotAddUp(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.FreeMsat += SparkFeeMsat // the fee of a paid withdrawal refunded
	}
	wdCheck(t, b, final, Violation, "deposits 2000000000 - withdrawals held or paid")
	// A returned withdrawal not credited back.
	b, final = wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.FreeMsat -= wdB + SparkFeeMsat
	}
	wdCheck(t, b, final, Violation, "deposits 2000000000 - withdrawals held or paid")
}

// The Lightning fee is the documented quote: 2 sats + 0.1% rounded up to
// the msat, capped at 5,000 sats.
func TestLightningFeeIsTheDocumentedQuote(t *testing.T) {
	for _, c := range []struct{ amount, fee int64 }{
		{1, 2_001},                             // 0.001 msat rounds up to 1
		{1_000, 2_001},                         // exactly 1 msat
		{1_001, 2_002},                         // 1.001 rounds up
		{1_000_000, 3_000},                     // 1,000 sats: 1 sat
		{wdL, feeL},                            // the scenario's
		{4_998_000_000, 5_000_000},             // exactly the cap
		{4_998_000_001, 5_000_000},             // over it: capped
		{2_100_000_000_000_000_000, 5_000_000}, // 21 M BTC: no overflow
	} {
		if got := LightningFeeMsat(c.amount); got != c.fee {
			t.Errorf("LightningFeeMsat(%d) = %d, want %d", c.amount, got, c.fee)
		}
	}
}

// A returned Lightning withdrawal holds nothing: amount and fee are back
// in free, it is in no paid-out sum, and the book says returned.
func TestWithdrawalsCountAReturnedLightningWithdrawalAsGivenBack(t *testing.T) {
	b, final := wdScenario()
	rep := wdCheck(t, b, final, Valid, "")
	if rep.Returned != 2 || rep.Lightning != 1 || rep.PaidMsat != wdA+wdC {
		t.Fatalf("report %+v", rep)
	}
	// Had it been paid, it would be held and paid out: the same balance
	// and ledger no longer add up.
	b, final = wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals[3].State, v.Withdrawals[3].Reason = WithdrawalPaid, ""
	}
	wdCheck(t, b, final, Violation, "deposits 2000000000 - withdrawals held or paid")
}

func TestWithdrawalsCatchAReturnedLightningWithdrawalNotGivenBack(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.FreeMsat -= wdL + feeL
	}
	wdCheck(t, b, final, Violation, "deposits 2000000000 - withdrawals held or paid")
	// Only the fee kept.
	b, final = wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.FreeMsat -= feeL
	}
	wdCheck(t, b, final, Violation, "deposits 2000000000 - withdrawals held or paid")
}

func TestWithdrawalsCatchAWrongLightningFee(t *testing.T) {
	// Charged the Spark fee, with the balance to match.
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals[3].FeeMsat = SparkFeeMsat
	}
	wdCheck(t, b, final, Violation, "the lightning fee is 14346 msat")
	// Quoted one fee, charged the documented other.
	b, final = wdScenario()
	b.ops[len(b.ops)-2].FeeMsat = history.Int64(feeL - 1)
	wdCheck(t, b, final, Violation, "was quoted a fee of 14345 msat, listed with 14346 msat")
}

func TestWithdrawalsCatchAWithdrawalOnTheWrongPath(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals[3].Path = "spark"
	}
	wdCheck(t, b, final, Violation, "was sent on lightning, listed with path \"spark\"")
}

func TestWithdrawalsCatchAReturnTheRailDidNotMake(t *testing.T) {
	b, final := wdScenario()
	delete(final.SimBook.Payouts, SimBookName("wd_l"))
	wdCheck(t, b, final, Violation, "wd_l is returned but the rail's book has no outcome")
	b, final = wdScenario()
	final.SimBook.Payouts[SimBookName("wd_l")] = SimPayout{Status: "paid"}
	wdCheck(t, b, final, Violation, "wd_l is returned (credited back) but the rail's book says paid")
	b, final = wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals[3].Reason = "the rail returned the payout"
	}
	wdCheck(t, b, final, Violation, `wd_l is returned with reason "the rail returned the payout", the rail's book says "unknown payout invoice"`)
}

func TestWithdrawalsCatchAPayoutMadeTwice(t *testing.T) {
	b, final := wdScenario()
	final.SimBook.Payouts[SimBookName("wd_a-again")] = SimPayout{Status: "paid"}
	wdCheck(t, b, final, Violation, "no listed withdrawal accounts for: paid twice or lost")
}

func TestWithdrawalsCatchPaidWithoutTheRail(t *testing.T) {
	b, final := wdScenario()
	delete(final.SimBook.Payouts, SimBookName("wd_a"))
	wdCheck(t, b, final, Violation, "wd_a is paid but the rail's book has no payout")
	b, final = wdScenario()
	final.SimBook.Payouts[SimBookName("wd_b")] = SimPayout{Status: "paid"}
	wdCheck(t, b, final, Violation, "wd_b is returned (credited back) but the rail's book says paid")
}

func TestWithdrawalsCatchReplicasThatDisagree(t *testing.T) {
	b, final := wdScenario()
	v := final.Withdrawers["w"].Nodes["n2"]
	v.Withdrawals[0].Seq = "99"
	wdCheck(t, b, final, Violation, "settled, yet n1 and n2 list different withdrawals")
}

func TestWithdrawalsCatchOpenWithdrawalsAfterSettling(t *testing.T) {
	b, final := wdScenario()
	for _, v := range final.Withdrawers["w"].Nodes {
		v.Withdrawals[0].State = WithdrawalQueued
	}
	wdCheck(t, b, final, Violation, "is queued after the account was seen with none open")
}

func TestWithdrawalsCatchTheLedgerPayingOutMore(t *testing.T) {
	b, final := wdScenario()
	for n, ss := range final.Ledgers {
		ss[0].PaidMsat += wdA
		final.Ledgers[n] = ss
	}
	wdCheck(t, b, final, Violation, "the ledger paid out")
}

func TestWithdrawalsCatchGrantsThatDoNotAddUp(t *testing.T) {
	b, final := wdScenario()
	final.Accounts["w"].Deposits = final.Accounts["w"].Deposits[:1]
	for _, v := range final.Withdrawers["w"].Nodes {
		v.FreeMsat -= grant
	}
	wdCheck(t, b, final, Violation, "acknowledged grants credit 2000000000 msat, listed deposits 1000000000 msat")
}

// A withdrawer still open after the run is unknown, not a violation: its
// reads were not made at one quiet index.
func TestWithdrawalsLeaveAnUnsettledWithdrawerUnknown(t *testing.T) {
	b, final := wdScenario()
	wf := final.Withdrawers["w"]
	wf.Settled = false
	for _, v := range wf.Nodes {
		v.Withdrawals[0].State = WithdrawalRequested
		v.FreeMsat += 17 // read at another index than the listing
	}
	wdCheck(t, b, final, Unknown, "still had open withdrawals")
}

func TestWithdrawalsSkipWithoutWithdrawers(t *testing.T) {
	res, _ := Withdrawals(nil, &Final{})
	if res.Verdict != Skipped {
		t.Fatalf("verdict %s", res.Verdict)
	}
}

// The checker's copy of the Lightning fee is the venue's schedule
// (node/rail/fees.go): if this fails, the schedule changed, and the
// checker, docs/decisions.md and the README must follow it.
func TestLightningFeeMatchesTheRailsSchedule(t *testing.T) {
	key, err := rail.NewNodeKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rail.NewSimRail(rail.SimConfig{Network: rail.Testnet, NodeKey: key, Book: rail.NewSimBook()})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []int64{1, 999, 1_000, 1_001, 1_000_000, wdL, 20_000_000, 4_998_000_000, 4_998_000_001, 2_100_000_000_000_000_000} {
		if got, want := LightningFeeMsat(a), r.QuoteFee(rail.PathLightning, a); got != want {
			t.Errorf("amount %d: checker's fee %d msat, the rail quotes %d msat", a, got, want)
		}
	}
	if got := r.QuoteFee(rail.PathSpark, wdA); got != SparkFeeMsat {
		t.Errorf("Spark fee: the rail quotes %d msat, the checker expects %d", got, SparkFeeMsat)
	}
}
