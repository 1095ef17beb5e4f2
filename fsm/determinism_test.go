package fsm

// Determinism: the same log applied live (one entry at a time, with
// CheckInvariants), replayed on a fresh machine in random batches (with
// and without CheckInvariants), and restored from snapshots taken along
// the way then continued, must agree on the state hash, every answer and
// every event's seq/kind/account at every step.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// probeEvent is what we compare of an event.
type probeEvent struct {
	seq     uint64
	kind    string
	account string
	ts      int64
}

func evKey(evs []Event) []probeEvent {
	out := make([]probeEvent, len(evs))
	for i, e := range evs {
		out[i] = probeEvent{e.Seq, e.Kind, e.Account, e.TsMs}
	}
	return out
}

func resKey(r *Result) string {
	if r == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("%d|%s|%d|%v", r.Status, r.Body, r.Index, r.Replay)
	for _, g := range r.Group {
		s += "[" + resKey(g) + "]"
	}
	return s
}

func machineHash(t testing.TB, m *Machine) string {
	t.Helper()
	_, h, err := m.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// genesisLog returns the two entries a market replica starts with.
func genesisLog(t testing.TB) [][]byte {
	var out [][]byte
	for _, c := range []*Command{
		mustCommand(t, CmdGenesis, mktLaunchMs, GenesisPayload{FeatureLevel: FeatureLevel, Seed: 42, Deployment: "testnet"}),
		mustCommand(t, CmdMarketsGenesis, mktLaunchMs, defaultMarketsGenesis()),
	} {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// compareRuns applies log (whole, from index 1) in several ways and
// reports the first divergence.
func compareRuns(t *testing.T, log [][]byte, seed uint64, snapEvery int) {
	t.Helper()
	// Reference: live, one entry at a time, invariants checked.
	live := NewMachine(Options{CheckInvariants: true})
	type step struct {
		res  string
		evs  []probeEvent
		hash string
	}
	ref := make([]step, len(log))
	snaps := map[int][]byte{}
	for i, b := range log {
		r, evs := live.Apply(uint64(i+1), b)
		ref[i] = step{res: resKey(r), evs: evKey(evs)}
		if h := live.Halted(); h != nil {
			t.Fatalf("live halted at %d: %s", i+1, h.Reason)
		}
		if snapEvery > 0 && (i+1)%snapEvery == 0 {
			s, err := live.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			snaps[i+1] = s
			ref[i].hash = machineHash(t, live)
		}
	}
	want := machineHash(t, live)

	// Replays in random batches, with and without invariant checks.
	for _, check := range []bool{false, true} {
		for s := uint64(0); s < 2; s++ {
			rng := rand.New(rand.NewPCG(seed+s, 7))
			m := NewMachine(Options{CheckInvariants: check})
			var got []step
			for i := 0; i < len(log); {
				n := min(1+rng.IntN(400), len(log)-i)
				idx := make([]uint64, n)
				for j := range idx {
					idx[j] = uint64(i + j + 1)
				}
				rs, evs := m.ApplyBatch(idx, log[i:i+n])
				for j := range rs {
					got = append(got, step{res: resKey(rs[j])})
				}
				// events of a batch: compare the concatenation
				var refEvs []probeEvent
				for j := i; j < i+n; j++ {
					refEvs = append(refEvs, ref[j].evs...)
				}
				if g := evKey(evs); fmt.Sprint(g) != fmt.Sprint(refEvs) {
					t.Fatalf("check=%v seed=%d: batch [%d,%d] events differ:\nlive   %v\nreplay %v", check, s, i+1, i+n, firstDiff(refEvs, g), "")
				}
				i += n
			}
			for i := range got {
				if got[i].res != ref[i].res {
					t.Fatalf("check=%v seed=%d: entry %d answered differently:\nlive   %s\nreplay %s", check, s, i+1, ref[i].res, got[i].res)
				}
			}
			if h := machineHash(t, m); h != want {
				t.Fatalf("check=%v seed=%d: replay hash %s, live %s", check, s, h, want)
			}
		}
	}

	// Restores from each snapshot, continued in batches.
	for at, snap := range snaps {
		for _, check := range []bool{false, true} {
			m := NewMachine(Options{CheckInvariants: check})
			if err := m.RestoreAt(snap, uint64(at)); err != nil {
				t.Fatal(err)
			}
			if h := machineHash(t, m); h != ref[at-1].hash {
				t.Fatalf("restore at %d: hash %s, live had %s", at, h, ref[at-1].hash)
			}
			rng := rand.New(rand.NewPCG(uint64(at), 3))
			for i := at; i < len(log); {
				n := min(1+rng.IntN(50), len(log)-i)
				idx := make([]uint64, n)
				for j := range idx {
					idx[j] = uint64(i + j + 1)
				}
				rs, evs := m.ApplyBatch(idx, log[i:i+n])
				var refEvs []probeEvent
				for j := i; j < i+n; j++ {
					refEvs = append(refEvs, ref[j].evs...)
					if k := resKey(rs[j-i]); k != ref[j].res {
						t.Fatalf("restore at %d check=%v: entry %d answered differently:\nlive     %s\nrestored %s", at, check, j+1, ref[j].res, k)
					}
				}
				if g := evKey(evs); fmt.Sprint(g) != fmt.Sprint(refEvs) {
					t.Fatalf("restore at %d check=%v: batch [%d,%d] events differ: %v", at, check, i+1, i+n, firstDiff(refEvs, g))
				}
				i += n
			}
			if h := machineHash(t, m); h != want {
				t.Fatalf("restore at %d check=%v: final hash %s, live %s", at, check, h, want)
			}
		}
	}
}

func firstDiff(a, b []probeEvent) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: live %+v replay %+v (lens %d/%d)", i, a[i], b[i], len(a), len(b))
		}
	}
	return fmt.Sprintf("lengths %d/%d", len(a), len(b))
}

