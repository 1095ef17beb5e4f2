package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perpd/perpd/jepsen/history"
)

const grant = 1_000_000_000 // msat, one faucet grant

// builder writes synthetic histories. Times are in milliseconds for
// readability and stored as nanoseconds.
type builder struct {
	ops  []history.Op
	next int
}

func ms(t int64) int64 { return t * int64(time.Millisecond) }

func (b *builder) add(op history.Op, t int64) {
	op.Index, op.TimeNs = len(b.ops), ms(t)
	b.ops = append(b.ops, op)
}

// op records an invocation at call and its completion at ret (no
// completion when typ is ""). It returns the operation id.
func (b *builder) op(proc int, f, acct, key string, call, ret int64, typ history.Type, done history.Op) int {
	b.next++
	id := b.next
	b.add(history.Op{ID: id, Type: history.Invoke, Process: proc, F: f, Account: acct, IdemKey: key, Resolves: done.Resolves, InRun: done.InRun}, call)
	if typ != "" {
		done.ID, done.Type, done.Process, done.F, done.Account = id, typ, proc, f, acct
		b.add(done, ret)
	}
	return id
}

func (b *builder) deposit(proc int, acct string, call, ret int64, typ history.Type) int {
	done := history.Op{}
	if typ == history.OK {
		done.Msat = history.Int64(grant)
	}
	if typ == history.Info {
		done.Status = 503
		done.Code = "unavailable"
	}
	return b.op(proc, history.FFaucet, acct, "k"+string(rune('a'+b.next)), call, ret, typ, done)
}

func (b *builder) read(proc int, acct string, call, ret int64, value int64) {
	b.op(proc, history.FRead, acct, "", call, ret, history.OK, history.Op{Msat: history.Int64(value)})
}

// sorted returns the ops in time order, as a recorder would have them.
func (b *builder) sorted() []history.Op {
	out := append([]history.Op(nil), b.ops...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].TimeNs < out[j-1].TimeNs; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	for i := range out {
		out[i].Index = i
	}
	return out
}

func linCheck(t *testing.T, b *builder) (Result, []string) {
	t.Helper()
	return Linearizability(b.sorted(), LinearizabilityOptions{TimeoutPerAccount: 10 * time.Second, OutDir: t.TempDir()})
}

func TestLinearizabilityAcceptsReadsThatFollowDeposits(t *testing.T) {
	b := &builder{}
	b.read(1, "a", 0, 5, 0)
	b.deposit(1, "a", 10, 20, history.OK)
	b.read(2, "a", 25, 30, grant)
	b.deposit(2, "a", 40, 50, history.OK)
	b.read(1, "a", 60, 70, 2*grant)
	if res, _ := linCheck(t, b); res.Verdict != Valid {
		t.Fatalf("verdict %s: %v", res.Verdict, res.Details)
	}
}

func TestLinearizabilityFlagsStaleReadAndWritesVisualization(t *testing.T) {
	b := &builder{}
	b.deposit(1, "a", 0, 10, history.OK)
	b.read(2, "a", 20, 30, 0) // the acknowledged deposit is missing
	res, files := linCheck(t, b)
	if res.Verdict != Violation {
		t.Fatalf("verdict %s, want violation", res.Verdict)
	}
	if len(files) != 1 {
		t.Fatalf("want one visualization, got %v", files)
	}
	html, err := os.ReadFile(files[0])
	if err != nil || !strings.Contains(string(html), "<html") {
		t.Fatalf("visualization %s unreadable or not HTML: %v", files[0], err)
	}
}

func TestLinearizabilityAllowsEitherValueDuringAConcurrentDeposit(t *testing.T) {
	for _, v := range []int64{0, grant} {
		b := &builder{}
		b.deposit(1, "a", 0, 100, history.OK)
		b.read(2, "a", 10, 20, v)
		if res, _ := linCheck(t, b); res.Verdict != Valid {
			t.Fatalf("read of %d during the deposit: verdict %s", v, res.Verdict)
		}
	}
}

func TestLinearizabilityFlagsReadGoingBackwards(t *testing.T) {
	b := &builder{}
	b.deposit(1, "a", 0, 100, history.OK)
	b.read(2, "a", 10, 20, grant)
	b.read(3, "a", 30, 40, 0) // saw the deposit, then un-saw it
	if res, _ := linCheck(t, b); res.Verdict != Violation {
		t.Fatalf("verdict %s, want violation", res.Verdict)
	}
}

