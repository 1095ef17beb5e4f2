package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/usdx"
)

// TestEveryRefusalChangesNothing is the property behind "bad input gets a
// clear error and changes nothing": random but plausible commands of every
// registered type (and groups of them), half of them mutated into bad ones
// (another account, another account's key, a revoked key, a key without
// the scope, a payload field set to zero, negative, huge, empty, too long
// or another object's id, a payload of another type, an undecodable one,
// an idempotency key reused with another body, a replay, a stamp from the
// past), applied at feature levels 8, 7 and 1 (the domains' commands are
// refused below LevelDomains; now and then a command raises the level, so
// the lower runs cross into the next). Timers fire when log time moves (DESIGN.md),
// so each command follows a tick at its own stamp, and the state is
// digested between the two. After every refused (or replayed) command the
// state must be the same, field by field, and the entry must have emitted
// nothing; no command may panic (a panic in apply halts every replica). A
// shadow replica is fed the same entries with every refused command
// replaced by a no-op: it must answer every accepted command alike and
// hash alike, so a refusal cannot hide a change in derived state either.
func TestEveryRefusalChangesNothing(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	steps := map[uint32]int{FeatureLevel: 2500, 7: 800, 1: 400}
	if testing.Short() {
		steps = map[uint32]int{FeatureLevel: 1200, 7: 300, 1: 150}
	}
	for _, level := range []uint32{FeatureLevel, 7, 1} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			// PERPD_ATOMIC_SEED=n runs another stream, for a longer hunt.
			seed := uint64(level)*31 + 6
			n := steps[level]
			v := os.Getenv("PERPD_ATOMIC_SEED")
			if v != "" {
				if _, err := fmt.Sscan(v, &seed); err != nil {
					t.Fatal(err)
				}
			}
			w := newAtomWorld(t, level, seed)
			for range n {
				w.step()
			}
			// The lower levels' runs, every run with -short and other
			// streams may not reach every outcome: their coverage is logged.
			w.report(level == FeatureLevel && !testing.Short() && v == "")
		})
	}
}

type atomAcct struct {
	id, key string
	// scoped are delegate keys without every scope: scoped[0] read
	// only, scoped[1] read and trade ("" once revoked).
	scoped  [2]string
	revoked []string
}

type atomOrder struct {
	acct *atomAcct
	id   string
}

// atomProto is a valid-looking command before it is built: the acting
// account (nil for a leader's or an operator's command), the payload and
// the idempotency key's client part ("" for none).
type atomProto struct {
	typ     CmdType
	acct    *atomAcct
	payload any
	idem    string
}

type atomWorld struct {
	t     *testing.T
	rng   *rand.Rand
	r, sh *replica
	level uint32
	ts    int64
	n     int

	accts    []*atomAcct
	orders   []atomOrder
	invoices []funds.Settlement
	railRefs []string
	quotes   []atomOrder
	sagas    []atomOrder
	usdxWds  []string
	codes    []string
	nodes    []string
	sent     []*Command
	mids     map[string]int64
	printTs  map[string]int64
	types    []CmdType

	tally   map[CmdType]*[3]int // accepted, refused, replayed
	refusal map[string]int
	mutated map[string]int
}

var atomFeeds = []string{"BTCUSD", "ETHUSD"}

func newAtomWorld(t *testing.T, level uint32, seed uint64) *atomWorld {
	w := &atomWorld{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b9)), r: newReplica(t), sh: newReplica(t),
		level: level, ts: mktLaunchMs, mids: map[string]int64{"BTCUSD": usdQ8(100_000), "ETHUSD": usdQ8(3_400)},
		printTs: map[string]int64{}, tally: map[CmdType]*[3]int{}, refusal: map[string]int{}, mutated: map[string]int{}}
	for typ := range handlers {
		if typ < TestCmdBase {
			w.types = append(w.types, typ)
		}
	}
	w.types = append(w.types, CmdGroup)
	slices.Sort(w.types)
	// No anchors: the seeded history would make every digest ten times
	// the work, and is not what these commands touch.
	mg := defaultMarketsGenesis()
	mg.Anchors = nil
	w.setup(mustCommand(t, CmdGenesis, w.ts, GenesisPayload{FeatureLevel: level, Seed: 42, Deployment: "testnet"}))
	w.setup(mustCommand(t, CmdMarketsGenesis, w.ts, mg))
	w.nodes = []string{"node1"}
	w.setup(mustCommand(t, CmdNodeMeta, w.ts, NodeMeta{ID: "node1", Raft: "127.0.0.1:7000", HTTP: "h1", Admin: "a1"}))
	w.prints()
	for range 5 {
		a := w.signup()
		w.setup(mustCommand(t, CmdDepositSettled, w.ts, funds.Settlement{AccountID: a.id, AmountMsat: btcBTC,
			RailRef: "spark-in-" + a.id, Path: funds.PathSpark}))
	}
	return w
}

// setup applies a command to both replicas and requires it accepted.
func (w *atomWorld) setup(c *Command) *Result {
	w.t.Helper()
	c.TsMs = w.ts
	res := w.r.apply(c)
	wantOK(w.t, res)
	wantOK(w.t, w.sh.apply(c))
	return res
}

// both applies a background command (a print, a tick) to both replicas,
// which must answer alike; refusals are allowed.
func (w *atomWorld) both(c *Command) *Result {
	w.t.Helper()
	c.TsMs = w.ts
	res := w.applyGuarded(w.r, c, "background")
	if other := w.sh.apply(c); !sameAnswer(res, other) {
		w.t.Fatalf("background %d: replicas answered %d %s and %d %s", c.Type, res.Status, res.Body, other.Status, other.Body)
	}
	return res
}

func sameAnswer(a, b *Result) bool {
	return a.Status == b.Status && a.Code == b.Code && bytes.Equal(a.Body, b.Body) && len(a.Group) == len(b.Group)
}

