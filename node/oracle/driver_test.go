package oracle

import (
	"testing"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/market"
)

// logState is the replicated state shared by fake leaders: one Machine fed
// entries in order, the way raft would feed every replica.
type logState struct {
	t    *testing.T
	m    *fsm.Machine
	next uint64
}

func newLogState(t *testing.T, listMarkets bool) *logState {
	s := &logState{t: t, m: fsm.NewMachine(fsm.Options{CheckInvariants: true}), next: 1}
	s.apply(fsm.CmdGenesis, t0, fsm.GenesisPayload{Seed: 11, Deployment: "testnet"})
	if listMarkets {
		s.apply(fsm.CmdMarketsGenesis, t0, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue()})
	}
	return s
}

func (s *logState) apply(typ fsm.CmdType, tsMs int64, payload any) *fsm.Result {
	s.t.Helper()
	c, err := fsm.NewCommand(typ, payload)
	if err != nil {
		s.t.Fatal(err)
	}
	c.TsMs = tsMs
	b, err := c.Encode()
	if err != nil {
		s.t.Fatal(err)
	}
	res, _ := s.m.Apply(s.next, b)
	s.next++
	return res
}

func (s *logState) now() int64 {
	var now int64
	s.m.Read(func(st *fsm.State, _ uint64) { now = st.NowMs })
	return now
}

func (s *logState) last(feed string) market.Print {
	var p market.Print
	s.m.Read(func(st *fsm.State, _ uint64) { p, _ = st.Market.FeedLast(feed) })
	return p
}

// fakeLeader is one node of the fake cluster: its own clock and term, the
// shared log, and entries stamped as node.stamp does.
type fakeLeader struct {
	log      *logState
	clock    int64
	term     uint64
	leading  bool
	proposed int
	refused  int
}

func (f *fakeLeader) IsLeader() bool { return f.leading }
func (f *fakeLeader) Term() uint64   { return f.term }
func (f *fakeLeader) Barrier() error { return nil }
func (f *fakeLeader) Read(fn func(st *fsm.State)) {
	f.log.m.Read(func(st *fsm.State, _ uint64) { fn(st) })
}
func (f *fakeLeader) Propose(t fsm.CmdType, payload any) (*fsm.Result, error) {
	f.proposed++
	res := f.log.apply(t, max(f.clock, f.log.now()), payload)
	if !res.OK() {
		f.refused++
	}
	return res, nil
}