func TestLinearizabilityUnsettledDepositMayOrMayNotHaveHappened(t *testing.T) {
	for _, tc := range []struct {
		reads []int64
		want  Verdict
	}{
		{[]int64{grant, grant}, Valid},     // known grant, plus the unsettled one never applied
		{[]int64{grant, 2 * grant}, Valid}, // ... or applied later
		{[]int64{3 * grant}, Violation},    // but not twice
	} {
		b := &builder{}
		b.deposit(1, "a", 0, 10, history.OK)
		b.deposit(2, "a", 20, 30, history.Info)
		for i, v := range tc.reads {
			b.read(3, "a", int64(40+20*i), int64(50+20*i), v)
		}
		if res, _ := linCheck(t, b); res.Verdict != tc.want {
			t.Fatalf("reads %v: verdict %s, want %s (%v)", tc.reads, res.Verdict, tc.want, res.Details)
		}
	}
}

func TestLinearizabilityPartitionsByAccount(t *testing.T) {
	b := &builder{}
	b.deposit(1, "a", 0, 10, history.OK)
	b.read(2, "b", 20, 30, 0) // another account: unaffected
	b.read(2, "a", 40, 50, grant)
	if res, _ := linCheck(t, b); res.Verdict != Valid {
		t.Fatalf("verdict %s: %v", res.Verdict, res.Details)
	}
}

func TestWritesSettleUnknownOutcomesByRetry(t *testing.T) {
	b := &builder{}
	id := b.deposit(1, "a", 0, 10, history.Info)
	// A rate-limited retry says nothing; a replayed success settles it.
	b.op(9, history.FFaucet, "a", "", 20, 30, history.Fail, history.Op{Resolves: id, Status: 429, Code: "rate_limited"})
	b.op(9, history.FFaucet, "a", "", 40, 50, history.OK, history.Op{Resolves: id, Msat: history.Int64(grant)})
	ws := Writes(b.sorted(), history.FFaucet)
	if len(ws) != 1 || ws[0].Outcome != Applied || !ws[0].Resolved || ws[0].ReturnNs != ms(50) || ws[0].Msat != grant {
		t.Fatalf("unexpected settlement: %+v", ws)
	}
	b2 := &builder{}
	id = b2.deposit(1, "a", 0, 10, history.Info)
	b2.op(9, history.FFaucet, "a", "", 20, 30, history.Fail, history.Op{Resolves: id, Status: 429, Code: "rate_limited"})
	if ws := Writes(b2.sorted(), history.FFaucet); ws[0].Outcome != Indeterminate {
		t.Fatalf("a rate-limited retry settled the write: %+v", ws[0])
	}
}

func finalWith(acct string, free int64, deposits int, sessions ...Session) *Final {
	af := &AccountFinal{FreeMsat: history.Int64(free), DepositsComplete: true, SessionsComplete: true, Sessions: sessions}
	for i := 0; i < deposits; i++ {
		s := string(rune('0' + i))
		af.Deposits = append(af.Deposits, Deposit{Seq: s, RailRef: "faucet:" + s, CreditedMsat: grant})
	}
	return &Final{Accounts: map[string]*AccountFinal{acct: af}}
}

func TestLostWritesFlagsAcknowledgedDepositMissing(t *testing.T) {
	b := &builder{}
	b.deposit(1, "a", 0, 10, history.OK)
	b.deposit(1, "a", 20, 30, history.OK)
	res, c := LostWrites(b.sorted(), finalWith("a", grant, 1))
	if res.Verdict != Violation || c.Lost != 1 || c.Duplicates != 0 {
		t.Fatalf("verdict %s counts %+v", res.Verdict, c)
	}
}

func TestLostWritesFlagsDuplicateApply(t *testing.T) {
	b := &builder{}
	b.deposit(1, "a", 0, 10, history.OK)
	res, c := LostWrites(b.sorted(), finalWith("a", 2*grant, 2))
	if res.Verdict != Violation || c.Duplicates != 1 {
		t.Fatalf("verdict %s counts %+v", res.Verdict, c)
	}
	// The same record listed twice is a duplicate too.
	f := finalWith("a", grant, 1)
	f.Accounts["a"].Deposits = append(f.Accounts["a"].Deposits, f.Accounts["a"].Deposits[0])
	if res, c := LostWrites(b.sorted(), f); res.Verdict != Violation || c.Duplicates == 0 {
		t.Fatalf("listing twice: verdict %s counts %+v", res.Verdict, c)
	}
}

func TestLostWritesAllowsUnsettledEitherWay(t *testing.T) {
	for _, listed := range []int{1, 2} {
		b := &builder{}
		b.deposit(1, "a", 0, 10, history.OK)
		b.deposit(1, "a", 20, 30, history.Info)
		if res, c := LostWrites(b.sorted(), finalWith("a", int64(listed)*grant, listed)); res.Verdict != Valid || c.Unresolved != 1 {
			t.Fatalf("%d listed: verdict %s counts %+v %v", listed, res.Verdict, c, res.Details)
		}
	}
}

