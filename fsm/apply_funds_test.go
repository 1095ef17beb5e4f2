package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

// railWorld is one replica with accounts, driven the way the HTTP layer and
// the leader's rail driver drive it.
type railWorld struct {
	*replica
	ts int64
	n  int
}

const railT0 = 1_700_000_000_000

func newRailWorld(t *testing.T) *railWorld {
	w := &railWorld{replica: newReplica(t), ts: railT0}
	wantOK(t, w.apply(tickAt(w.ts)))
	return w
}

// at applies cmd stamped with the world's clock, advanced by 1 ms.
func (w *railWorld) at(cmd *Command) *Result {
	w.t.Helper()
	w.ts++
	// A jump longer than one entry may make is walked by ticks, as a
	// healthy leader's ticks would.
	if w.ts-w.now() > MaxClockStepMs {
		w.advanceTo(w.ts - 1)
	}
	cmd.TsMs = w.ts
	return w.apply(cmd)
}

func (w *railWorld) cmd(typ CmdType, account, keyID, idem string, payload any) *Command {
	w.t.Helper()
	c := mustCommand(w.t, typ, 0, payload)
	c.Account, c.KeyID = account, keyID
	if idem != "" {
		c.IdemKey, c.ReqHash = "acct:"+account+":"+idem, []byte(idem)
	}
	return c
}

// account signs up an account and funds it with msat through a Spark
// deposit; it returns the account id and its master key id.
func (w *railWorld) account(msat int64) (string, string) {
	w.t.Helper()
	w.n++
	acct, key := fmt.Sprintf("acc_%d", w.n), fmt.Sprintf("key_%d", w.n)
	sum := sha256.Sum256([]byte(key))
	wantOK(w.t, w.at(w.cmd(CmdSignup, "", "", "", access.NewAccount{AccountID: acct, KeyID: key, KeyHashHex: hex.EncodeToString(sum[:])})))
	if msat > 0 {
		wantOK(w.t, w.at(w.cmd(CmdDepositSettled, "", "", "", funds.Settlement{AccountID: acct, AmountMsat: msat,
			RailRef: "spark-in-" + acct, Path: funds.PathSpark})))
	}
	return acct, key
}

func (w *railWorld) balance(account string) (balance int64) {
	w.m.Read(func(st *State, _ uint64) { balance = st.Ledger.Balance(account) })
	return balance
}

func (w *railWorld) withdrawal(railRef string) (wd funds.Withdrawal) {
	w.t.Helper()
	w.m.Read(func(st *State, _ uint64) {
		seq, ok := st.Funds.WithdrawalByRailRef[railRef]
		if !ok {
			w.t.Fatalf("no withdrawal %s", railRef)
		}
		wd = *st.Funds.Withdrawals[seq]
	})
	return wd
}

const sparkDest = "sparkt1destination"

func wreq(railRef string, amount, fee int64) funds.WithdrawalRequest {
	return funds.WithdrawalRequest{IdempotencyKey: "k-" + railRef, AmountMsat: amount, FeeMsat: fee,
		Path: funds.PathSpark, Destination: sparkDest, RailRef: railRef}
}

func (w *railWorld) request(acct, key string, r funds.WithdrawalRequest) *Result {
	w.t.Helper()
	return w.at(w.cmd(CmdWithdrawalRequested, acct, key, r.IdempotencyKey, r))
}

func (w *railWorld) result(railRef, status, reason string) *Result {
	w.t.Helper()
	return w.at(w.cmd(CmdWithdrawalResult, "", "", "", funds.PayoutResult{RailRef: railRef, Status: status, Reason: reason}))
}

func (w *railWorld) token(id string, amount int64) *funds.Confirm {
	return &funds.Confirm{TokenID: id, AmountMsat: amount, ExpiresAtMs: w.ts + funds.ConfirmTokenTTLMs}
}

const big = funds.ConfirmThresholdMsat // at the threshold: confirmation needed