func (w *atomWorld) signup() *atomAcct {
	w.n++
	a := &atomAcct{id: fmt.Sprintf("acc_%d", w.n), key: fmt.Sprintf("key_%d", w.n)}
	w.setup(mustCommand(w.t, CmdSignup, w.ts, access.NewAccount{AccountID: a.id, KeyID: a.key, KeyHashHex: keyHash(a.key)}))
	for i, s := range []access.Scope{access.ScopeRead, access.ScopeRead | access.ScopeTrade} {
		k := fmt.Sprintf("%s_s%d", a.key, i)
		c := mustCommand(w.t, CmdMintKey, w.ts, access.NewKey{KeyID: k, KeyHashHex: keyHash(k), Label: "s", Scopes: &s})
		c.Account, c.KeyID = a.id, a.key
		w.setup(c)
		a.scoped[i] = k
	}
	w.accts = append(w.accts, a)
	return a
}

// prints moves both feeds a little, the oracle driver's way.
func (w *atomWorld) prints() {
	for _, f := range atomFeeds {
		m := w.mids[f]
		m += (w.rng.Int64N(2001) - 1000) * m / 200_000
		if w.rng.IntN(25) == 0 {
			// A jump of up to 4%: positions reach maintenance, and
			// liquidations and their refusals' neighbours run.
			m += (w.rng.Int64N(2001) - 1000) * m / 25_000
		}
		w.mids[f] = m
		w.printTs[f] = max(w.printTs[f]+1, w.ts)
		w.both(mustCommand(w.t, CmdOraclePrint, w.ts, OraclePrintPayload{FeedID: f, MidQ8: m, ConfQ9: 300_000, TsMs: w.printTs[f]}))
	}
}

func (w *atomWorld) acct() *atomAcct { return w.accts[w.rng.IntN(len(w.accts))] }

func (w *atomWorld) id(prefix string) string {
	w.n++
	return fmt.Sprintf("%s%d", prefix, w.n)
}

func (w *atomWorld) pick(xs []string) string {
	if len(xs) == 0 {
		return w.id("none")
	}
	return xs[w.rng.IntN(len(xs))]
}

func (w *atomWorld) read(fn func(st *State)) { w.r.m.Read(func(st *State, _ uint64) { fn(st) }) }

// heal undoes what accepted operator commands did to the world (a
// halted or reduce-only market, a mint halt, a failed attestation, odd
// USDx parameters), so that the commands after them can be accepted too.
func (w *atomWorld) heal() {
	for _, m := range market.DefaultCatalogue() {
		live := market.StatusLive
		w.both(mustCommand(w.t, CmdMarketSet, w.ts, MarketSetPayload{MarketID: m.MarketID, Status: &live,
			OracleFeedID: &m.OracleFeedID, TickSizeQ8: &m.TickSizeQ8, PriceDp: &m.PriceDp,
			MinOrderContracts: &m.MinOrderContracts, MaxOrderContracts: &m.MaxOrderContracts, TakerFeeQ9: &m.TakerFeeQ9,
			IMRateQ9: &m.IMRateQ9, MMRateQ9: &m.MMRateQ9, BaseSpreadQ9: &m.BaseSpreadQ9, MaxLeverage: &m.MaxLeverage,
			OracleStalenessMs: &m.OracleStalenessMs, MaxFundingRateHourlyQ9: &m.MaxFundingRateHourlyQ9}))
	}
	for _, f := range atomFeeds {
		w.both(mustCommand(w.t, CmdOracleUnpin, w.ts, OracleUnpinPayload{FeedID: f}))
	}
	var u *usdx.State
	w.read(func(st *State) { u = st.USDx })
	if u == nil {
		return
	}
	d := usdx.DefaultParams()
	w.both(mustCommand(w.t, CmdUSDxParams, w.ts, USDxParamsPayload{BaseFeeQ9: &d.BaseFeeQ9, ReserveTargetQ9: &d.ReserveTargetQ9,
		ReserveFloorQ9: &d.ReserveFloorQ9, DynFeeCurve: d.DynFeeCurve, HardCap: &d.HardCap, QuoteTTLMs: &d.QuoteTTLMs,
		MintVelocityQ9PerH: &d.MintVelocityQ9PerH, MintVelocityFloor: &d.MintVelocityFloor, RequoteToleranceQ9: &d.RequoteToleranceQ9,
		UnstakeCooldownMs: &d.UnstakeCooldownMs, MaxSkewQ9: &d.MaxSkewQ9, SkewFloor: &d.SkewFloor, OrganicMultipleQ9: &d.OrganicMultipleQ9,
		OrganicFloor: &d.OrganicFloor, Features: &d.Features}))
	var supply, outside int64
	w.read(func(st *State) { supply, outside = st.USDx.Supply, st.USDx.Outside })
	w.both(mustCommand(w.t, CmdUSDxAttest, w.ts, USDxAttestPayload{AsOfTsMs: w.ts, IssuerSupply: supply, IssuerIssued: supply, IssuerCustody: supply - outside}))
	w.both(mustCommand(w.t, CmdUSDxHalt, w.ts, USDxHaltPayload{}))
}

// step moves time (firing timers in a tick of its own), then applies one
// command, valid or mutated, and checks it.
func (w *atomWorld) step() {
	switch r := w.rng.IntN(100); {
	case r < 30:
	case r < 80:
		w.ts += w.rng.Int64N(2000)
	case r < 95:
		w.ts += w.rng.Int64N(MaxClockStepMs)
	default:
		w.ts += MaxClockStepMs
	}
	w.both(tickAt(w.ts))
	if w.rng.IntN(3) == 0 {
		w.prints()
	}
	if w.rng.IntN(60) == 0 {
		w.heal()
	}
	typ := w.types[w.rng.IntN(len(w.types))]
	var c *Command
	how := "valid"
	if typ == CmdGroup {
		c, how = w.group()
	} else {
		c, how = w.command(typ)
	}
	w.check(c, how)
}

