package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/wire"
)

// The deterministic simulation of DESIGN.md: random command streams are
// applied to three replicas, each fed differently (one entry at a time, in
// raft-sized batches, and through snapshot/restore round trips). After
// every entry the two one-at-a-time replicas must agree on the answer and
// on every event, the ledger invariants must hold (CheckInvariants panics
// otherwise), and the answers must match a model of the clock and the
// idempotency store. At every batch boundary (every 1 to 64 entries, and
// at the end) all four must agree on the state hash. Hashing marshals the
// whole state; doing it for two replicas after every entry was two thirds
// of the run, and a divergence that changes no answer and no event stays
// in the state until the next boundary.

const simEntries = 2000

func TestDeterministicSimulation(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			runSimulation(t, seed, simEntries, false)
		})
	}
}

// Every registered and unregistered command type, with random payloads,
// must still be deterministic and never break an invariant.
func TestDeterministicSimulationWithForeignTypes(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	runSimulation(t, 99, simEntries, true)
}

type simModel struct {
	nowMs int64
	idem  map[string]simRecord
}

type simRecord struct {
	hash      []byte
	expiresMs int64
	index     uint64
	body      []byte
}

func (m *simModel) advance(ts int64) {
	if ts <= m.nowMs {
		return
	}
	if m.nowMs != 0 && ts-m.nowMs > MaxClockStepMs {
		ts = m.nowMs + MaxClockStepMs
	}
	m.nowMs = ts
	for k, r := range m.idem {
		if r.expiresMs <= ts {
			delete(m.idem, k)
		}
	}
}

type simEntry struct {
	data []byte   // nil for a raft-internal entry
	cmd  *Command // nil for bytes that are not a command
}

func runSimulation(t *testing.T, seed uint64, entries int, foreign bool) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	gen := &simGen{rng: rng, clock: 1_700_000_000_000, foreign: foreign, priceQ8: 60_000 * market.Q8}

	single := newReplica(t)                                // one entry per Apply
	twin := newReplica(t)                                  // the same, compared after every entry
	batched := NewMachine(Options{CheckInvariants: true})  // raft-sized batches
	restored := NewMachine(Options{CheckInvariants: true}) // batches plus snapshot round trips
	model := &simModel{idem: map[string]simRecord{}}

	tally := map[CmdType]map[bool]int{}
	for typ := range handlers {
		tally[typ] = map[bool]int{}
	}
	defer func() {
		if !foreign {
			checkCoverage(t, tally)
		}
	}()
	var pending [][]byte
	var pendingIdx []uint64
	flush := func() {
		if len(pending) == 0 {
			return
		}
		rb, _ := batched.ApplyBatch(pendingIdx, pending)
		rr, _ := restored.ApplyBatch(pendingIdx, pending)
		for i := range rb {
			if !sameResult(rb[i], rr[i]) {
				t.Fatalf("entry %d: batched and restored replicas answered differently: %+v vs %+v", pendingIdx[i], rb[i], rr[i])
			}
		}
		want := single.hash()
		if twin.hash() != want {
			t.Fatalf("entry %d: replicas diverged", single.next-1)
		}
		for name, m := range map[string]*Machine{"batched": batched, "restored": restored} {
			idx, h, err := m.StateHash()
			if err != nil {
				t.Fatal(err)
			}
			if idx != single.next-1 || h != want {
				t.Fatalf("%s replica at %d/%s, single at %d/%s", name, idx, h, single.next-1, want)
			}
		}
		pending, pendingIdx = pending[:0], pendingIdx[:0]
		if rng.IntN(4) == 0 {
			snap, err := restored.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			fresh := NewMachine(Options{CheckInvariants: true})
			if err := fresh.Restore(snap); err != nil {
				t.Fatal(err)
			}
			restored = fresh
		}
	}

	for range entries {
		e := gen.next()
		index := single.next
		if e.data == nil {
			for _, r := range []*replica{single, twin} {
				if rs, _ := r.m.ApplyBatch([]uint64{index}, [][]byte{nil}); rs[0] != nil {
					t.Fatalf("entry %d: a raft-internal entry got a result", index)
				}
				r.next++
			}
		} else {
			res, evs := single.m.Apply(index, e.data)
			other, oevs := twin.m.Apply(index, e.data)
			single.next++
			twin.next++
			if res == nil {
				t.Fatalf("entry %d: a command entry must always get a result", index)
			}
			if !sameResult(res, other) {
				t.Fatalf("entry %d: replicas answered %+v and %+v", index, res, other)
			}
			if !reflect.DeepEqual(evs, oevs) {
				t.Fatalf("entry %d: replicas emitted different events:\n%+v\n%+v", index, evs, oevs)
			}
			checkAgainstModel(t, model, e, index, res)
			if e.cmd != nil {
				if tally[e.cmd.Type] == nil {
					tally[e.cmd.Type] = map[bool]int{}
				}
				tally[e.cmd.Type][res.OK()]++
			}
		}
		if single.now() != model.nowMs {
			t.Fatalf("entry %d: now %d, model %d", index, single.now(), model.nowMs)
		}
		pending = append(pending, e.data)
		pendingIdx = append(pendingIdx, index)
		if len(pending) >= 1+rng.IntN(64) {
			flush()
		}
	}
	flush()
}