func TestWithdrawalPaidMovesAmountOutAndFeeToRevenue(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(5 * big)
	free0 := w.balance(ledger.Free(acct))
	r := wreq("wd-1", big, 10_000)
	r.Confirm = w.token("tok-1", big)
	res := w.request(acct, key, r)
	if res.Status != http.StatusCreated || string(res.Body) != `{"railRef":"wd-1","queued":false}` {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	if got := w.balance(ledger.Free(acct)); got != free0-big-10_000 {
		t.Fatalf("free after request %d, want %d", got, free0-big-10_000)
	}
	if got := w.balance(ledger.PendingWithdrawals); got != big+10_000 {
		t.Fatalf("pending %d", got)
	}
	wantOK(t, w.result("wd-1", funds.PayoutPaid, ""))
	wd := w.withdrawal("wd-1")
	if wd.State != funds.StatePaid || wd.PaidTsMs != w.ts || wd.Reason != "" {
		t.Fatalf("after paid: %+v", wd)
	}
	if w.balance(ledger.PendingWithdrawals) != 0 || w.balance(ledger.FeeRevenue) != 10_000 || w.balance(ledger.Free(acct)) != free0-big-10_000 {
		t.Fatal("paid withdrawal left the wrong balances")
	}
	var paid int64
	w.m.Read(func(st *State, _ uint64) { paid = st.Ledger.PaidMsat })
	if paid != big {
		t.Fatalf("paid out %d, want exactly the amount %d", paid, big)
	}
	// A repeated answer for a final withdrawal is refused and changes nothing.
	before := w.money()
	wantRefused(t, w.result("wd-1", funds.PayoutPaid, ""), http.StatusConflict, wire.CodeConflict)
	wantRefused(t, w.result("wd-1", funds.PayoutReturned, "late"), http.StatusConflict, wire.CodeConflict)
	wantRefused(t, w.result("wd-1", funds.PayoutPending, ""), http.StatusConflict, wire.CodeConflict)
	if string(w.money()) != string(before) {
		t.Fatal("a repeated payout result changed money state")
	}
}

// money is the encoding of everything a refusal must leave alone.
func (w *railWorld) money() []byte {
	w.t.Helper()
	var b []byte
	w.m.Read(func(st *State, _ uint64) {
		var err error
		if b, err = Marshal([]any{st.Funds, st.Ledger, st.Seq}); err != nil {
			w.t.Fatal(err)
		}
	})
	return b
}

func TestWithdrawalReturnedRefundsExactly(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(big)
	free0 := w.balance(ledger.Free(acct))
	r := wreq("wd-ln", 12_345, 2_013)
	r.Path, r.Destination = funds.PathLightning, "lntb1invoice"
	wantOK(t, w.request(acct, key, r))
	wantOK(t, w.result("wd-ln", funds.PayoutReturned, "unknown payout invoice"))
	wd := w.withdrawal("wd-ln")
	if wd.State != funds.StateReturned || wd.Reason != "unknown payout invoice" || wd.PaidTsMs != 0 {
		t.Fatalf("after return: %+v", wd)
	}
	if got := w.balance(ledger.Free(acct)); got != free0 {
		t.Fatalf("free %d after refund, want exactly %d", got, free0)
	}
	if w.balance(ledger.PendingWithdrawals) != 0 || w.balance(ledger.FeeRevenue) != 0 {
		t.Fatal("a returned withdrawal kept money")
	}
	v := funds.NewWithdrawalView(&wd)
	if v.QueuedReason == nil || *v.QueuedReason != "unknown payout invoice" || v.PaidTsMs != nil {
		t.Fatalf("view %+v", v)
	}
}

func TestWithdrawalPendingQueuesAndLaterOnesWait(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(big)
	wantOK(t, w.request(acct, key, wreq("wd-a", 5_000, 10_000)))
	wantOK(t, w.result("wd-a", funds.PayoutPending, "spark operator busy"))
	if wd := w.withdrawal("wd-a"); wd.State != funds.StateQueued || wd.Reason != "spark operator busy" {
		t.Fatalf("pending: %+v", wd)
	}
	res := w.request(acct, key, wreq("wd-b", 6_000, 10_000))
	if string(res.Body) != `{"railRef":"wd-b","queued":true}` {
		t.Fatalf("a withdrawal behind a queued one: %s", res.Body)
	}
	wantOK(t, w.result("wd-a", funds.PayoutPaid, ""))
	wantOK(t, w.result("wd-b", funds.PayoutPaid, ""))
	res = w.request(acct, key, wreq("wd-c", 7_000, 10_000))
	if string(res.Body) != `{"railRef":"wd-c","queued":false}` {
		t.Fatalf("after the queue drained: %s", res.Body)
	}
	w.m.Read(func(st *State, _ uint64) {
		if len(st.Funds.QueuedByPath) != 0 || len(st.Funds.Open) != 1 || st.Funds.Open[0] != w.withdrawal("wd-c").Seq {
			t.Fatalf("queued %v open %v", st.Funds.QueuedByPath, st.Funds.Open)
		}
	})
}

func TestWithdrawalRefusalsChangeNothing(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(50_000)
	_, other := w.account(0)
	before := w.money()
	cases := []struct {
		name   string
		key    string
		mut    func(r *funds.WithdrawalRequest)
		status int
		code   string
	}{
		{"amount plus fee above free", key, func(r *funds.WithdrawalRequest) { r.AmountMsat = 41_000 }, 409, wire.CodeInsufficientBalance},
		{"zero amount", key, func(r *funds.WithdrawalRequest) { r.AmountMsat = 0 }, 400, wire.CodeValidation},
		{"spark msat", key, func(r *funds.WithdrawalRequest) { r.AmountMsat = 1_001 }, 400, wire.CodeValidation},
		{"no destination", key, func(r *funds.WithdrawalRequest) { r.Destination = "" }, 400, wire.CodeValidation},
		{"bad path", key, func(r *funds.WithdrawalRequest) { r.Path = "l1" }, 400, wire.CodeValidation},
		{"expired invoice", key, func(r *funds.WithdrawalRequest) {
			r.Path, r.Destination, r.DestExpiresAtMs = funds.PathLightning, "lntb1x", w.ts
		}, 400, wire.CodeValidation},
		{"another account's key", other, func(r *funds.WithdrawalRequest) {}, 401, wire.CodeUnauthorized},
	}
	for i, tc := range cases {
		r := wreq(fmt.Sprintf("wd-r%d", i), 40_000, 10_000)
		tc.mut(&r)
		res := w.request(acct, tc.key, r)
		if res.OK() || res.Status != tc.status || res.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, res.Status, res.Body, tc.status, tc.code)
		}
	}
	if string(w.money()) != string(before) {
		t.Fatal("a refused withdrawal changed funds, the ledger or the seq")
	}
	// Exactly amount + fee == free is allowed.
	wantOK(t, w.request(acct, key, wreq("wd-exact", 40_000, 10_000)))
	if w.balance(ledger.Free(acct)) != 0 {
		t.Fatal("exact withdrawal left a balance")
	}
}