// command draws one command of typ, mutated half of the time.
func (w *atomWorld) command(typ CmdType) (*Command, string) {
	p := w.valid(typ)
	if w.rng.IntN(2) == 0 {
		return w.build(p), "valid"
	}
	return w.mutate(p)
}

func (w *atomWorld) group() (*Command, string) {
	n := 1 + w.rng.IntN(3)
	var subs [][]byte
	var hows []string
	for range n {
		typ := w.types[w.rng.IntN(len(w.types))]
		if typ == CmdGroup || typ == CmdSetFeatureLevel {
			typ = CmdPlaceOrder
		}
		c, how := w.command(typ)
		c.TsMs = w.ts
		b, err := c.Encode()
		if err != nil {
			w.t.Fatal(err)
		}
		subs = append(subs, b)
		hows = append(hows, fmt.Sprintf("%d:%s", typ, how))
	}
	b, err := EncodeGroup(subs)
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := DecodeCommand(b)
	if err != nil {
		w.t.Fatal(err)
	}
	return c, "group[" + strings.Join(hows, " ") + "]"
}

// build turns a proto into the command a node would propose.
func (w *atomWorld) build(p atomProto) *Command {
	c := mustCommand(w.t, p.typ, w.ts, p.payload)
	if p.acct != nil {
		c.Account, c.KeyID = p.acct.id, p.acct.key
	}
	if p.idem != "" {
		scope := "op"
		if p.acct != nil {
			scope = "acct:" + p.acct.id
		}
		c.IdemKey = scope + ":" + p.idem
		c.ReqHash = RequestHash([]byte(fmt.Sprint(p.typ)), c.Payload)
	}
	return c
}

// mutate makes a bad command out of a valid one.
func (w *atomWorld) mutate(p atomProto) (*Command, string) {
	other := w.acct()
	switch k := w.rng.IntN(100); {
	case k < 40 && p.payload != nil:
		cp, path := w.mutatePayload(p.payload)
		if w.rng.IntN(4) == 0 {
			var more string
			cp, more = w.mutatePayload(cp)
			path += "+" + more
		}
		p.payload = cp
		return w.build(p), "field " + path
	case k < 48 && p.acct != nil:
		c := w.build(p)
		c.Account = []string{other.id, "", "acc_ghost"}[w.rng.IntN(3)]
		return c, "account"
	case k < 62 && p.acct != nil:
		c := w.build(p)
		switch w.rng.IntN(5) {
		case 0:
			c.KeyID = other.key
		case 1:
			c.KeyID = p.acct.scoped[0] // read only
		case 2:
			c.KeyID = p.acct.scoped[1] // trade, no withdraw or admin-sessions
		case 3:
			if len(p.acct.revoked) > 0 {
				c.KeyID = p.acct.revoked[0]
				break
			}
			c.KeyID = "key_ghost"
		default:
			c.KeyID = ""
		}
		return c, "key"
	case k < 70 && len(w.sent) > 0:
		// Another body under a key already used.
		prev := w.sent[w.rng.IntN(len(w.sent))]
		c := w.build(p)
		c.IdemKey, c.ReqHash = prev.IdemKey, append([]byte{0xee}, prev.ReqHash...)
		return c, "idem reused"
	case k < 78 && len(w.sent) > 0:
		c := *w.sent[w.rng.IntN(len(w.sent))]
		return &c, "replay"
	case k < 84:
		c := w.build(p)
		c.TsMs -= 1 + w.rng.Int64N(10*60_000)
		return c, "time backwards"
	case k < 92:
		c := w.build(p)
		switch w.rng.IntN(3) {
		case 0:
			c.Payload = nil
		case 1:
			if len(c.Payload) > 1 {
				c.Payload = c.Payload[:1+w.rng.IntN(len(c.Payload)-1)]
				break
			}
			c.Payload = []byte{0xff}
		default:
			b := make([]byte, 1+w.rng.IntN(24))
			for i := range b {
				b[i] = byte(w.rng.Uint32())
			}
			c.Payload = b
		}
		return c, "payload bytes"
	default:
		// The payload of another command type.
		qt := w.types[w.rng.IntN(len(w.types))]
		if qt == CmdGroup {
			qt = CmdPlaceOrder
		}
		q := w.valid(qt)
		c := w.build(p)
		if q.payload != nil {
			b, err := Marshal(q.payload)
			if err != nil {
				w.t.Fatal(err)
			}
			c.Payload = b
		}
		return c, fmt.Sprintf("payload of type %d", q.typ)
	}
}

