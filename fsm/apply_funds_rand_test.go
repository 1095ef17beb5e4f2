package fsm

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
)

// checkFundsInvariants asserts what the ledger's double entry and the
// Proof of Reserves rely on in funds state.
func (w *railWorld) checkFundsInvariants(step int) {
	w.t.Helper()
	w.m.Read(func(st *State, _ uint64) {
		if err := st.Ledger.Check(); err != nil {
			w.t.Fatalf("step %d: %v", step, err)
		}
		if step%10 == 0 {
			if snap := BuildPoR(st); len(snap.Problems) > 0 {
				w.t.Fatalf("step %d: PoR problems %v", step, snap.Problems)
			}
		}
		f := st.Funds
		var pending int64
		open := []uint64{}
		queued := map[string]int64{}
		for id, wd := range f.Withdrawals {
			if id != wd.Seq {
				w.t.Fatalf("step %d: withdrawal keyed %d has seq %d", step, id, wd.Seq)
			}
			if f.WithdrawalByRailRef[wd.RailRef] != id {
				w.t.Fatalf("step %d: railRef index of %d", step, id)
			}
			if f.WithdrawalByChange[wd.ChangeSeq()] != id {
				w.t.Fatalf("step %d: change index of %d", step, id)
			}
			if !wd.Final() {
				pending += wd.AmountMsat + wd.FeeMsat
				open = append(open, id)
			}
			if wd.State == funds.StateQueued {
				queued[wd.Path]++
			}
		}
		sort.Slice(open, func(i, j int) bool { return open[i] < open[j] })
		if fmt.Sprint(open) != fmt.Sprint(append([]uint64{}, f.Open...)) {
			w.t.Fatalf("step %d: Open %v, open withdrawals %v", step, f.Open, open)
		}
		if b := st.Ledger.Balance(ledger.PendingWithdrawals); b != pending {
			w.t.Fatalf("step %d: pending holds %d, open withdrawals %d", step, b, pending)
		}
		for p, n := range f.QueuedByPath {
			if queued[p] != n {
				w.t.Fatalf("step %d: QueuedByPath[%s]=%d, queued %d", step, p, n, queued[p])
			}
		}
		for p, n := range queued {
			if f.QueuedByPath[p] != n {
				w.t.Fatalf("step %d: QueuedByPath[%s]=%d, queued %d", step, p, f.QueuedByPath[p], n)
			}
		}
		if len(f.WithdrawalByRailRef) != len(f.Withdrawals) || len(f.WithdrawalByChange) != len(f.Withdrawals) {
			w.t.Fatalf("step %d: index sizes %d %d, withdrawals %d", step, len(f.WithdrawalByRailRef), len(f.WithdrawalByChange), len(f.Withdrawals))
		}
		n := 0
		for a, seqs := range f.WithdrawalsByAccount {
			for i, q := range seqs {
				wd := f.WithdrawalAt(q)
				if wd == nil || wd.AccountID != a || (i > 0 && seqs[i-1] >= q) {
					w.t.Fatalf("step %d: account index of %s broken at %d", step, a, q)
				}
				n++
			}
		}
		if n != len(f.Withdrawals) {
			w.t.Fatalf("step %d: account index lists %d, withdrawals %d", step, n, len(f.Withdrawals))
		}
		for k, id := range f.WithdrawalByIdem {
			wd := f.Withdrawals[id]
			if wd == nil || k != wd.AccountID+"\x00"+wd.IdempotencyKey {
				w.t.Fatalf("step %d: idem index %q -> %d", step, k, id)
			}
		}
	})
}