// checkAgainstModel checks every answer's index, and for every command
// with an idempotency key the store's rules: a retry replays the first
// answer, another body under the key is a reuse, a refusal is not stored.
func checkAgainstModel(t *testing.T, model *simModel, e simEntry, index uint64, res *Result) {
	t.Helper()
	if res.Index == 0 {
		t.Fatalf("entry %d: result without an index", index)
	}
	if e.cmd == nil {
		if res.OK() || res.Index != index {
			t.Fatalf("entry %d: garbage answered %+v", index, res)
		}
		return
	}
	c := e.cmd
	model.advance(c.TsMs)
	if c.IdemKey == "" {
		if res.Index != index || res.Replay {
			t.Fatalf("entry %d: answer %+v", index, res)
		}
		return
	}
	rec, ok := model.idem[c.IdemKey]
	switch {
	case ok && bytes.Equal(rec.hash, c.ReqHash):
		if !res.Replay || res.Index != rec.index || !bytes.Equal(res.Body, rec.body) {
			t.Fatalf("entry %d: retry of %q (first at %d) answered %+v", index, c.IdemKey, rec.index, res)
		}
	case ok:
		if res.Status != http.StatusConflict || res.Code != wire.CodeIdempotencyReused {
			t.Fatalf("entry %d: reuse of %q answered %+v", index, c.IdemKey, res)
		}
	case res.OK():
		if res.Replay || res.Index != index {
			t.Fatalf("entry %d: new key %q answered %+v", index, c.IdemKey, res)
		}
		model.idem[c.IdemKey] = simRecord{hash: c.ReqHash, expiresMs: model.nowMs + IdemRetentionMs, index: index, body: res.Body}
	default:
		if res.Replay || res.Index != index {
			t.Fatalf("entry %d: refusal of %q answered %+v", index, c.IdemKey, res)
		}
	}
}

// checkCoverage makes sure the stream exercised the money paths: each of
// these commands was accepted, and most also refused, at least once.
func checkCoverage(t *testing.T, tally map[CmdType]map[bool]int) {
	t.Helper()
	for _, typ := range []CmdType{CmdSignup, CmdMintKey, CmdRevokeKeys, CmdFaucet, CmdInvoiceCreated,
		CmdDepositSettled, CmdWithdrawalRequested, CmdWithdrawalResult, CmdOraclePrint, CmdNodeMeta, CmdNodeGone, CmdTick} {
		if tally[typ][true] == 0 {
			t.Errorf("command type %d was never accepted (%d refusals)", typ, tally[typ][false])
		}
	}
	t.Logf("accepted/refused by type: %v", tally)
}

func sameResult(a, b *Result) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Code == b.Code && a.Replay == b.Replay && a.Index == b.Index && bytes.Equal(a.Body, b.Body)
}

// simGen draws the command stream: the commands nodes really propose
// (signup, key mint and revoke, faucet, invoices, deposits, withdrawals and
// the rail's answers, oracle prints, ticks, membership), retries of earlier
// client commands under the same idempotency key, reuses of a key with
// another body, and invalid entries. It keeps a small world of accounts,
// invoices and withdrawals so most commands are meaningful; which of them
// the machine accepts is for the machine to say. The leader's clock mostly
// moves forward a little, sometimes jumps hours (past the idempotency
// retention, which the per-entry clock bound turns into a catch-up), and
// sometimes runs backwards (a new leader whose clock lags).
type simGen struct {
	rng      *rand.Rand
	clock    int64
	foreign  bool
	n        int
	accounts []simAccount
	invoices []funds.Settlement // payable invoices, as the rail would settle them
	railRefs []string           // withdrawals requested
	sent     []*Command         // client commands, for retries
	priceQ8  int64
	printTs  int64
	// logNow follows the machine's clock (the stamps of commands, bounded
	// per entry), so prints and expiries can be drawn near log time.
	logNow int64
}

type simAccount struct{ id, key string }