// TestDeterminismSimLogAllWays: the trading simulation's log (strictly rising
// stamps, one command per entry).
func TestDeterminismSimLogAllWays(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	cfg := simConfig{seed: 23, accounts: 200, hot: 30, entries: 3000, keepLog: true}
	w := runTradeSim(t, cfg)
	log := append(genesisLog(t), w.log...)
	compareRuns(t, log, 5, 700)
}

// perturb rewrites a log's stamps the way a real cluster can: runs of
// entries with the same stamp (a leader's commands within one ms, group
// commit), stamps behind log time (a new leader whose clock is behind),
// and jumps over MaxClockStepMs; and packs runs of commands into group
// entries.
func perturb(t testing.TB, log [][]byte, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0xabc))
	var out [][]byte
	var group [][]byte
	flush := func() {
		if len(group) == 0 {
			return
		}
		if len(group) == 1 {
			out = append(out, group[0])
		} else {
			g, err := EncodeGroup(group)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, g)
		}
		group = nil
	}
	shift := int64(0)
	for _, b := range log {
		c, err := DecodeCommand(b)
		if err != nil {
			t.Fatal(err)
		}
		switch r := rng.IntN(20); {
		case r == 0:
			shift -= rng.Int64N(3000) // a leader behind
		case r == 1:
			shift += rng.Int64N(3 * MaxClockStepMs) // a jump
		case r < 4:
			shift -= 1 // same ms as the previous entry
		}
		if c.TsMs > 0 {
			c.TsMs += shift // a print's payload keeps the oracle's own stamp
		}
		nb, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if c.Type == CmdGenesis || c.Type == CmdMarketsGenesis {
			flush()
			out = append(out, nb)
			continue
		}
		group = append(group, nb)
		if rng.IntN(3) > 0 || len(group) >= 8 {
			flush()
		}
	}
	flush()
	return out
}

