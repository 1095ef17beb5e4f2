package growth

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
)

type lbWorld struct {
	t      *testing.T
	s      *State
	now    int64
	equity map[string]int64
}

func newLBWorld(t *testing.T) *lbWorld {
	s := NewState()
	s.Board.Gates = Gates{MinEquityMsat: 100_000, MinTrades: 3, MinVolumeContracts: 100}
	return &lbWorld{t: t, s: s, equity: map[string]int64{}}
}

func (w *lbWorld) env() *Env {
	return &Env{Ledger: ledger.New(), NowMs: w.now, Seed: 42, Host: lbHost{w}}
}

// lbHost: every account exists; equity as the test sets it.
type lbHost struct{ w *lbWorld }

func (lbHost) NextSeq() uint64                  { panic("the leaderboard takes no seq") }
func (lbHost) Emit(string, string, uint64, any) {}
func (lbHost) CreatedMs(string) (int64, bool)   { return 0, true }
func (h lbHost) Equity(id string) int64         { return h.w.equity[id] }

// event applies a PnL event at ts whose account's equity afterwards is
// equityAfter.
func (w *lbWorld) event(ts int64, acct string, equityAfter int64, ev Event) {
	w.now = ts
	w.equity[acct] = equityAfter
	ev.AccountID = acct
	w.s.Observe(w.env(), ev)
}

const d0 = 20_000 * DayMs