func TestLostWritesMatchesMintedKeysExactly(t *testing.T) {
	mint := func(b *builder, key, keyID string, typ history.Type) {
		b.op(1, history.FMint, "a", key, 0, 10, typ, history.Op{KeyID: keyID})
	}
	b := &builder{}
	mint(b, "jepsen-mint-1", "k1", history.OK)
	mint(b, "jepsen-mint-2", "k2", history.OK)
	mint(b, "jepsen-mint-3", "", history.Fail)
	sessions := []Session{{KeyID: "k1", Label: "jepsen-mint-1"}, {KeyID: "k1b", Label: "jepsen-mint-1"}, {KeyID: "k3", Label: "jepsen-mint-3"}}
	res, c := LostWrites(b.sorted(), finalWith("a", 0, 0, sessions...))
	if res.Verdict != Violation || c.Lost != 1 || c.Duplicates != 2 {
		t.Fatalf("verdict %s counts %+v details %v", res.Verdict, c, res.Details)
	}
}

func TestMoneyFlagsBalanceThatDisagreesWithDeposits(t *testing.T) {
	b := &builder{}
	b.deposit(1, "a", 0, 10, history.OK)
	b.deposit(1, "a", 20, 30, history.OK)
	f := finalWith("a", grant, 2) // balance misses a grant the listing has
	f.Samples = map[string][]StateSample{"n1": {{5, "h"}}, "n2": {{5, "h"}}}
	res, rep := Money(b.sorted(), f)
	if res.Verdict != Violation || rep.DriftMsat != grant || !rep.HashesEqual {
		t.Fatalf("verdict %s report %+v details %v", res.Verdict, rep, res.Details)
	}
	ok := finalWith("a", 2*grant, 2)
	ok.Samples = f.Samples
	if res, rep := Money(b.sorted(), ok); res.Verdict != Valid || rep.DriftMsat != 0 {
		t.Fatalf("conserved: verdict %s report %+v details %v", res.Verdict, rep, res.Details)
	}
}

func TestHashesFlagDivergenceAndNonConvergence(t *testing.T) {
	res, equal, _ := Hashes(map[string][]StateSample{"n1": {{7, "aaa"}, {8, "bbb"}}, "n2": {{7, "aaa"}, {8, "ccc"}}})
	if res.Verdict != Violation || equal {
		t.Fatalf("diverged replicas: verdict %s equal %v", res.Verdict, equal)
	}
	res, equal, _ = Hashes(map[string][]StateSample{"n1": {{7, "aaa"}}, "n2": {{9, "zzz"}}})
	if res.Verdict != Violation || equal {
		t.Fatalf("never converged: verdict %s equal %v", res.Verdict, equal)
	}
	res, equal, common := Hashes(map[string][]StateSample{"n1": {{7, "aaa"}, {9, "x"}}, "n2": {{7, "aaa"}}})
	if res.Verdict != Valid || !equal || common != 1 {
		t.Fatalf("converged replicas: verdict %s equal %v common %d", res.Verdict, equal, common)
	}
}

func TestLivenessMeasuresGapsAndRecoveryAfterHeal(t *testing.T) {
	b := &builder{}
	b.deposit(1, "a", 0, 1000, history.OK)
	b.add(history.Op{Type: history.OK, Process: history.NemesisProcess, F: "kill-start"}, 1500)
	b.add(history.Op{Type: history.OK, Process: history.NemesisProcess, F: "kill-stop"}, 3000)
	b.deposit(1, "a", 3000, 9000, history.OK)
	res, rep := Liveness(b.sorted(), 0, ms(10000), 5*time.Second)
	if rep.LongestUnavailable != 8*time.Second {
		t.Fatalf("longest gap %v, want 8s", rep.LongestUnavailable)
	}
	if res.Verdict != Violation || rep.SlowestRecovery != 6*time.Second {
		t.Fatalf("recovery 6s past a 5s bound: verdict %s report %+v", res.Verdict, rep)
	}
	if res, _ := Liveness(b.sorted(), 0, ms(10000), 10*time.Second); res.Verdict != Valid {
		t.Fatalf("within bound: verdict %s %v", res.Verdict, res.Details)
	}
}

func TestSafeNameKeepsVisualizationInsideTheReport(t *testing.T) {
	if got := safeName("../../etc/passwd"); strings.ContainsAny(got, "/.") || filepath.Base(got) != got {
		t.Fatalf("safeName let a path through: %q", got)
	}
}