func TestWithdrawalNeedsWithdrawScope(t *testing.T) {
	w := newRailWorld(t)
	acct, master := w.account(big)
	sc := access.ScopeRead | access.ScopeTrade
	sum := sha256.Sum256([]byte("delegate"))
	wantOK(t, w.at(w.cmd(CmdMintKey, acct, master, "", access.NewKey{KeyID: "key_trade", KeyHashHex: hex.EncodeToString(sum[:]), Scopes: &sc})))
	wantRefused(t, w.request(acct, "key_trade", wreq("wd-s", 5_000, 10_000)), http.StatusForbidden, wire.CodeInsufficientScope)
}

func TestConfirmationRequiredForFirstSeenAtThreshold(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(10 * big)
	// Just below the threshold: no token needed.
	wantOK(t, w.request(acct, key, wreq("wd-small", big-1000, 10_000)))
	// At the threshold, first-seen: 428 without a token.
	res := w.request(acct, key, wreq("wd-big", big, 10_000))
	wantRefused(t, res, http.StatusPreconditionRequired, wire.CodeConfirmationNeeded)
	if !strings.Contains(string(res.Body), "quote") {
		t.Fatalf("428 reason does not say what to do: %s", res.Body)
	}
	// The small one was only requested, not paid: still first-seen.
	wantOK(t, w.result("wd-small", funds.PayoutPaid, ""))
	// Paid once: the destination is known, no token needed any more.
	wantOK(t, w.request(acct, key, wreq("wd-big", big, 10_000)))
}