func TestDeterminismPerturbedLogAllWays(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	cfg := simConfig{seed: 29, accounts: 200, hot: 30, entries: 3000, keepLog: true}
	w := runTradeSim(t, cfg)
	base := append(genesisLog(t), w.log...)
	for _, seed := range []uint64{1, 2} {
		log := perturb(t, base, seed)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compareRuns(t, log, seed, 500) })
	}
}

// genCancelAfterLog builds, blind (no feedback from a machine), a log
// centred on the incident: accounts arm short dead-man switches (~1-4 s),
// rest bracket entries (buy limit-like entry triggers with a stop leg) and
// limit orders, the oracle prints around their levels with print stamps
// up to 2 s ahead of log time, entries share stamps, run behind log time,
// jump past MaxClockStepMs, and are packed into groups.
func genCancelAfterLog(t testing.TB, seed uint64, entries int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed*31+7))
	log := genesisLog(t)
	ts := mktLaunchMs
	printTs := map[string]int64{}
	enc := func(c *Command) []byte {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mids := map[string]int64{"BTCUSD": usdQ8(100_000), "ETHUSD": usdQ8(3_400)}
	print := func(feed string) *Command {
		pts := max(printTs[feed]+1+rng.Int64N(400), ts-rng.Int64N(300)+rng.Int64N(2300))
		printTs[feed] = pts
		return mustCommand(t, CmdOraclePrint, ts, OraclePrintPayload{FeedID: feed, MidQ8: mids[feed], ConfQ9: 300_000, TsMs: pts})
	}
	for _, f := range []string{"BTCUSD", "ETHUSD"} {
		ts++
		log = append(log, enc(print(f)))
	}
	type acct struct{ id, key string }
	var accts []acct
	for i := 0; i < 12; i++ {
		id, key := fmt.Sprintf("acc_%d", i), fmt.Sprintf("key_%d", i)
		sum := sha256Hex(key)
		ts++
		log = append(log, enc(mustCommand(t, CmdSignup, ts, accessNewAccount(id, key, sum))))
		ts++
		log = append(log, enc(mustCommand(t, CmdDepositSettled, ts, fundsSettlement(id, btcBTC/5))))
		accts = append(accts, acct{id, key})
	}
	tick := tickSizeOf("BTC-PERP")
	var group [][]byte
	flush := func() {
		switch len(group) {
		case 0:
		case 1:
			log = append(log, group[0])
		default:
			g, err := EncodeGroup(group)
			if err != nil {
				t.Fatal(err)
			}
			log = append(log, g)
		}
		group = nil
	}
	n := 0
	for i := 0; i < entries; i++ {
		switch r := rng.IntN(40); {
		case r < 6: // the same stamp as the entry before
		case r == 6:
			ts -= rng.Int64N(2500) // a leader behind
		case r == 7:
			ts += MaxClockStepMs + rng.Int64N(2*MaxClockStepMs)
		default:
			ts += rng.Int64N(900)
		}
		a := accts[rng.IntN(len(accts))]
		mid := mids["BTCUSD"] / tick * tick
		var c *Command
		n++
		id := fmt.Sprintf("o%d", n)
		switch op := rng.IntN(100); {
		case op < 30:
			feed := "BTCUSD"
			if rng.IntN(4) == 0 {
				feed = "ETHUSD"
			}
			step := mids[feed] / 400
			mids[feed] += rng.Int64N(2*step+1) - step
			c = print(feed)
		case op < 45:
			to := []int64{0, 1000, 2900, 2900, 3000, 4000}[rng.IntN(6)]
			c = mustCommand(t, CmdCancelAllAfter, ts, CancelAllAfterPayload{TimeoutMs: to})
			c.IdemKey, c.ReqHash = "acct:"+a.id+":caa"+id, []byte(fmt.Sprint(to))
			if rng.IntN(6) == 0 && n > 2 { // a retry of an earlier key
				c.IdemKey = "acct:" + a.id + ":caa" + fmt.Sprintf("o%d", n-1-rng.IntN(min(n-1, 5)))
			}
		case op < 65:
			entry := mid - tick*(1+rng.Int64N(60))
			stop := entry - tick*(5+rng.Int64N(40))
			r := bracket(id, "buy", 1+rng.Int64N(3000), entry, stop, 0)
			if rng.IntN(3) == 0 {
				r.Bracket.TakeProfitLevelQ8 = mid + tick*(5+rng.Int64N(40))
			}
			c = placeCmd(t, ts, a.id, a.key, r)
		case op < 75:
			side := []string{"buy", "sell"}[rng.IntN(2)]
			lvl := mid + tick*(rng.Int64N(80)-40)
			c = placeCmd(t, ts, a.id, a.key, limitOrder(id, "BTC-PERP", side, 1+rng.Int64N(3000), max(lvl, tick)))
		case op < 82:
			side := []string{"buy", "sell"}[rng.IntN(2)]
			r := mktOrder(id, "BTC-PERP", side, 1+rng.Int64N(3000))
			r.ReduceOnly = rng.IntN(3) == 0
			c = placeCmd(t, ts, a.id, a.key, r)
		case op < 90:
			target := fmt.Sprintf("o%d", 1+rng.IntN(n))
			c = mustCommand(t, CmdCancelOrder, ts, CancelOrderPayload{OrderID: target})
			c.IdemKey, c.ReqHash = "acct:"+a.id+":c"+id, []byte("DELETE "+target)
		default:
			c = &Command{Type: CmdTick, TsMs: ts}
		}
		if c.Type == CmdCancelAllAfter || c.Type == CmdCancelOrder {
			c.Account, c.KeyID = a.id, a.key
		}
		group = append(group, enc(c))
		if rng.IntN(4) > 0 || len(group) >= 6 {
			flush()
		}
	}
	flush()
	return log
}