// check applies c and, when it is refused or replayed, requires the
// state unchanged and no event; the shadow applies what was accepted.
func (w *atomWorld) check(c *Command, how string) {
	w.t.Helper()
	c.TsMs = min(c.TsMs, w.ts)
	before := w.digest()
	res, evs := w.applyEvents(c, how)
	t := w.tally[c.Type]
	if t == nil {
		t = &[3]int{}
		w.tally[c.Type] = t
	}
	changed := func() string {
		after := w.digest()
		var diff []string
		for k, v := range before {
			if after[k] != v {
				diff = append(diff, k)
			}
		}
		sort.Strings(diff)
		return strings.Join(diff, ",")
	}
	desc := func() string { return w.describe(c, how) }
	kind, _, _ := strings.Cut(how, " ")
	kind, _, _ = strings.Cut(kind, "[")
	w.mutated[kind]++

	if c.Type == CmdGroup && res.Group != nil {
		// The shadow applies the group with each refused command a no-op.
		var subs [][]byte
		var g GroupPayload
		if err := Unmarshal(c.Payload, &g); err != nil {
			w.t.Fatal(err)
		}
		anyOK := false
		for i, sr := range res.Group {
			if sr.Code != "" {
				w.refusal[fmt.Sprintf("%d:%s", c.Type, sr.Code)]++
				subs = append(subs, mustEncode(w.t, &Command{Type: CmdNoop, TsMs: c.TsMs}))
				continue
			}
			anyOK = anyOK || !sr.Replay
			subs = append(subs, g.Cmds[i])
		}
		if !anyOK {
			if d := changed(); d != "" {
				w.t.Fatalf("%s: every command of the group was refused or replayed, and the state changed (%s)", desc(), d)
			}
			if len(evs) != 0 {
				w.t.Fatalf("%s: a refused group emitted %d events (%s)", desc(), len(evs), evs[0].Kind)
			}
		}
		b, err := EncodeGroup(subs)
		if err != nil {
			w.t.Fatal(err)
		}
		gc, _ := DecodeCommand(b)
		gc.TsMs = c.TsMs
		sres := w.sh.apply(gc)
		for i := range res.Group {
			if res.Group[i].Code == "" && !sameAnswer(res.Group[i], sres.Group[i]) {
				w.t.Fatalf("%s: command %d answered %s, and %s without the refused ones", desc(), i, res.Group[i].Body, sres.Group[i].Body)
			}
		}
		w.compareShadow(desc)
		t[0]++
		return
	}

	if res.Code != "" || res.Replay {
		if res.Code != "" {
			t[1]++
			w.refusal[fmt.Sprintf("%d:%s", c.Type, res.Code)]++
			if res.Status < 400 {
				w.t.Fatalf("%s: refusal %s with status %d", desc(), res.Code, res.Status)
			}
		} else {
			t[2]++
		}
		if d := changed(); d != "" {
			w.t.Fatalf("%s: answered %d %s and changed the state (%s)", desc(), res.Status, res.Body, d)
		}
		if len(evs) != 0 {
			w.t.Fatalf("%s: answered %d %s and emitted %d events (%s)", desc(), res.Status, res.Body, len(evs), evs[0].Kind)
		}
		w.sh.apply(&Command{Type: CmdNoop, TsMs: c.TsMs})
	} else {
		t[0]++
		if c.IdemKey != "" {
			w.sent = append(w.sent, c)
		}
		if other := w.sh.apply(c); !sameAnswer(res, other) {
			w.t.Fatalf("%s: answered %d %s, and %d %s on a replica without the refused commands", desc(), res.Status, res.Body, other.Status, other.Body)
		}
		w.learn(c, res)
	}
	if w.r.next%40 == 0 {
		w.compareShadow(desc)
	}
}

func (w *atomWorld) compareShadow(desc func() string) {
	w.t.Helper()
	if w.r.hash() != w.sh.hash() {
		w.t.Fatalf("after %s: the replica and its shadow (refused commands replaced by no-ops) hash differently", desc())
	}
}

// applyEvents applies c to the replica, reporting a panic with the
// command that caused it.
func (w *atomWorld) applyEvents(c *Command, how string) (res *Result, evs []Event) {
	w.t.Helper()
	b := mustEncode(w.t, c)
	defer func() {
		if p := recover(); p != nil {
			w.t.Fatalf("%s: panic in apply: %v\n%s", w.describe(c, how), p, debug.Stack())
		}
	}()
	res, evs = w.r.m.Apply(w.r.next, b)
	w.r.next++
	return res, evs
}

func (w *atomWorld) applyGuarded(r *replica, c *Command, how string) *Result {
	w.t.Helper()
	defer func() {
		if p := recover(); p != nil {
			w.t.Fatalf("%s: panic in apply: %v\n%s", w.describe(c, how), p, debug.Stack())
		}
	}()
	return r.apply(c)
}

func (w *atomWorld) describe(c *Command, how string) string {
	var payload any
	_ = Unmarshal(c.Payload, &payload)
	return fmt.Sprintf("level %d, index %d, type %d (%s) account %q key %q idem %q ts %d (log %d), payload %v",
		w.level, w.r.next-1, c.Type, how, c.Account, c.KeyID, c.IdemKey, c.TsMs, w.ts, payload)
}

// digest is the state's canonical encoding, field by field, hashed.
func (w *atomWorld) digest() map[string]string {
	out := map[string]string{}
	w.read(func(st *State) {
		v := reflect.ValueOf(st).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			b, err := Marshal(v.Field(i).Interface())
			if err != nil {
				w.t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			out[f.Name] = hex.EncodeToString(sum[:8])
		}
	})
	return out
}