func TestConfirmTokenMisuse(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(10 * big)
	type tc struct {
		name string
		cf   func() *funds.Confirm
		want string
	}
	used := w.token("tok-used", big)
	r := wreq("wd-first", big, 10_000)
	r.Confirm = used
	wantOK(t, w.request(acct, key, r))
	cases := []tc{
		{"other amount", func() *funds.Confirm { return w.token("tok-a", big+1000) }, "not"},
		{"reused", func() *funds.Confirm { return used }, "already used"},
		{"expired", func() *funds.Confirm { c := w.token("tok-e", big); c.ExpiresAtMs = w.ts + 1; return c }, "expired"},
		{"beyond lifetime", func() *funds.Confirm {
			c := w.token("tok-l", big)
			c.ExpiresAtMs += funds.ConfirmClockSkewMs + 10
			return c
		}, "lifetime"},
		{"other account or destination", func() *funds.Confirm {
			c := w.token("tok-o", big)
			c.Problem = "this confirmToken was issued for another account or destination"
			return c
		}, "another account"},
		{"malformed", func() *funds.Confirm { return &funds.Confirm{} }, "malformed"},
	}
	for i, c := range cases {
		r := wreq(fmt.Sprintf("wd-m%d", i), big, 10_000)
		r.Confirm = c.cf()
		res := w.request(acct, key, r)
		if res.Status != http.StatusPreconditionRequired || res.Code != wire.CodeConfirmationNeeded || !strings.Contains(string(res.Body), c.want) {
			t.Errorf("%s: %d %s", c.name, res.Status, res.Body)
		}
	}
	// Expiry is log time: the same token passes before and fails after.
	r = wreq("wd-t", big, 10_000)
	r.Confirm = w.token("tok-t", big)
	r.Confirm.ExpiresAtMs = w.ts + 2 // the next command is stamped ts+1
	wantOK(t, w.request(acct, key, r))
	r = wreq("wd-t2", big, 10_000)
	r.Confirm = w.token("tok-t2", big)
	r.Confirm.ExpiresAtMs = w.ts + 1 // stamped exactly at expiry: expired
	wantRefused(t, w.request(acct, key, r), http.StatusPreconditionRequired, wire.CodeConfirmationNeeded)
}

func TestSpentTokensArePrunedAfterExpiry(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(10 * big)
	r := wreq("wd-1", big, 10_000)
	r.Confirm = w.token("tok-1", big)
	wantOK(t, w.request(acct, key, r))
	count := func() (n int) {
		w.m.Read(func(st *State, _ uint64) { n = len(st.Funds.UsedTokens) + len(st.Funds.UsedOrder) })
		return n
	}
	if count() != 2 {
		t.Fatal("spent token not recorded")
	}
	w.ts += funds.ConfirmTokenTTLMs + 1
	w.advanceTo(w.ts)
	if count() != 0 {
		t.Fatal("expired spent token kept")
	}
}

func TestWithdrawalIdempotencyBackstop(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(big)
	r := wreq("wd-1", 5_000, 10_000)
	wantOK(t, w.request(acct, key, r))
	free := w.balance(ledger.Free(acct))
	// The same client key after the idempotency store forgot it (a new
	// scoped key here): the original answer, nothing reserved twice.
	r2 := r
	r2.RailRef = "wd-other"
	c := w.cmd(CmdWithdrawalRequested, acct, key, "forgotten", r2)
	res := w.at(c)
	if res.Status != http.StatusCreated || string(res.Body) != `{"railRef":"wd-1","queued":false}` {
		t.Fatalf("retry: %d %s", res.Status, res.Body)
	}
	if w.balance(ledger.Free(acct)) != free {
		t.Fatal("a retry reserved money again")
	}
	r3 := r2
	r3.AmountMsat = 6_000
	wantRefused(t, w.at(w.cmd(CmdWithdrawalRequested, acct, key, "forgotten2", r3)), http.StatusConflict, wire.CodeIdempotencyReused)
}

// applyEvents applies cmd at the world's clock and returns its events.
func (w *railWorld) applyEvents(cmd *Command) (*Result, []Event) {
	w.t.Helper()
	w.ts++
	cmd.TsMs = w.ts
	b, err := cmd.Encode()
	if err != nil {
		w.t.Fatal(err)
	}
	res, evs := w.m.Apply(w.next, b)
	w.next++
	return res, evs
}