func placeCmd(t testing.TB, ts int64, acct, key string, r trade.PlaceRequest) *Command {
	c := mustCommand(t, CmdPlaceOrder, ts, r)
	c.Account, c.KeyID = acct, key
	c.IdemKey, c.ReqHash = "acct:"+acct+":"+r.OrderID, []byte(fmt.Sprintf("%+v", r))
	return c
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func accessNewAccount(id, key, hash string) access.NewAccount {
	return access.NewAccount{AccountID: id, KeyID: key, KeyHashHex: hash}
}

func fundsSettlement(id string, msat int64) funds.Settlement {
	return funds.Settlement{AccountID: id, AmountMsat: msat, RailRef: "spark-in-" + id, Path: funds.PathSpark}
}

func tickSizeOf(mkt string) int64 {
	for _, p := range market.DefaultCatalogue() {
		if p.MarketID == mkt {
			return p.TickSizeQ8
		}
	}
	return 1
}

// countEvents tallies what a log does when applied live, so a test can
// show it exercised the paths it claims to.
func countEvents(t testing.TB, log [][]byte) map[string]int {
	m := NewMachine(Options{})
	out := map[string]int{}
	for i, b := range log {
		res, evs := m.Apply(uint64(i+1), b)
		if len(res.Group) > 0 {
			out["group"]++
		}
		for _, e := range evs {
			switch v := e.Data.(type) {
			case trade.OrderView:
				out["order "+v.Status]++
				if v.Reason != nil {
					out["order "+v.Status+" "+*v.Reason]++
				}
			case trade.TriggerView:
				out["trigger "+v.Status]++
				if v.Reason != nil {
					out["trigger "+v.Status+" "+*v.Reason]++
				}
			default:
				out[e.Kind]++
			}
		}
	}
	return out
}

func TestDeterminismCancelAfterBracketsClockAllWays(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, seed := range []uint64{1, 2, 3, 4} {
		log := genCancelAfterLog(t, seed, 1500)
		if seed == 1 {
			t.Logf("tally: %v", countEvents(t, log))
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compareRuns(t, log, seed, 97) })
	}
}