// learn records what an accepted command created, so that later commands
// can name it.
func (w *atomWorld) learn(c *Command, res *Result) {
	var a *atomAcct
	for _, x := range w.accts {
		if x.id == c.Account {
			a = x
		}
	}
	switch c.Type {
	case CmdSignup:
		var p access.NewAccount
		if Unmarshal(c.Payload, &p) == nil && len(w.accts) < 12 {
			// Keys are needed to act: mint its two scoped sessions.
			na := &atomAcct{id: p.AccountID, key: p.KeyID}
			w.accts = append(w.accts, na)
			for i, s := range []access.Scope{access.ScopeRead, access.ScopeRead | access.ScopeTrade} {
				k := w.id("sess")
				mc := mustCommand(w.t, CmdMintKey, w.ts, access.NewKey{KeyID: k, KeyHashHex: keyHash(k), Label: "s", Scopes: &s})
				mc.Account, mc.KeyID = na.id, na.key
				if w.both(mc).OK() {
					na.scoped[i] = k
				}
			}
		}
	case CmdRevokeKeys:
		var rr RevokeResult
		if res.Decode(&rr) == nil && a != nil {
			for _, id := range rr.Revoked {
				a.revoked = append(a.revoked, id)
				for i := range a.scoped {
					if a.scoped[i] == id {
						a.scoped[i] = ""
					}
				}
			}
		}
	case CmdPlaceOrder:
		var p trade.PlaceRequest
		if Unmarshal(c.Payload, &p) == nil && a != nil && len(w.orders) < 400 {
			w.orders = append(w.orders, atomOrder{a, p.OrderID})
		}
	case CmdInvoiceCreated:
		var p funds.NewInvoice
		if Unmarshal(c.Payload, &p) == nil {
			w.invoices = append(w.invoices, funds.Settlement{AccountID: c.Account, AmountMsat: p.AmountMsat, RailRef: p.PaymentRef, Path: funds.PathLightning})
		}
	case CmdWithdrawalRequested:
		var p funds.WithdrawalRequest
		if Unmarshal(c.Payload, &p) == nil {
			w.railRefs = append(w.railRefs, p.RailRef)
		}
	case CmdUSDxQuote:
		var v usdx.QuoteView
		if res.Decode(&v) == nil && a != nil {
			w.quotes = append(w.quotes, atomOrder{a, v.QuoteID})
		}
	case CmdUSDxMint:
		var v struct {
			Quote usdx.QuoteView `json:"quote"`
		}
		if res.Status == 409 && res.Decode(&v) == nil && a != nil {
			w.quotes = append(w.quotes, atomOrder{a, v.Quote.QuoteID})
		}
	case CmdUSDxRedeem:
		var p USDxAmountPayload
		if Unmarshal(c.Payload, &p) == nil && a != nil {
			w.sagas = append(w.sagas, atomOrder{a, p.ID})
		}
	case CmdUSDxWithdraw:
		var p USDxWithdrawPayload
		if Unmarshal(c.Payload, &p) == nil {
			w.usdxWds = append(w.usdxWds, p.ID)
		}
	case CmdReferralCode, CmdPromoterCode:
		var p ReferralCodePayload
		if Unmarshal(c.Payload, &p) == nil && p.Code != "" {
			w.codes = append(w.codes, p.Code)
		}
	case CmdNodeMeta:
		var p NodeMeta
		if Unmarshal(c.Payload, &p) == nil && !slices.Contains(w.nodes, p.ID) {
			w.nodes = append(w.nodes, p.ID)
		}
	case CmdNodeGone:
		var p NodeGonePayload
		if Unmarshal(c.Payload, &p) == nil {
			w.nodes = slices.DeleteFunc(w.nodes, func(s string) bool { return s == p.ID })
		}
	case CmdSetFeatureLevel:
		var v FeatureLevelResult
		if res.Decode(&v) == nil {
			w.level = v.FeatureLevel
		}
	}
}

// someID is an id of some object of the world (or of none).
func (w *atomWorld) someID() string {
	pool := []string{"BTC-PERP", "ETH-PERP", "BTCUSD", "ETHUSD", "node1", usdx.HedgeAccount}
	for _, a := range w.accts {
		pool = append(pool, a.id, a.key)
	}
	for _, o := range w.orders {
		pool = append(pool, o.id)
	}
	for _, q := range w.quotes {
		pool = append(pool, q.id)
	}
	for _, s := range w.sagas {
		pool = append(pool, s.id)
	}
	pool = append(pool, w.codes...)
	pool = append(pool, w.railRefs...)
	pool = append(pool, w.usdxWds...)
	return pool[w.rng.IntN(len(pool))]
}

// mutatePayload returns a copy of payload with one field, found by
// walking it, set to a value a careless or hostile client might send.
func (w *atomWorld) mutatePayload(payload any) (any, string) {
	v := reflect.New(reflect.TypeOf(payload)).Elem()
	v.Set(reflect.ValueOf(payload))
	type leaf struct {
		v    reflect.Value
		path string
	}
	var leaves []leaf
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				if f := v.Type().Field(i); f.IsExported() {
					walk(v.Field(i), path+"."+f.Name)
				}
			}
			return
		case reflect.Pointer:
			leaves = append(leaves, leaf{v, path})
			if !v.IsNil() && v.Elem().Kind() == reflect.Struct {
				// A fresh copy, so that the original stays as it was.
				cp := reflect.New(v.Elem().Type())
				cp.Elem().Set(v.Elem())
				v.Set(cp)
				walk(v.Elem(), path)
			}
			return
		case reflect.Slice:
			leaves = append(leaves, leaf{v, path})
			if v.Len() > 0 {
				cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
				reflect.Copy(cp, v)
				v.Set(cp)
				walk(v.Index(0), path+"[0]")
			}
			return
		}
		leaves = append(leaves, leaf{v, path})
	}
	walk(v, "")
	if len(leaves) == 0 {
		return payload, "none"
	}
	l := leaves[w.rng.IntN(len(leaves))]
	w.badValue(l.v)
	return v.Interface(), l.path
}

func (w *atomWorld) badValue(v reflect.Value) {
	rng := w.rng
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x := v.Int()
		choices := []int64{0, -1, 1, math.MaxInt64, math.MinInt64, 1 << 62, x + 1, x - 1, -x, x * 1000, x / 2, 1 << 31}
		c := choices[rng.IntN(len(choices))]
		if v.OverflowInt(c) {
			c = -1
		}
		v.SetInt(c)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x := v.Uint()
		choices := []uint64{0, 1, math.MaxUint64, x + 1, x - 1, 1 << 40}
		c := choices[rng.IntN(len(choices))]
		if v.OverflowUint(c) {
			c = 0
		}
		v.SetUint(c)
	case reflect.String:
		choices := []string{"", " ", "x", strings.Repeat("z", 300), w.someID(), w.someID(), "\xff\xfe", strings.ToUpper(v.String()), v.String() + " "}
		v.SetString(choices[rng.IntN(len(choices))])
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Pointer:
		if rng.IntN(2) == 0 || v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		n := reflect.New(v.Type().Elem())
		if !v.IsNil() {
			n.Elem().Set(v.Elem())
		}
		w.badValue(n.Elem())
		v.Set(n)
	case reflect.Slice:
		switch rng.IntN(4) {
		case 0:
			v.Set(reflect.Zero(v.Type()))
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		case 2:
			if v.Len() > 0 {
				v.Set(reflect.Append(v, v.Index(v.Len()-1)))
			}
		default:
			n := 40 + rng.IntN(300)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				if v.Len() > 0 {
					s.Index(i).Set(v.Index(i % v.Len()))
				}
			}
			v.Set(s)
		}
	}
}