// restSnapshot is what a client following SPEC section 6 holds after its
// REST snapshot: the withdrawals page as httpapi renders it, and the
// highest seq it shows.
func (w *railWorld) restSnapshot(acct string) (views []funds.WithdrawalView, maxSeq uint64) {
	w.m.Read(func(st *State, _ uint64) {
		seqs, _ := funds.Page(st.Funds.WithdrawalsByAccount[acct], 0, 200)
		for _, q := range seqs {
			v := funds.NewWithdrawalView(st.Funds.WithdrawalAt(q))
			views = append(views, v)
			maxSeq = max(maxSeq, uint64(v.Seq))
		}
	})
	return views, maxSeq
}

// A client that takes a REST snapshot, resumes the stream and drops every
// event whose seq it has already seen (SPEC section 6, rule 6) still sees
// each change of a withdrawal: every change takes a fresh seq, larger than
// anything the snapshot showed, and the record then shows that seq.
func TestWithdrawalChangesTakeFreshSeqs(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(big)
	seen := map[uint64]bool{}
	_, snapMax := w.restSnapshot(acct)
	w.m.Read(func(st *State, _ uint64) { snapMax = max(snapMax, st.Funds.ByAccount[acct][0]) })
	seen[snapMax] = true
	var got []string
	deliver := func(evs []Event) {
		for _, ev := range evs {
			if ev.Account != acct || seen[ev.Seq] {
				continue
			}
			if ev.Seq <= snapMax {
				t.Fatalf("event %s seq %d not above the snapshot's %d", ev.Kind, ev.Seq, snapMax)
			}
			seen[ev.Seq] = true
			snapMax = ev.Seq
			got = append(got, ev.Data.(funds.WithdrawalView).State)
			if rec := w.withdrawal(ev.Data.(funds.WithdrawalView).RailRefString()); rec.ChangeSeq() != ev.Seq {
				t.Fatalf("record seq %d, its latest event %d", rec.ChangeSeq(), ev.Seq)
			}
		}
	}
	for _, step := range []struct {
		cmd    *Command
		status string
	}{
		{w.cmd(CmdWithdrawalRequested, acct, key, "k1", wreq("wd-1", 5_000, 10_000)), ""},
		{w.cmd(CmdWithdrawalResult, "", "", "", funds.PayoutResult{RailRef: "wd-1", Status: funds.PayoutPending, Reason: "slow"}), ""},
		{w.cmd(CmdWithdrawalResult, "", "", "", funds.PayoutResult{RailRef: "wd-1", Status: funds.PayoutPaid}), ""},
		{w.cmd(CmdWithdrawalRequested, acct, key, "k2", wreq("wd-2", 5_000, 10_000)), ""},
		{w.cmd(CmdWithdrawalResult, "", "", "", funds.PayoutResult{RailRef: "wd-2", Status: funds.PayoutReturned}), ""},
	} {
		res, evs := w.applyEvents(step.cmd)
		wantOK(t, res)
		deliver(evs)
	}
	want := []string{funds.StateRequested, funds.StateQueued, funds.StatePaid, funds.StateRequested, funds.StateReturned}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the de-duplicating client saw %v, want %v", got, want)
	}
	// A repeated pending answer changes nothing: no event, no seq.
	_, evs := w.applyEvents(w.cmd(CmdWithdrawalRequested, acct, key, "k3", wreq("wd-3", 5_000, 10_000)))
	deliver(evs)
	pending := funds.PayoutResult{RailRef: "wd-3", Status: funds.PayoutPending, Reason: "slow"}
	_, evs = w.applyEvents(w.cmd(CmdWithdrawalResult, "", "", "", pending))
	deliver(evs)
	var seqBefore uint64
	w.m.Read(func(st *State, _ uint64) { seqBefore = st.Seq })
	res, evs := w.applyEvents(w.cmd(CmdWithdrawalResult, "", "", "", pending))
	wantOK(t, res)
	w.m.Read(func(st *State, _ uint64) {
		if len(evs) != 0 || st.Seq != seqBefore {
			t.Fatalf("a repeated pending answer emitted %v and moved seq %d -> %d", evs, seqBefore, st.Seq)
		}
	})
	// History pages list by latest change, newest first: wd-3 (queued),
	// then wd-2 (returned), then wd-1 (paid); the cursor is the seq shown.
	views, _ := w.restSnapshot(acct)
	if len(views) != 3 || *views[0].RailRef != "wd-3" || *views[1].RailRef != "wd-2" || *views[2].RailRef != "wd-1" ||
		!(views[0].Seq > views[1].Seq && views[1].Seq > views[2].Seq) {
		t.Fatalf("history order %+v", views)
	}
}