// genIdemLog fills the idempotency store past IdemMaxBytes with noop
// answers of three tenants (large request hashes), retries old keys, and
// lets a day pass now and then, so the fair index tombstones, evicts from
// the middle (holes), compacts Order and prunes; restores at many points
// rebuild the index from the encoded store.
func genIdemLog(t testing.TB, seed uint64, entries, hashBytes int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 5))
	log := genesisLog(t)
	ts := mktLaunchMs
	enc := func(c *Command) []byte {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pad := bytes.Repeat([]byte{0xab}, hashBytes)
	tenants := []string{"big", "big", "big", "mid", "mid", "small", ""}
	for i := 0; i < entries; i++ {
		ts += rng.Int64N(3)
		if rng.IntN(2600) == 0 { // a long pause: a day passes in one-minute ticks
			for j := 0; j < 24*60+2; j++ {
				ts += MaxClockStepMs
				log = append(log, enc(&Command{Type: CmdTick, TsMs: ts}))
			}
		}
		ten := tenants[rng.IntN(len(tenants))]
		k := i
		if rng.IntN(10) == 0 && i > 0 {
			k = rng.IntN(i) // a retry
		}
		c := &Command{Type: CmdNoop, TsMs: ts, Account: ten}
		scope := ten
		if ten == "" {
			scope = "pub"
		}
		c.IdemKey = fmt.Sprintf("acct:%s:k%d", scope, k)
		if ten == "" && rng.IntN(2) == 0 {
			c.IdemKey = fmt.Sprintf("public:k%d", k)
		}
		h := append([]byte(fmt.Sprintf("%d:", k)), pad[:rng.IntN(hashBytes)+1]...)
		c.ReqHash = h
		log = append(log, enc(c))
	}
	return log
}

func TestDeterminismIdemFairStoreAtTheBoundAllWays(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	if testing.Short() {
		t.Skip("about 10 s")
	}
	log := genIdemLog(t, 1, 8000, 48<<10)
	// Show the store really went past its bounds and compacted.
	m := NewMachine(Options{})
	var maxHoles, maxTomb, compactions, prunes int
	for i, b := range log {
		st := m.st.Idem
		prevHoles, prevLen := 0, len(st.Order)
		if st.fair != nil {
			prevHoles = st.fair.holes
		}
		m.Apply(uint64(i+1), b)
		if st.fair != nil {
			maxHoles = max(maxHoles, st.fair.holes)
			if prevHoles > 1024 && st.fair.holes == 0 && len(st.Order) < prevLen {
				compactions++
			}
		}
		if len(st.Order) < prevLen-100 {
			prunes++
		}
		if i%200 == 0 {
			tomb := 0
			for _, r := range st.Records {
				if r.Evicted {
					tomb++
				}
			}
			maxTomb = max(maxTomb, tomb)
		}
	}
	t.Logf("records %d order %d bytes %d max tombstones %d max holes %d compactions %d big drops %d", len(m.st.Idem.Records), len(m.st.Idem.Order), m.st.Idem.Bytes, maxTomb, maxHoles, compactions, prunes)
	compareRuns(t, log, 9, 1300)
}