// The metrics on a hand-computed example. Trader A: day 1 opens at
// 1,000,000 msat and gains 100,000 (index 1.1); ten days later opens at
// 1,100,000 and loses 220,000 (index 0.88: a drawdown of exactly 20% from
// the 1.1 peak); the next day opens at 880,000 and gains 88,000 (index
// 0.968). 30d and all: PnL -32,000, ROI -3.2%, win rate 2/3, drawdown
// 20%, three trades, 120 contracts. 7d sees only the last two days: PnL
// -132,000, index 0.8 then 0.88 (ROI -12%, drawdown 20% from 1.0), two
// trades, so it fails the three-trade gate. Trader B: one day, opens at
// 500,000, three trades gaining 50,000 (ROI +10%), 200 contracts.
func TestLeaderboardMetricsHandComputed(t *testing.T) {
	w := newLBWorld(t)
	w.event(d0+1000, "A", 1_100_000, Event{PnlMsat: 100_000, Volume: 50, Trade: true, Close: true, Win: true})
	w.event(d0+10*DayMs+5, "A", 880_000, Event{PnlMsat: -220_000, Volume: 60, Trade: true, Close: true})
	w.event(d0+11*DayMs+7, "A", 968_000, Event{PnlMsat: 88_000, Volume: 10, Trade: true, Close: true, Win: true})
	w.event(d0+11*DayMs+8, "B", 500_000, Event{Volume: 100, Trade: true}) // opens: fee-free example
	w.event(d0+11*DayMs+9, "B", 530_000, Event{PnlMsat: 30_000, Volume: 50, Trade: true, Close: true, Win: true})
	w.event(d0+11*DayMs+10, "B", 550_000, Event{PnlMsat: 20_000, Volume: 50, Trade: true, Close: true, Win: true})
	w.now = d0 + 11*DayMs + 12*3_600_000
	w.s.OnClockBoards(w.env())

	a := w.s.Board.Traders["A"].Snap
	want := map[string]Metrics{
		"7d":  {PnlMsat: -132_000, RoiQ9: -120_000_000, Volume: 70, Trades: 2, Wins: 1, Closes: 2, MaxDDQ9: 200_000_000},
		"30d": {PnlMsat: -32_000, RoiQ9: -32_000_000, Volume: 120, Trades: 3, Wins: 2, Closes: 3, MaxDDQ9: 200_000_000},
		"all": {PnlMsat: -32_000, RoiQ9: -32_000_000, Volume: 120, Trades: 3, Wins: 2, Closes: 3, MaxDDQ9: 200_000_000},
	}
	for wi, name := range WindowNames {
		if a.Windows[wi] != want[name] {
			t.Errorf("A %s: %+v, want %+v", name, a.Windows[wi], want[name])
		}
	}
	if got := winRate(a.Windows[1]); got == nil || *got != 666_666_666 {
		t.Errorf("A 30d win rate %v, want 666666666 (2/3 rounded down)", got)
	}
	b := w.s.Board.Traders["B"].Snap
	if m := b.Windows[0]; m.PnlMsat != 50_000 || m.RoiQ9 != 100_000_000 || m.Trades != 3 || m.Volume != 200 || m.MaxDDQ9 != 0 {
		t.Errorf("B 7d %+v", m)
	}
	// Ranks: A is not on the 7d boards (two trades); B leads every board.
	wantRanks := map[string][]int64{"A": {0, 2, 2, 0, 2, 2}, "B": {1, 1, 1, 1, 1, 1}}
	for id, ranks := range wantRanks {
		if got := w.s.Board.Traders[id].Snap.Ranks; !equal(got, ranks) {
			t.Errorf("%s ranks %v, want %v", id, got, ranks)
		}
	}
	v := w.s.BoardOf(0, 1, 10, true)
	if len(v.Rows) != 2 || v.Rows[0].Handle != w.s.Board.Traders["B"].Handle || v.Rows[1].Rank != 2 || int64(*v.ComputedTsMs) != w.now {
		t.Fatalf("pnl/30d %+v", v)
	}
	if err := w.s.CheckInvariants(ledger.New()); err != nil {
		t.Fatal(err)
	}
	// Own view: live eligibility with the failing gate named.
	own := w.s.Own("A", w.now, 968_000)
	if e := own.Eligibility[0]; e.Eligible || e.Reason == nil || *e.Reason != "gates_failed" || e.Checks[1].OK || e.Checks[0].OK != true {
		t.Fatalf("A 7d eligibility %+v", e)
	}
	if len(own.Placements) != 4 {
		t.Fatalf("A placements %+v", own.Placements)
	}
	// The equity curve: one point per kept day of the last 30.
	if c := w.s.Board.Traders["A"].Snap.Curve; len(c) != 3 || c[0].IndexQ9 != 1_100_000_000 || c[1].IndexQ9 != 880_000_000 || c[2].IndexQ9 != 968_000_000 {
		t.Fatalf("A curve %+v", c)
	}

	// B opts out: off every board at once, A moves up, B's profile is gone.
	yes := true
	if ref := w.s.Settings(w.env(), "B", SettingsRequest{OptedOut: &yes}); ref != nil {
		t.Fatal(ref)
	}
	if got := w.s.Board.Traders["A"].Snap.Ranks; !equal(got, []int64{0, 1, 1, 0, 1, 1}) {
		t.Fatalf("A ranks after B opted out: %v", got)
	}
	if v := w.s.BoardOf(0, 0, 10, true); len(v.Rows) != 0 {
		t.Fatalf("pnl/7d still lists %+v", v.Rows)
	}
	if _, ok := w.s.Profile(w.s.Board.Traders["B"].Handle, true); ok {
		t.Fatal("opted-out profile served")
	}
	if _, ok := w.s.Profile("no-such-handle", true); ok {
		t.Fatal("unknown profile served")
	}
	if err := w.s.CheckInvariants(ledger.New()); err != nil {
		t.Fatal(err)
	}
	// Recompute keeps B off; opting back in returns B at the next one.
	w.now += CadenceMinutes * 60_000
	w.s.OnClockBoards(w.env())
	if w.s.Board.Traders["B"].Snap.Ranks[0] != 0 {
		t.Fatal("opted-out trader ranked by a recompute")
	}
	no := false
	_ = w.s.Settings(w.env(), "B", SettingsRequest{OptedOut: &no})
	w.now += CadenceMinutes * 60_000
	w.s.OnClockBoards(w.env())
	if w.s.Board.Traders["B"].Snap.Ranks[0] != 1 {
		t.Fatal("opted back in, not ranked")
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The recompute runs on the cadence of log time only.
func TestLeaderboardRecomputeCadence(t *testing.T) {
	w := newLBWorld(t)
	w.now = d0 + 7*60_000
	w.s.OnClockBoards(w.env())
	first := w.s.Board.ComputedTsMs
	if first != w.now || w.s.Board.NextTsMs != d0+15*60_000 {
		t.Fatalf("computed %d next %d", first, w.s.Board.NextTsMs)
	}
	w.now = d0 + 15*60_000 - 1
	w.s.OnClockBoards(w.env())
	if w.s.Board.ComputedTsMs != first {
		t.Fatal("recomputed before the cadence stamp")
	}
	w.now++
	w.s.OnClockBoards(w.env())
	if w.s.Board.ComputedTsMs != w.now || w.s.Board.NextTsMs != d0+30*60_000 {
		t.Fatal("not recomputed at the stamp")
	}
}

// Handles derive from the seed and the account, never show the account,
// and never collide.
func TestHandles(t *testing.T) {
	b := newBoards()
	b.fillNil()
	seen := map[string]bool{}
	for i := range 5000 {
		id := "acc_" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		h := b.trader(7, id).Handle
		if seen[h] {
			t.Fatalf("handle %s twice", h)
		}
		seen[h] = true
	}
	c := newBoards()
	c.fillNil()
	if c.trader(7, "acc_aaa").Handle != b.Traders["acc_aaa"].Handle || c.trader(8, "acc_aab").Handle == b.Traders["acc_aab"].Handle {
		t.Fatal("handles are not a function of seed and account")
	}
}

// Display names: what is refused.
func TestValidateDisplayName(t *testing.T) {
	for _, ok := range []string{"Ada", "Ada L.", "O'Neil_2-x", "Zoë", "東京トレーダー"} {
		if ValidateDisplayName(ok) != nil {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", " a", "a ", "a  b", "a\tb", "<script>", "abcdefghijklmnopqrstuvwxyzabcdefg", "a\u200bb"} {
		if ValidateDisplayName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The rounding helpers on their edges.
func TestIndexAndDrawdownRounding(t *testing.T) {
	if got := indexStep(Q9, Day{OpenEquityMsat: 3, PnlMsat: 1}); got != 1_333_333_333 {
		t.Errorf("index 4/3: %d (want rounded down)", got)
	}
	if got := indexStep(Q9, Day{OpenEquityMsat: 3, PnlMsat: -5}); got != 0 {
		t.Errorf("loss beyond equity: %d", got)
	}
	if got := indexStep(Q9, Day{OpenEquityMsat: 0, PnlMsat: 1 << 40}); got != IndexMaxQ9 {
		t.Errorf("capped index: %d", got)
	}
	if got := drawdownQ9(3*Q9, 2*Q9); got != 333_333_334 {
		t.Errorf("drawdown 1/3: %d (want rounded up)", got)
	}
}

// Forty days of +1% each: the kept days stop at 31, the all window still
// compounds all forty (folded), 30d the last thirty, 7d the last seven;
// no drawdown.
func TestLeaderboardFoldsOldDays(t *testing.T) {
	w := newLBWorld(t)
	eq := int64(1_000_000_000)
	type step struct{ open, gain int64 }
	var steps []step
	for d := range int64(40) {
		gain := eq / 100
		steps = append(steps, step{eq, gain})
		eq += gain
		w.event(d0+d*DayMs+1, "A", eq, Event{PnlMsat: gain, Volume: 100, Trade: true, Close: true, Win: true})
	}
	tr := w.s.Board.Traders["A"]
	if len(tr.Days) != TraderDaysKept {
		t.Fatalf("%d days kept", len(tr.Days))
	}
	// By hand: index *= (open + gain) / open, rounded down, over the
	// window's last n days.
	compound := func(n int) int64 {
		idx := int64(Q9)
		for _, s := range steps[len(steps)-n:] {
			idx = idx * (s.open + s.gain) / s.open
		}
		return idx - Q9
	}
	today := int64(d0 + 39*DayMs)
	for wi, n := range []int{7, 30, 40} {
		m := tr.windowMetrics(wi, today)
		if m.RoiQ9 != compound(n) || m.Trades != int64(n) || m.MaxDDQ9 != 0 || m.Wins != int64(n) {
			t.Errorf("%s: %+v, want roi %d over %d days", WindowNames[wi], m, compound(n), n)
		}
	}
	if m := tr.windowMetrics(2, today); m.PnlMsat != eq-1_000_000_000 {
		t.Errorf("all pnl %d, want %d", m.PnlMsat, eq-1_000_000_000)
	}
}

func TestCheckDisplayNameImpersonation(t *testing.T) {
	for _, ok := range []string{"Grace", "Grace Hopper", "Ада Лавлейс", "Σωκράτης", "山田 太郎", "O'Brien-Smith", "plucky-puma-9818"} {
		if ref := CheckDisplayNameImpersonation(ok, "plucky-puma-9818"); ref != nil {
			t.Errorf("%q refused: %s", ok, ref.Msg)
		}
	}
	for _, bad := range []string{
		"silver-crow-3327", // another trader's handle shape
		"Silver-Crow-3327",
		"perpd official", "PerpD",
		"\u3164", "a\u3164b", "\u115F", // render blank
		"Ａdmin",       // fullwidth
		"silvеr-crow", // a Cyrillic е among Latin letters
		"Αlice",       // a Greek Alpha among Latin letters
	} {
		if CheckDisplayNameImpersonation(bad, "plucky-puma-9818") == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestDisplayNameStyledLettersRefused: styled letters and digits pass
// every check above by not being the plain ones they show (review of
// 2026-11-28): mathematical bold "perpd" is no Latin "perpd" to the venue
// check, mathematical digits no [0-9] to the handle check, and small
// capitals are Latin letters that are not "perpd" lowercased. The board,
// the profile and the promoter surface showed them as the venue's name or
// as another trader's handle.
func TestDisplayNameStyledLettersRefused(t *testing.T) {
	for _, bad := range []string{
		"\U0001d429\U0001d41e\U0001d42b\U0001d429\U0001d41d",         // mathematical bold perpd
		"\U0001d40f\U0001d404\U0001d411\U0001d40f\U0001d403 Support", // mathematical bold PERPD
		"silver-crow-\U0001d7d1\U0001d7d1\U0001d7d0\U0001d7d5",       // another handle, mathematical digits
		"\U0001d42c\U0001d422\U0001d425\U0001d42f\U0001d41e\U0001d42b-crow-3327",
		"\u1d18\u1d07\u0280\u1d18\u1d05", // small capitals PERPD
		"\u1d18\u1d07\u0280\u1d18\u1d05 team",
		"\ufb01nance", // a ligature
		"Ad\u2098in",  // a subscript letter
	} {
		if ValidateDisplayName(bad) != nil {
			t.Errorf("%q: not even a valid name, so the case tests nothing", bad)
			continue
		}
		if CheckDisplayNameImpersonation(bad, "plucky-puma-9818") == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Names of real scripts stay accepted, composed accents included.
	for _, ok := range []string{"Zoë Ørsted", "Ɔkɔmfo Anɔkye", "Nguyễn Văn An", "김민준", "Ἀριστοτέλης", "محمد"} {
		if ref := CheckDisplayNameImpersonation(ok, "plucky-puma-9818"); ref != nil {
			t.Errorf("%q refused: %s", ok, ref.Msg)
		}
	}
}

// TestOptOutOfNoBoardIsCheap: opting out walks the boards only where the
// trader holds a rank. It used to sort every trader's id first whenever
// the trader had a recompute snapshot, ranked or not, so one account
// toggling optedOut (a cheap, read-budget call) made every replica sort
// the whole trader map once per toggle inside apply. Measured in bytes
// allocated, which do not depend on the machine.
func TestOptOutOfNoBoardIsCheap(t *testing.T) {
	w := newLBWorld(t)
	const traders = 20_000
	for i := range traders {
		w.event(d0+int64(i), fmt.Sprintf("acc_%05d", i), 1_000, Event{Volume: 1, Trade: true}) // below every gate
	}
	w.s.OnClockBoards(w.env())
	on, off := true, false
	toggle := func(v *bool) {
		if ref := w.s.Settings(w.env(), "acc_00007", SettingsRequest{OptedOut: v}); ref != nil {
			t.Fatal(ref)
		}
	}
	toggle(&on)
	toggle(&off)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	toggle(&on)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<10 {
		t.Fatalf("opting out of no board allocated %d bytes with %d traders", got, traders)
	}
	if err := w.s.Board.check(); err != nil {
		t.Fatal(err)
	}
}