func (w *railWorld) invoice(acct, key, ref string, amount, expiresAtMs int64) *Result {
	w.t.Helper()
	return w.at(w.cmd(CmdInvoiceCreated, acct, key, "inv-"+ref, funds.NewInvoice{PaymentRequest: "lntb1" + ref,
		PaymentRef: ref, AmountMsat: amount, ExpiresAtMs: expiresAtMs}))
}

func (w *railWorld) settle(ref string, amount int64) *Result {
	w.t.Helper()
	return w.at(w.cmd(CmdDepositSettled, "", "", "", funds.Settlement{AmountMsat: amount, RailRef: ref, Path: funds.PathLightning}))
}

func ref64(c byte) string { return strings.Repeat(string(c), 64) }

func TestInvoicePaidOnceToItsAccount(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(0)
	ref := ref64('a')
	res := w.invoice(acct, key, ref, 250_000, w.ts+60_000)
	if res.Status != http.StatusCreated {
		t.Fatalf("invoice: %d %s", res.Status, res.Body)
	}
	var got funds.InvoiceCreated
	if err := res.Decode(&got); err != nil || got.PaymentRef != ref || got.Invoice != "lntb1"+ref {
		t.Fatalf("invoice result %s", res.Body)
	}
	wantRefused(t, w.settle(ref, 250_001), http.StatusBadRequest, wire.CodeValidation)
	wantRefused(t, w.settle(ref64('b'), 250_000), http.StatusNotFound, wire.CodeNotFound)
	res = w.settle(ref, 250_000)
	wantOK(t, res)
	var d DepositView
	if err := res.Decode(&d); err != nil || d.AccountID != acct || d.RailRef != ref || d.AmountMsat != 250_000 || d.FeeMsat != 0 {
		t.Fatalf("deposit %s", res.Body)
	}
	if w.balance(ledger.Free(acct)) != 250_000 {
		t.Fatal("deposit not credited to the invoice's account")
	}
	before := w.money()
	wantRefused(t, w.settle(ref, 250_000), http.StatusConflict, wire.CodeConflict)
	if string(w.money()) != string(before) {
		t.Fatal("a second payment changed money state")
	}
	w.m.Read(func(st *State, _ uint64) {
		if len(st.Funds.Invoices) != 0 || len(st.Funds.InvoicesByAccount) != 0 {
			t.Fatal("paid invoice kept open")
		}
	})
}

func TestExpiredInvoiceCannotBeCredited(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(0)
	ref := ref64('c')
	wantOK(t, w.invoice(acct, key, ref, 0, w.ts+3))
	// Stamped exactly at the expiry: expired (as every wallet computes it).
	w.ts++
	wantRefused(t, w.settle(ref, 9_000), http.StatusConflict, wire.CodeConflict)
	if w.balance(ledger.Free(acct)) != 0 {
		t.Fatal("expired invoice credited")
	}
}

func (w *railWorld) settleAt(ref string, amount, settledMs int64) *Result {
	w.t.Helper()
	return w.at(w.cmd(CmdDepositSettled, "", "", "", funds.Settlement{AmountMsat: amount, RailRef: ref,
		Path: funds.PathLightning, SettledTsMs: settledMs}))
}