func newDriver(t *testing.T) *Driver {
	t.Helper()
	d, err := NewDriver(DriverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// tick advances the leader's clock by dtMs and runs one driver tick on it.
func tick(d *Driver, f *fakeLeader, dtMs int64) {
	f.clock += dtMs
	d.cfg.Now = func() int64 { return f.clock }
	d.Tick(f)
}

func TestDriverPrintsEveryFeedOncePerTick(t *testing.T) {
	s := newLogState(t, true)
	f := &fakeLeader{log: s, clock: t0, term: 1, leading: true}
	d := newDriver(t)
	for i := 0; i < 5; i++ {
		tick(d, f, 1_000)
	}
	if f.proposed != 10 || f.refused != 0 {
		t.Fatalf("%d prints proposed, %d refused; want 10 accepted", f.proposed, f.refused)
	}
	for _, feed := range []string{FeedBTCUSD, FeedETHUSD} {
		if p := s.last(feed); p.TsMs != t0+5_000 || p.MidQ8 <= 0 {
			t.Fatalf("%s last print %+v", feed, p)
		}
	}
}

func TestDriverWaitsForGenesisAndMarketsAndLeadership(t *testing.T) {
	s := newLogState(t, false)
	f := &fakeLeader{log: s, clock: t0, term: 1, leading: true}
	d := newDriver(t)
	tick(d, f, 1_000)
	if f.proposed != 0 {
		t.Fatal("printed before the markets were listed")
	}
	s.apply(fsm.CmdMarketsGenesis, t0, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue()})
	f.leading = false
	tick(d, f, 1_000)
	if f.proposed != 0 {
		t.Fatal("a follower printed")
	}
	f.leading = true
	tick(d, f, 1_000)
	if f.proposed != 2 || s.last(FeedBTCUSD).MidQ8 != DefaultStartPricesQ8()[FeedBTCUSD] {
		t.Fatalf("first prints: %d proposed, BTC %+v; want the start price", f.proposed, s.last(FeedBTCUSD))
	}
}

// TestNewLeaderResumesFromTheCommittedPrint moves the BTC price far from
// its start with a replicated pin, then hands leadership to a node whose
// source never ran: its first print must continue from the committed
// price, not restart at the seed price, and must be newer.
func TestNewLeaderResumesFromTheCommittedPrint(t *testing.T) {
	s := newLogState(t, true)
	a := &fakeLeader{log: s, clock: t0, term: 1, leading: true}
	da := newDriver(t)
	tick(da, a, 1_000)
	s.apply(fsm.CmdOraclePin, a.clock, fsm.OraclePinPayload{FeedID: FeedBTCUSD, MidQ8: 50_000 * 100_000_000})
	for i := 0; i < 3; i++ {
		tick(da, a, 1_000)
	}
	if p := s.last(FeedBTCUSD); p.MidQ8 != 50_000*100_000_000 {
		t.Fatalf("pinned print %+v", p)
	}
	s.apply(fsm.CmdOracleUnpin, a.clock, fsm.OracleUnpinPayload{FeedID: FeedBTCUSD})
	for i := 0; i < 3; i++ {
		tick(da, a, 1_000)
	}
	before := s.last(FeedBTCUSD)
	nearPin(t, "after unpin", before.MidQ8)

	a.leading = false
	b := &fakeLeader{log: s, clock: a.clock, term: 2, leading: true}
	db := newDriver(t)
	tick(db, b, 1_000)
	after := s.last(FeedBTCUSD)
	if after.TsMs <= before.TsMs || b.refused != 0 {
		t.Fatalf("new leader's print %+v is not after %+v (refused %d)", after, before, b.refused)
	}
	nearPin(t, "new leader's first print", after.MidQ8)

	// The old leader wins again later: it resumes from the new leader's
	// print, not from its own memory.
	for i := 0; i < 5; i++ {
		tick(db, b, 1_000)
	}
	b.leading, a.leading, a.term, a.clock = false, true, 3, b.clock
	mid := s.last(FeedBTCUSD)
	tick(da, a, 1_000)
	if a.refused != 0 || s.last(FeedBTCUSD).TsMs <= mid.TsMs {
		t.Fatalf("returning leader: refused %d, last %+v", a.refused, s.last(FeedBTCUSD))
	}
	nearPin(t, "returning leader", s.last(FeedBTCUSD).MidQ8)
}

// nearPin checks a price is within 1% of the 50,000 pin: seconds of a 55%
// volatility walk move it by a few basis points.
func nearPin(t *testing.T, what string, midQ8 int64) {
	t.Helper()
	if midQ8 < 49_500*100_000_000 || midQ8 > 50_500*100_000_000 {
		t.Fatalf("%s: %d is not near the committed 50,000", what, midQ8)
	}
}

// TestNewLeaderWithALaggingClockSkipsRatherThanRefused: a new leader
// whose clock trails the last print proposes nothing until its clock has
// passed it, then continues.
func TestNewLeaderWithALaggingClockSkipsRatherThanRefused(t *testing.T) {
	s := newLogState(t, true)
	a := &fakeLeader{log: s, clock: t0, term: 1, leading: true}
	da := newDriver(t)
	for i := 0; i < 3; i++ {
		tick(da, a, 1_000)
	}
	last := s.last(FeedBTCUSD)
	a.leading = false
	b := &fakeLeader{log: s, clock: a.clock - 5_000, term: 2, leading: true}
	db := newDriver(t)
	for i := 0; i < 4; i++ {
		tick(db, b, 1_000)
	}
	if b.proposed != 0 || s.last(FeedBTCUSD) != last {
		t.Fatalf("a lagging leader proposed %d prints", b.proposed)
	}
	tick(db, b, 2_000)
	if b.refused != 0 || s.last(FeedBTCUSD).TsMs <= last.TsMs {
		t.Fatalf("after catching up: refused %d, last %+v", b.refused, s.last(FeedBTCUSD))
	}
}

// TestReplicatedScriptIsPlayedByWhicheverNodeLeads: a linear script set
// while one node leads is continued by the next from the same start.
func TestReplicatedScriptIsPlayedByWhicheverNodeLeads(t *testing.T) {
	s := newLogState(t, true)
	a := &fakeLeader{log: s, clock: t0, term: 1, leading: true}
	da := newDriver(t)
	tick(da, a, 1_000)
	start := s.now()
	pts := []market.OverridePoint{{OffsetMs: 0, MidQ8: 1_000 * 100_000_000}, {OffsetMs: 10_000, MidQ8: 2_000 * 100_000_000}}
	if res := s.apply(fsm.CmdOracleScript, start, fsm.OracleScriptPayload{FeedID: FeedETHUSD, Mode: market.OverrideLinear, Points: pts}); !res.OK() {
		t.Fatalf("script: %s", res.Body)
	}
	a.clock = start
	tick(da, a, 2_000)
	if p := s.last(FeedETHUSD); p.MidQ8 != 1_200*100_000_000 || p.ConfQ9 != PinnedConfQ9 {
		t.Fatalf("2 s into the script: %+v, want 1,200", p)
	}
	a.leading = false
	b := &fakeLeader{log: s, clock: a.clock, term: 2, leading: true}
	db := newDriver(t)
	tick(db, b, 3_000)
	if p := s.last(FeedETHUSD); p.MidQ8 != 1_500*100_000_000 {
		t.Fatalf("new leader 5 s into the script: %+v, want 1,500", p)
	}
	tick(db, b, 60_000)
	if p := s.last(FeedETHUSD); p.MidQ8 != 2_000*100_000_000 {
		t.Fatalf("after the script's end: %+v, want 2,000 held", p)
	}
}

// newLogStateAtLevel is newLogState on a cluster started at the build's
// feature level, so the FSM's print guard (held jumps) is in force.
func newLogStateAtLevel(t *testing.T) *logState {
	s := &logState{t: t, m: fsm.NewMachine(fsm.Options{CheckInvariants: true}), next: 1}
	s.apply(fsm.CmdGenesis, t0, fsm.GenesisPayload{Seed: 11, Deployment: "testnet", FeatureLevel: fsm.FeatureLevel})
	s.apply(fsm.CmdMarketsGenesis, t0, fsm.MarketsGenesisPayload{Markets: market.DefaultCatalogue()})
	return s
}

// TestUnpinBeforeTheJumpIsConfirmedKeepsTheCommittedPrice: a pin more
// than market.PrintJumpFactor away is held by the FSM until a second print
// confirms it. An operator who unpins before that (a mistyped pin caught
// at once) must get the committed price back. The driver resumed the
// simulation from the held pin print instead, so its next print, near the
// pin, confirmed the jump the operator had withdrawn: ETH 3,400 went to
// 10,000 after the unpin. A new leader resumed from the committed print
// and would not have.
func TestUnpinBeforeTheJumpIsConfirmedKeepsTheCommittedPrice(t *testing.T) {
	s := newLogStateAtLevel(t)
	a := &fakeLeader{log: s, clock: t0, term: 1, leading: true}
	d := newDriver(t)
	tick(d, a, 1_000)
	start := s.last(FeedETHUSD)
	if res := s.apply(fsm.CmdOraclePin, a.clock, fsm.OraclePinPayload{FeedID: FeedETHUSD, MidQ8: 10_000 * 100_000_000}); !res.OK() {
		t.Fatalf("pin: %s", res.Body)
	}
	tick(d, a, 1_000)
	if p := s.last(FeedETHUSD); p != start {
		t.Fatalf("the pin's first print was taken at once: %+v", p)
	}
	if res := s.apply(fsm.CmdOracleUnpin, a.clock, fsm.OracleUnpinPayload{FeedID: FeedETHUSD}); !res.OK() {
		t.Fatalf("unpin: %s", res.Body)
	}
	for i := 0; i < 3; i++ {
		tick(d, a, 1_000)
	}
	p := s.last(FeedETHUSD)
	if p.TsMs <= start.TsMs || p.MidQ8 > start.MidQ8*101/100 || p.MidQ8 < start.MidQ8*99/100 {
		t.Fatalf("after the unpin ETH is %+v, want it near the committed %d", p, start.MidQ8)
	}
}