func (g *simGen) stamp() int64 {
	switch r := g.rng.IntN(100); {
	case r < 70:
		g.clock += g.rng.Int64N(1500)
	case r < 85:
		g.clock -= g.rng.Int64N(5000)
	case r < 95:
		g.clock += g.rng.Int64N(2 * 60 * 60 * 1000)
	default:
		g.clock += g.rng.Int64N(30 * 60 * 60 * 1000)
	}
	switch {
	case g.logNow == 0:
		g.logNow = g.clock
	case g.clock > g.logNow:
		g.logNow = min(g.clock, g.logNow+MaxClockStepMs)
	}
	return g.clock
}

func (g *simGen) account() (simAccount, bool) {
	if len(g.accounts) == 0 {
		return simAccount{}, false
	}
	return g.accounts[g.rng.IntN(len(g.accounts))], true
}

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// client builds a command a client's request became: acting account and
// key, a scoped idempotency key and the request's hash.
func (g *simGen) client(t CmdType, a simAccount, idem string, payload any) *Command {
	c := mustSimCommand(t, 0, payload)
	c.Account, c.KeyID = a.id, a.key
	c.IdemKey = "acct:" + a.id + ":" + idem
	c.ReqHash = RequestHash([]byte(fmt.Sprint(t)), c.Payload)
	return c
}