// TestDeterminismRaftNoopsAndGomaxprocs: raft-internal entries (nil data)
// scattered through the log, and snapshots restored with one core and
// with eight (the fast decoder spreads its jobs over GOMAXPROCS).
func TestDeterminismRaftNoopsAndGomaxprocs(t *testing.T) {
	base := genCancelAfterLog(t, 77, 1200)
	rng := rand.New(rand.NewPCG(3, 3))
	var log [][]byte
	for i, b := range base {
		if i > 2 && rng.IntN(8) == 0 {
			log = append(log, nil)
		}
		log = append(log, b)
	}
	compareRuns(t, log, 77, 151)

	live := NewMachine(Options{})
	half := len(log) / 2
	for i := 0; i < half; i++ {
		live.Apply(uint64(i+1), log[i])
	}
	snap, err := live.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i := half; i < len(log); i++ {
		live.Apply(uint64(i+1), log[i])
	}
	want := machineHash(t, live)
	for _, procs := range []int{1, 8} {
		old := runtime.GOMAXPROCS(procs)
		m := NewMachine(Options{})
		if err := m.Restore(snap); err != nil {
			t.Fatal(err)
		}
		runtime.GOMAXPROCS(old)
		idx := make([]uint64, 0, len(log)-half)
		for i := half; i < len(log); i++ {
			idx = append(idx, uint64(i+1))
		}
		m.ApplyBatch(idx, log[half:])
		if h := machineHash(t, m); h != want {
			t.Fatalf("GOMAXPROCS=%d restore: %s, live %s", procs, h, want)
		}
	}
}

// TestDeterminismIncidentScenario: the incident's shape, by hand. An account
// arms a 2.9 s switch and rests a bracket whose buy entry (a trigger under
// the mid) has a stop leg; a print reaching the entry comes one ms before
// or at the deadline, stamped by the oracle up to 2 s ahead; then the
// account refreshes. Each variant applies alike live, replayed and
// restored; only the log's own stamps decide fill versus cancel.
func TestDeterminismIncidentScenario(t *testing.T) {
	build := func(printEntryTs int64) [][]byte {
		log := genesisLog(t)
		ts := mktLaunchMs
		add := func(c *Command) {
			b, err := c.Encode()
			if err != nil {
				t.Fatal(err)
			}
			log = append(log, b)
		}
		add(printAt(t, ts+1, "BTCUSD", usdQ8(100_000), ts+1))
		add(printAt(t, ts+2, "ETHUSD", usdQ8(3_400), ts+2))
		add(mustCommand(t, CmdSignup, ts+3, accessNewAccount("acc_1", "key_1", sha256Hex("key_1"))))
		add(mustCommand(t, CmdDepositSettled, ts+4, fundsSettlement("acc_1", btcBTC)))
		arm := mustCommand(t, CmdCancelAllAfter, ts+10, CancelAllAfterPayload{TimeoutMs: 2900})
		arm.Account, arm.KeyID, arm.IdemKey, arm.ReqHash = "acc_1", "key_1", "acct:acc_1:caa1", []byte("2900")
		add(arm)
		add(placeCmd(t, ts+20, "acc_1", "key_1", bracket("b1", "buy", 1000, usdQ8(99_900), usdQ8(99_000), 0)))
		deadline := ts + 10 + 2900
		add(&Command{Type: CmdTick, TsMs: deadline - 1500})
		add(printAt(t, printEntryTs, "BTCUSD", usdQ8(99_800), deadline+1500)) // oracle stamp past the deadline
		ref := mustCommand(t, CmdCancelAllAfter, deadline+100, CancelAllAfterPayload{TimeoutMs: 2900})
		ref.Account, ref.KeyID, ref.IdemKey, ref.ReqHash = "acc_1", "key_1", "acct:acc_1:caa2", []byte("2900")
		add(ref)
		return log
	}
	deadline := mktLaunchMs + 10 + 2900
	for _, v := range []struct {
		name  string
		ts    int64
		entry string
	}{{"print before deadline", deadline - 1, trade.StatusFilled}, {"print at deadline", deadline, trade.StatusCanceled}} {
		t.Run(v.name, func(t *testing.T) {
			log := build(v.ts)
			compareRuns(t, log, 1, 3)
			m := NewMachine(Options{CheckInvariants: true})
			for i, b := range log {
				m.Apply(uint64(i+1), b)
			}
			o, ok := m.st.Trade.Order("acc_1", "b1")
			if !ok || o.Status != v.entry {
				t.Fatalf("bracket entry %+v, want %s", o, v.entry)
			}
			t.Logf("entry %s (%s), seq %d", o.Status, o.Reason, m.st.Seq)
		})
	}
}