// valid draws a plausible command of typ from what the world knows: the
// one a well-behaved client, leader or operator would send now (which the
// machine may still refuse: a mint beyond capacity, an order beyond the
// margin).
func (w *atomWorld) valid(typ CmdType) atomProto {
	rng := w.rng
	a := w.acct()
	p := atomProto{typ: typ}
	client := func(payload any) atomProto {
		p.acct, p.payload, p.idem = a, payload, w.id("i")
		return p
	}
	op := func(payload any) atomProto {
		p.payload, p.idem = payload, w.id("op")
		return p
	}
	leader := func(payload any) atomProto {
		p.payload = payload
		return p
	}
	var u *usdx.State
	w.read(func(st *State) {
		if st.USDx != nil {
			cp := *st.USDx
			u = &cp
		}
	})
	holder := func(id string) usdx.Holder {
		if u == nil {
			return usdx.Holder{}
		}
		var h usdx.Holder
		w.read(func(st *State) { h = st.USDx.Holder(id) })
		return h
	}
	mkt := []string{"BTC-PERP", "ETH-PERP"}[rng.IntN(2)]
	feed := map[string]string{"BTC-PERP": "BTCUSD", "ETH-PERP": "ETHUSD"}[mkt]
	tick := map[string]int64{"BTC-PERP": 50_000_000, "ETH-PERP": 5_000_000}[mkt]
	level := func(off int64) int64 {
		mid := w.mids[feed]
		return max((mid+off*mid/1000)/tick*tick, tick)
	}
	switch typ {
	case CmdUSDxRedeem, CmdUSDxStake, CmdUSDxUnstake, CmdUSDxWithdraw:
		// Mostly an account that holds some: USDx is scarce (a mint needs
		// a fresh quote, capacity and no halt).
		if rng.IntN(4) > 0 {
			for _, i := range rng.Perm(len(w.accts)) {
				if h := holder(w.accts[i].id); h.Usdx > 0 || (typ == CmdUSDxUnstake && h.Susdx > 0) {
					a = w.accts[i]
					break
				}
			}
		}
	}
	switch typ {
	case CmdTick:
		return p
	case CmdNoop:
		return client(nil)
	case CmdNodeMeta:
		id := fmt.Sprintf("node%d", 1+rng.IntN(3))
		return leader(NodeMeta{ID: id, Raft: "127.0.0.1:70" + id[4:], HTTP: "h", Admin: "a"})
	case CmdNodeGone:
		return leader(NodeGonePayload{ID: fmt.Sprintf("node%d", 2+rng.IntN(2))})
	case CmdGenesis:
		return leader(GenesisPayload{FeatureLevel: w.level, Seed: 7, Deployment: "testnet"})
	case CmdSetFeatureLevel:
		// Now and then a raise every node implements (the level-1 run
		// then turns the domains on); mostly one that is refused: a level
		// that does not rise, or one a node does not implement.
		nl := uint32(rng.IntN(int(w.level) + 1))
		if w.level < FeatureLevel && rng.IntN(20) == 0 {
			nl = w.level + 1
		}
		var nodes []AdvertisedLevel
		for _, id := range w.nodes {
			nodes = append(nodes, AdvertisedLevel{ID: id, Level: FeatureLevel})
		}
		if len(nodes) > 0 && rng.IntN(4) == 0 {
			nl, nodes[0].Level = w.level+1, w.level
		}
		return op(FeatureLevelPayload{Level: nl, Nodes: nodes})
	case CmdSignup:
		id := w.id("acc_n")
		if len(w.accts) >= 12 || rng.IntN(4) == 0 {
			id = a.id // taken
		}
		k := w.id("key_n")
		return op(access.NewAccount{AccountID: id, UserID: "u" + id, RailAddress: "sparkt1" + id, KeyID: k, KeyHashHex: keyHash(k)})
	case CmdMintKey:
		k := w.id("sess")
		s := access.Scope(1 + rng.IntN(int(access.ScopeAll)))
		return client(access.NewKey{KeyID: k, KeyHashHex: keyHash(k), Label: "m", Scopes: &s})
	case CmdRevokeKeys:
		var all []string
		w.read(func(st *State) {
			for _, k := range st.Access.AccountKeys(a.id) {
				if k.ID != a.key {
					all = append(all, k.ID)
				}
			}
		})
		if len(all) == 0 || rng.IntN(8) == 0 {
			return client(RevokePayload{AllButCurrent: true})
		}
		return client(RevokePayload{KeyID: w.pick(all)})
	case CmdFaucet:
		return client(nil)
	case CmdTouchKeys:
		return leader(TouchPayload{KeyIDs: []string{a.key, a.scoped[0]}, TsMs: []int64{w.ts - 10, w.ts + 1000}})
	case CmdDepositSettled:
		if len(w.invoices) > 0 && rng.IntN(2) == 0 {
			return leader(w.invoices[rng.IntN(len(w.invoices))])
		}
		return leader(funds.Settlement{AccountID: a.id, AmountMsat: 1000 * (1 + rng.Int64N(100_000)), RailRef: w.id("spark-in-"), Path: funds.PathSpark})
	case CmdInvoiceCreated:
		sum := sha256.Sum256([]byte(w.id("inv")))
		return client(funds.NewInvoice{PaymentRequest: w.id("lntb"), PaymentRef: hex.EncodeToString(sum[:]),
			AmountMsat: 1000 * (1 + rng.Int64N(50_000)), ExpiresAtMs: w.ts + 1 + rng.Int64N(2*hourMs)})
	case CmdWithdrawalRequested:
		ref := w.id("wd")
		r := funds.WithdrawalRequest{IdempotencyKey: "k-" + ref, AmountMsat: 1000 * (1 + rng.Int64N(20_000)), FeeMsat: rng.Int64N(5000),
			Path: funds.PathSpark, Destination: "sparkt1dest" + a.id, RailRef: ref}
		if rng.IntN(4) == 0 {
			r.Path, r.Destination, r.DestExpiresAtMs = funds.PathLightning, "lntbdest"+ref, w.ts+rng.Int64N(hourMs)
		}
		p = client(r)
		p.idem = r.IdempotencyKey
		return p
	case CmdWithdrawalResult:
		status := []string{funds.PayoutPaid, funds.PayoutReturned, funds.PayoutPending}[rng.IntN(3)]
		return leader(funds.PayoutResult{RailRef: w.pick(w.railRefs), Status: status, Reason: "r"})
	case CmdMarketsGenesis:
		return leader(MarketsGenesisPayload{Markets: market.DefaultCatalogue()})
	case CmdOraclePrint:
		m := w.mids[feed]
		return leader(OraclePrintPayload{FeedID: feed, MidQ8: m + (rng.Int64N(201)-100)*m/100_000, ConfQ9: 300_000, TsMs: w.printTs[feed] + 1 + rng.Int64N(500)})
	case CmdMarketSet:
		ms := MarketSetPayload{MarketID: mkt}
		switch rng.IntN(6) {
		case 5:
			// Another feed: refused unless halted (from
			// LevelFeedChangeGuard), or a feed of no print yet.
			f := []string{"BTCUSD", "ETHUSD", "SOLUSD"}[rng.IntN(3)]
			ms.OracleFeedID = &f
			if rng.IntN(2) == 0 {
				h := market.StatusHalted
				ms.Status = &h
			}
		case 0:
			s := []market.Status{market.StatusLive, market.StatusLive, market.StatusLive, market.StatusReduceOnly, market.StatusHalted}[rng.IntN(5)]
			ms.Status = &s
		case 1:
			ms.TakerFeeQ9 = i64(rng.Int64N(1_000_000))
		case 2:
			ms.OracleStalenessMs = i64(5_000 + rng.Int64N(60_000))
		case 3:
			ms.MaxOrderContracts = i64(1_000_000 + rng.Int64N(1_000_000))
		default:
			ms.MaxFundingRateHourlyQ9 = i64(1 + rng.Int64N(5_000_000))
		}
		return op(ms)
	case CmdOraclePin:
		return op(OraclePinPayload{FeedID: feed, MidQ8: w.mids[feed]})
	case CmdOracleScript:
		m := w.mids[feed]
		return op(OracleScriptPayload{FeedID: feed, Mode: market.OverrideStep,
			Points: []market.OverridePoint{{OffsetMs: 0, MidQ8: m}, {OffsetMs: 60_000, MidQ8: m + m/100}}})
	case CmdOracleUnpin:
		return op(OracleUnpinPayload{FeedID: feed})
	case CmdPlaceOrder:
		id := w.id("o")
		side := []string{"buy", "sell"}[rng.IntN(2)]
		n := 1 + rng.Int64N(50_000)
		var r trade.PlaceRequest
		switch k := rng.IntN(6); k {
		case 0, 1:
			r = mktOrder(id, mkt, side, n)
			r.ReduceOnly = rng.IntN(4) == 0
		case 2:
			r = limitOrder(id, mkt, side, n, level(rng.Int64N(41)-20))
		case 3:
			r = stopOrder(id, mkt, side, n, level(rng.Int64N(61)-30))
			if rng.IntN(2) == 0 {
				r.Type = trade.TypeTakeProfitMarket
			}
			r.ReduceOnly = rng.IntN(2) == 0
		case 4:
			r = entryOrder(id, mkt, side, n, level(rng.Int64N(61)-30))
		default:
			dir := int64(1)
			if side == "sell" {
				dir = -1
			}
			r = bracket(id, side, n, 0, level(-dir*20), level(dir*20))
			r.MarketID = mkt
		}
		if rng.IntN(2) == 0 {
			r.Leverage = 1 + rng.Int64N(100)
		}
		p = client(r)
		p.idem = id
		return p
	case CmdCancelOrder:
		if len(w.orders) > 0 {
			o := w.orders[rng.IntN(len(w.orders))]
			a = o.acct
			return client(CancelOrderPayload{OrderID: o.id})
		}
		return client(CancelOrderPayload{OrderID: "o-none"})
	case CmdCancelAllAfter:
		timeout := int64(0)
		if rng.IntN(3) > 0 {
			timeout = trade.CancelAfterMinMs + rng.Int64N(60_000)
		}
		return client(CancelAllAfterPayload{TimeoutMs: timeout})
	case CmdUSDxQuote:
		side := []string{usdx.SideMint, usdx.SideRedeem}[rng.IntN(2)]
		return client(USDxQuotePayload{QuoteID: w.id("q"), Side: side, Usdx: 1 + rng.Int64N(5_000)})
	case CmdUSDxMint:
		if u != nil && rng.IntN(2) == 0 {
			// A fresh quote first, as a client does right before minting.
			qc := mustCommand(w.t, CmdUSDxQuote, w.ts, USDxQuotePayload{QuoteID: w.id("q"), Side: usdx.SideMint, Usdx: 1 + rng.Int64N(2_000)})
			qc.Account, qc.KeyID = a.id, a.key
			if res := w.both(qc); res.OK() {
				w.learn(qc, res)
			}
		}
		if len(w.quotes) > 0 {
			q := w.quotes[len(w.quotes)-1-rng.IntN(min(3, len(w.quotes)))]
			a = q.acct
			p = client(USDxMintPayload{QuoteID: q.id, FreshQuoteID: w.id("fq")})
			p.idem = q.id
			return p
		}
		return client(USDxMintPayload{QuoteID: "q-none", FreshQuoteID: w.id("fq")})
	case CmdUSDxRedeem:
		return client(USDxAmountPayload{ID: w.id("r"), Amount: min(1+rng.Int64N(3_000), max(holder(a.id).Usdx, 1))})
	case CmdUSDxStake:
		return client(USDxAmountPayload{Amount: min(1+rng.Int64N(3_000), max(holder(a.id).Usdx, 1))})
	case CmdUSDxUnstake:
		return client(USDxAmountPayload{Amount: min(1+rng.Int64N(3_000), max(holder(a.id).Susdx, 1))})
	case CmdUSDxWithdraw:
		id := w.id("uw")
		p = client(USDxWithdrawPayload{ID: id, Usdx: min(1+rng.Int64N(1_000), max(holder(a.id).Usdx, 1)), SparkAddress: "sprt1" + strings.ReplaceAll(a.id, "_", "")})
		p.idem = id
		return p
	case CmdUSDxWithdrawalPaid:
		return leader(USDxWithdrawalPaidPayload{WithdrawalID: w.pick(w.usdxWds), IssuerRef: w.id("iss")})
	case CmdUSDxFreeze:
		action := []string{usdx.ActionFreeze, usdx.ActionUnfreeze}[rng.IntN(2)]
		return op(USDxFreezePayload{OpID: w.id("fz"), SparkAddress: "sprt1" + strings.ReplaceAll(w.acct().id, "_", ""), Action: action, Reason: "r"})
	case CmdUSDxFreezeApplied:
		seq := uint64(0)
		if u != nil && len(u.Freezes) > 0 {
			seq = u.Freezes[rng.IntN(len(u.Freezes))].Seq
		}
		return leader(USDxFreezeAppliedPayload{Seq: seq, IssuerRef: w.id("fa"), ImpactedMicro: rng.Int64N(1000) - 1})
	case CmdUSDxAttest:
		at := USDxAttestPayload{AsOfTsMs: w.ts}
		if u != nil {
			at.IssuerSupply, at.IssuerIssued, at.IssuerCustody = u.Supply, u.Supply, u.Supply-u.Outside
		}
		return op(at)
	case CmdUSDxHalt:
		return op(USDxHaltPayload{Halt: rng.IntN(8) == 0, Reason: "review"})
	case CmdUSDxParams:
		var pp USDxParamsPayload
		switch rng.IntN(4) {
		case 0:
			pp.BaseFeeQ9 = i64(rng.Int64N(10_000_000))
		case 1:
			pp.QuoteTTLMs = i64(1000 + rng.Int64N(60_000))
		case 2:
			pp.UnstakeCooldownMs = i64(rng.Int64N(2 * hourMs))
		default:
			pp.ReserveFloorQ9, pp.ReserveTargetQ9 = i64(rng.Int64N(10_000_000)), i64(10_000_000+rng.Int64N(50_000_000))
		}
		return op(pp)
	case CmdUSDxDeposited:
		q := int64(1)
		if u != nil {
			q = max(1, min(u.Outside, 1+rng.Int64N(1000)))
		}
		return leader(USDxDepositedPayload{AccountID: a.id, Usdx: q, IssuerRef: w.id("dep")})
	case CmdReferralCode:
		return client(ReferralCodePayload{Code: fmt.Sprintf("C%dX%d", rng.IntN(40), rng.IntN(3))})
	case CmdReferralBind:
		return client(ReferralBindPayload{Code: w.pick(w.codes)})
	case CmdReferralClaim, CmdPromoterClaim:
		return client(struct{}{})
	case CmdLeaderboardSettings:
		out := rng.IntN(3) == 0
		name := fmt.Sprintf("Trader %d", rng.IntN(100))
		return client(growth.SettingsRequest{OptedOut: &out, DisplayName: &name})
	case CmdPromoterApply:
		return client(goodApplication())
	case CmdPromoterReview:
		return op(PromoterReviewPayload{AccountID: a.id, Decision: []string{growth.ReviewApprove, growth.ReviewRefuse, growth.ReviewRevoke, "defer"}[rng.IntN(4)]})
	case CmdPromoterCode:
		return client(growth.NewPromoterCode{Code: fmt.Sprintf("P%dY%d", rng.IntN(40), rng.IntN(3)), Label: "l", KickbackQ9: rng.Int64N(200_000_000)})
	}
	w.t.Fatalf("no generator for command type %d", typ)
	return p
}