// TestFundsRandomSequencesKeepInvariants drives three accounts through
// random withdrawals (Spark and Lightning, reused idempotency keys, reused
// railRefs), payout results in any order (paid, returned, pending, for
// final ones too), invoices and settlements (wrong amounts, expired, paid
// twice) and jumps of log time. After every entry the ledger conserves,
// the pending-withdrawal account holds exactly the open withdrawals, every
// funds index agrees with the records, Proof of Reserves finds no problem,
// and a refusal leaves money state untouched; a snapshot taken at the end
// restores to a replica that goes on identically.
func TestFundsRandomSequencesKeepInvariants(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for seed := int64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewSource(seed))
		w := newRailWorld(t)
		type acc struct{ id, key string }
		var accs []acc
		for i := 0; i < 3; i++ {
			a, k := w.account(5_000_000)
			accs = append(accs, acc{a, k})
		}
		refs := []string{}
		invs := []string{}
		for step := 0; step < 400; step++ {
			a := accs[rng.Intn(len(accs))]
			before := w.money()
			var res *Result
			switch op := rng.Intn(10); {
			case op < 4:
				ref := fmt.Sprintf("wd-%d-%d", seed, step)
				if len(refs) > 0 && rng.Intn(8) == 0 {
					ref = refs[rng.Intn(len(refs))]
				}
				amt := int64(1+rng.Intn(3)) * 1000
				r := funds.WithdrawalRequest{IdempotencyKey: fmt.Sprintf("k%d", rng.Intn(6)), AmountMsat: amt,
					FeeMsat: int64(rng.Intn(3)) * 7, Path: funds.PathSpark, Destination: fmt.Sprintf("sparkt1d%d", rng.Intn(3)), RailRef: ref}
				if rng.Intn(2) == 0 {
					r.Path, r.Destination = funds.PathLightning, fmt.Sprintf("lntb1inv%d", rng.Intn(4))
				}
				res = w.request(a.id, a.key, r)
				if res.OK() {
					refs = append(refs, ref)
				}
			case op < 8:
				if len(refs) == 0 {
					continue
				}
				st := []string{funds.PayoutPaid, funds.PayoutReturned, funds.PayoutPending, funds.PayoutPending}[rng.Intn(4)]
				res = w.result(refs[rng.Intn(len(refs))], st, fmt.Sprintf("r%d", rng.Intn(2)))
			case op < 9:
				ref := fmt.Sprintf("%064x", rng.Intn(1<<20))
				res = w.invoice(a.id, a.key, ref, int64(rng.Intn(2))*3000, w.ts+int64(rng.Intn(5000)))
				if res.OK() {
					invs = append(invs, ref)
				}
			default:
				if len(invs) == 0 {
					continue
				}
				res = w.settle(invs[rng.Intn(len(invs))], 3000)
			}
			if !res.OK() && string(w.money()) != string(before) {
				t.Fatalf("seed %d step %d: refusal %s changed money state", seed, step, res.Body)
			}
			if rng.Intn(20) == 0 {
				w.ts += int64(rng.Intn(3_600_000))
				w.advanceTo(w.ts)
			}
			w.checkFundsInvariants(step)
		}
		// A restored replica goes on exactly like this one.
		dst := w.restored()
		if dst.hash() != w.hash() {
			t.Fatalf("seed %d: restored funds state hashes differently", seed)
		}
		for i, ref := range refs[len(refs)-30:] {
			st := []string{funds.PayoutPaid, funds.PayoutReturned, funds.PayoutPending}[i%3]
			cmd := w.cmd(CmdWithdrawalResult, "", "", "", funds.PayoutResult{RailRef: ref, Status: st})
			w.ts += funds.WithdrawalRetainMs / 10
			w.advanceTo(w.ts - 1)
			dst.advanceTo(w.ts - 1)
			cmd.TsMs = w.ts
			a, b := w.apply(cmd), dst.apply(cmd)
			if a.Status != b.Status || string(a.Body) != string(b.Body) || w.hash() != dst.hash() {
				t.Fatalf("seed %d: restored replica diverged at %s: %s vs %s", seed, ref, a.Body, b.Body)
			}
		}
	}
}

// Past the closed-withdrawal bound, with trims of paid and returned ones.
func TestFundsRandomSequencesPastTheClosedBoundKeepInvariants(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for seed := int64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		w := newRailWorld(t)
		acct, key := w.account(1_000_000_000)
		var refs []string
		for i := 0; i < funds.MaxClosedWithdrawalsPerAccount+5; i++ {
			ref := fmt.Sprintf("pre-%d", i)
			r := wreq(ref, 1000, 1)
			r.IdempotencyKey = fmt.Sprintf("pk%d", i)
			res := w.request(acct, key, r)
			if !res.OK() {
				continue
			}
			if rng.Intn(2) == 0 {
				wantOK(t, w.result(ref, funds.PayoutPaid, ""))
			} else {
				wantOK(t, w.result(ref, funds.PayoutReturned, "x"))
			}
			refs = append(refs, ref)
		}
		w.checkFundsInvariants(-1)
		for step := 0; step < 400; step++ {
			before := w.money()
			var res *Result
			if rng.Intn(2) == 0 {
				ref := fmt.Sprintf("wd-%d", step)
				r := wreq(ref, 1000, 3)
				r.IdempotencyKey = fmt.Sprintf("k%d", rng.Intn(9))
				if rng.Intn(2) == 0 {
					r.Path, r.Destination = funds.PathLightning, fmt.Sprintf("lntb1inv%d", rng.Intn(4))
				}
				res = w.request(acct, key, r)
				if res.OK() {
					refs = append(refs, ref)
				}
			} else {
				st := []string{funds.PayoutPaid, funds.PayoutReturned, funds.PayoutPending}[rng.Intn(3)]
				res = w.result(refs[len(refs)-1-rng.Intn(min(len(refs), 30))], st, "r")
			}
			if !res.OK() && string(w.money()) != string(before) {
				t.Fatalf("seed %d step %d: refusal %s changed money state", seed, step, res.Body)
			}
			if rng.Intn(30) == 0 {
				w.ts += int64(rng.Intn(int(funds.WithdrawalRetainMs)))
				w.advanceTo(w.ts)
			}
			w.checkFundsInvariants(step)
		}
	}
}