// Expiry is judged at the rail's settlement time: an invoice paid 1 ms
// before it expired credits although the entry applies after the expiry;
// one paid at the expiry does not; a settlement time before the invoice
// existed or beyond the log time plus the skew is refused.
func TestInvoiceExpiryIsJudgedAtTheRailsSettlementTime(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(0)
	created := w.ts + 1
	expires := created + 100
	for _, c := range []byte("1234") {
		wantOK(t, w.invoice(acct, key, ref64(c), 0, expires))
	}
	w.ts = expires + 1_000 // every entry below applies after the expiry
	before := w.money()
	wantRefused(t, w.settleAt(ref64('1'), 5, expires), http.StatusConflict, wire.CodeConflict)
	wantRefused(t, w.settleAt(ref64('1'), 5, created-1), http.StatusBadRequest, wire.CodeValidation)
	wantRefused(t, w.settleAt(ref64('1'), 5, w.ts+2+funds.SettledClockSkewMs), http.StatusBadRequest, wire.CodeValidation)
	wantRefused(t, w.settle(ref64('1'), 5), http.StatusConflict, wire.CodeConflict) // no rail time: the log's
	if string(w.money()) != string(before) {
		t.Fatal("a refused settlement moved money")
	}
	wantOK(t, w.settleAt(ref64('2'), 7, expires-1))
	if w.balance(ledger.Free(acct)) != 7 {
		t.Fatal("an invoice settled before its expiry was not credited")
	}
	wantOK(t, w.settleAt(ref64('1'), 3, created)) // the creation instant itself is inside its life
}

func TestAmountlessInvoiceTakesAnyAmountAndAccountMustMatch(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(0)
	other, _ := w.account(0)
	ref := ref64('d')
	wantOK(t, w.invoice(acct, key, ref, 0, w.ts+60_000))
	bad := w.cmd(CmdDepositSettled, "", "", "", funds.Settlement{AccountID: other, AmountMsat: 7, RailRef: ref, Path: funds.PathLightning})
	wantRefused(t, w.at(bad), http.StatusBadRequest, wire.CodeValidation)
	wantOK(t, w.settle(ref, 7))
	if w.balance(ledger.Free(acct)) != 7 {
		t.Fatal("amountless invoice not credited")
	}
}

func TestInvoiceRefusals(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(0)
	wantRefused(t, w.invoice(acct, key, "nothex", 1, w.ts+60_000), http.StatusBadRequest, wire.CodeValidation)
	wantRefused(t, w.invoice(acct, key, ref64('e'), -1, w.ts+60_000), http.StatusBadRequest, wire.CodeValidation)
	wantRefused(t, w.invoice(acct, "key_nobody", ref64('e'), 1, w.ts+60_000), http.StatusUnauthorized, wire.CodeUnauthorized)
	wantOK(t, w.invoice(acct, key, ref64('e'), 1, w.ts+60_000))
	c := w.cmd(CmdInvoiceCreated, acct, key, "again", funds.NewInvoice{PaymentRequest: "x", PaymentRef: ref64('e'), AmountMsat: 1, ExpiresAtMs: w.ts + 60_000})
	wantRefused(t, w.at(c), http.StatusConflict, wire.CodeConflict)
}

func TestOpenInvoicesAreBoundedAndExpiredOnesMakeRoom(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(0)
	first := w.ts + 2*funds.MaxOpenInvoicesPerAccount
	for i := range funds.MaxOpenInvoicesPerAccount {
		exp := w.ts + 1_000_000
		if i == 0 {
			exp = first
		}
		wantOK(t, w.invoice(acct, key, fmt.Sprintf("%064x", i+1), 0, exp))
	}
	wantRefused(t, w.invoice(acct, key, fmt.Sprintf("%064x", 999), 0, w.ts+60_000), http.StatusConflict, wire.CodeConflict)
	w.ts = first // the first invoice expires with the next command
	wantOK(t, w.invoice(acct, key, fmt.Sprintf("%064x", 999), 0, w.ts+60_000))
	listed := func() (byAccount, kept int) {
		w.m.Read(func(st *State, _ uint64) {
			byAccount, kept = len(st.Funds.InvoicesByAccount[acct]), len(st.Funds.Invoices)
		})
		return byAccount, kept
	}
	// The expired one no longer counts, but stays for its settlement grace.
	if a, k := listed(); a != funds.MaxOpenInvoicesPerAccount+1 || k != a {
		t.Fatalf("%d invoices listed, %d kept", a, k)
	}
	// The timer, not the account's next invoice, forgets it after the grace.
	w.ts = first + funds.InvoiceSettleGraceMs - 1
	wantOK(t, w.at(tickAt(0)))
	if a, k := listed(); a != funds.MaxOpenInvoicesPerAccount || k != a {
		t.Fatalf("after the grace: %d invoices listed, %d kept", a, k)
	}
}