func (g *simGen) next() simEntry {
	rng := g.rng
	g.n++
	var c *Command
	switch r := rng.IntN(100); {
	case g.n == 1:
		c = mustSimCommand(CmdGenesis, 0, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 7, Deployment: "testnet", FaucetGrantsPerHour: 3})
	case g.n == 2:
		c = mustSimCommand(CmdMarketsGenesis, 0, MarketsGenesisPayload{Markets: market.DefaultCatalogue()})
	case r < 12:
		c = &Command{Type: CmdTick}
	case r < 20:
		id := fmt.Sprintf("acc%d", g.n)
		a := simAccount{id: id, key: "key-" + id}
		g.accounts = append(g.accounts, a)
		c = mustSimCommand(CmdSignup, 0, access.NewAccount{AccountID: id, UserID: "u" + id, RailAddress: "sparkt1" + id, KeyID: a.key, KeyHashHex: keyHash(a.key)})
		c.IdemKey, c.ReqHash = "signup:"+id, RequestHash([]byte(id))
		g.sent = append(g.sent, c)
	case r < 24:
		a, ok := g.account()
		if !ok {
			c = &Command{Type: CmdTick}
			break
		}
		k := fmt.Sprintf("sess%d", g.n)
		c = g.client(CmdMintKey, a, k, access.NewKey{KeyID: k, KeyHashHex: keyHash(k), Label: "s"})
		g.sent = append(g.sent, c)
	case r < 26:
		a, ok := g.account()
		if !ok {
			c = &Command{Type: CmdTick}
			break
		}
		c = g.client(CmdRevokeKeys, a, fmt.Sprintf("rv%d", g.n), RevokePayload{AllButCurrent: true})
		g.sent = append(g.sent, c)
	case r < 34:
		a, ok := g.account()
		if !ok {
			c = &Command{Type: CmdTick}
			break
		}
		c = g.client(CmdFaucet, a, fmt.Sprintf("f%d", g.n), nil)
		g.sent = append(g.sent, c)
	case r < 40:
		a, ok := g.account()
		if !ok {
			c = &Command{Type: CmdTick}
			break
		}
		var ref [32]byte
		binary.BigEndian.PutUint64(ref[:], rng.Uint64())
		binary.BigEndian.PutUint64(ref[8:], uint64(g.n))
		amount := 1000 * (1 + rng.Int64N(50_000))
		inv := funds.NewInvoice{PaymentRequest: fmt.Sprintf("lntb%d", g.n), PaymentRef: hex.EncodeToString(ref[:]),
			AmountMsat: amount, ExpiresAtMs: g.logNow + rng.Int64N(2*60*60*1000)}
		c = g.client(CmdInvoiceCreated, a, fmt.Sprintf("inv%d", g.n), inv)
		g.invoices = append(g.invoices, funds.Settlement{AccountID: a.id, AmountMsat: amount, RailRef: inv.PaymentRef, Path: funds.PathLightning})
		g.sent = append(g.sent, c)
	case r < 48:
		var st funds.Settlement
		if len(g.invoices) > 0 && rng.IntN(3) > 0 {
			st = g.invoices[rng.IntN(len(g.invoices))] // paid once; later ones are duplicates
		} else if a, ok := g.account(); ok {
			st = funds.Settlement{AccountID: a.id, AmountMsat: 1000 * (1 + rng.Int64N(100_000)), RailRef: fmt.Sprintf("spark-in-%d", g.n), Path: funds.PathSpark}
		} else {
			c = &Command{Type: CmdTick}
			break
		}
		c = mustSimCommand(CmdDepositSettled, 0, st)
	case r < 58:
		a, ok := g.account()
		if !ok {
			c = &Command{Type: CmdTick}
			break
		}
		ref := fmt.Sprintf("wd%d", g.n)
		w := funds.WithdrawalRequest{IdempotencyKey: "k-" + ref, AmountMsat: 1000 * (1 + rng.Int64N(20_000)), FeeMsat: rng.Int64N(5000),
			Path: funds.PathSpark, Destination: "sparkt1dest" + a.id, RailRef: ref}
		if rng.IntN(5) == 0 {
			w.Path, w.Destination, w.DestExpiresAtMs = funds.PathLightning, "lntbdest"+ref, g.logNow+rng.Int64N(60*60*1000)
		}
		c = g.client(CmdWithdrawalRequested, a, w.IdempotencyKey, w)
		g.railRefs = append(g.railRefs, ref)
		g.sent = append(g.sent, c)
	case r < 66:
		if len(g.railRefs) == 0 {
			c = &Command{Type: CmdTick}
			break
		}
		status := []string{funds.PayoutPaid, funds.PayoutPaid, funds.PayoutReturned, funds.PayoutPending}[rng.IntN(4)]
		c = mustSimCommand(CmdWithdrawalResult, 0, funds.PayoutResult{RailRef: g.railRefs[rng.IntN(len(g.railRefs))], Status: status, Reason: "sim"})
	case r < 74:
		g.priceQ8 = max(1, g.priceQ8+rng.Int64N(2_000*market.Q8)-1_000*market.Q8)
		g.printTs = max(g.printTs+1, g.logNow-rng.Int64N(3000))
		p := OraclePrintPayload{FeedID: "BTCUSD", MidQ8: g.priceQ8, ConfQ9: 300_000, TsMs: g.printTs}
		if rng.IntN(8) == 0 {
			p.TsMs -= 1 + rng.Int64N(10_000) // not newer than the last: refused
		}
		c = mustSimCommand(CmdOraclePrint, 0, p)
	case r < 82:
		if len(g.sent) == 0 {
			c = &Command{Type: CmdTick}
			break
		}
		// A retry of an earlier client command: same key; now and then
		// another body under that key (a reuse).
		prev := *g.sent[rng.IntN(len(g.sent))]
		if rng.IntN(4) == 0 {
			prev.ReqHash = append([]byte{0xee}, prev.ReqHash...)
		}
		c = &prev
	case r < 85:
		m := NodeMeta{ID: fmt.Sprintf("node%d", rng.IntN(5)), Raft: fmt.Sprintf("127.0.0.1:%d", 7000+rng.IntN(3)), HTTP: "h", Admin: fmt.Sprintf("a%d", rng.IntN(2))}
		if rng.IntN(6) == 0 {
			m.Raft = ""
		}
		c = mustSimCommand(CmdNodeMeta, 0, m)
	case r < 87:
		c = mustSimCommand(CmdNodeGone, 0, NodeGonePayload{ID: fmt.Sprintf("node%d", rng.IntN(5))})
	case r < 89:
		c = mustSimCommand(CmdGenesis, 0, GenesisPayload{FeatureLevel: FeatureLevel, Seed: rng.Uint64(), Deployment: "testnet"})
	case r < 91:
		c = &Command{Type: CmdType(1000 + rng.IntN(100))}
	case r < 94:
		return simEntry{data: nil}
	case r < 96:
		b := make([]byte, 1+rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[0] = 0xff // a CBOR "break" cannot start an item: never a command
		return simEntry{data: b}
	default:
		if !g.foreign {
			c = &Command{Type: CmdNoop, IdemKey: fmt.Sprintf("acct%d:k%d", rng.IntN(3), rng.IntN(12)), ReqHash: []byte{byte(rng.IntN(2))}}
			break
		}
		payload := make([]byte, rng.IntN(40))
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		c = &Command{Type: CmdType(rng.IntN(80)), Account: fmt.Sprintf("acc%d", rng.IntN(g.n+1)), Payload: payload}
		if rng.IntN(2) == 0 {
			c.Payload = nil
		}
	}
	// Stamped last, so payloads are drawn near the log time before it.
	c.TsMs = g.stamp()
	b, err := c.Encode()
	if err != nil {
		panic(err)
	}
	return simEntry{data: b, cmd: c}
}

func mustSimCommand(t CmdType, ts int64, payload any) *Command {
	c, err := NewCommand(t, payload)
	if err != nil {
		panic(err)
	}
	c.TsMs = ts
	return c
}