// report logs the tallies and requires that the run reached every command
// type, accepted and refused, where the type can be both.
func (w *atomWorld) report(strict bool) {
	w.t.Helper()
	w.compareShadow(func() string { return "the run" })
	var lines []string
	for _, typ := range w.types {
		t := w.tally[typ]
		if t == nil {
			t = &[3]int{}
		}
		lines = append(lines, fmt.Sprintf("%d:%d/%d/%d", typ, t[0], t[1], t[2]))
		if strict && t[0]+t[1]+t[2] == 0 {
			w.t.Errorf("command type %d was never applied", typ)
		}
		// A tick or a no-op is refused only for its idempotency key, and
		// a group answers per command.
		if strict && t[1] == 0 && typ != CmdGroup && typ != CmdTick && typ != CmdNoop {
			w.t.Errorf("command type %d was never refused", typ)
		}
	}
	w.t.Logf("accepted/refused/replayed by type: %s", strings.Join(lines, " "))
	w.t.Logf("refusal codes: %v", w.refusal)
	w.t.Logf("mutations: %v", w.mutated)
	if !strict {
		return
	}
	if w.level >= LevelDomains {
		for _, typ := range []CmdType{CmdPlaceOrder, CmdCancelOrder, CmdSignup, CmdMintKey, CmdFaucet, CmdDepositSettled,
			CmdWithdrawalRequested, CmdUSDxQuote, CmdUSDxRedeem, CmdReferralCode, CmdOraclePrint, CmdMarketSet} {
			if t := w.tally[typ]; t == nil || t[0] == 0 {
				w.t.Errorf("weak run: command type %d was never accepted", typ)
			}
		}
	}
}
