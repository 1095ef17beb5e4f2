package fsm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/por"
)

// Timer benchmarks: what one entry costs when its time makes a timer of
// the state machine due (machine.go's timers run inside apply, so every
// replica stops applying for as long). Each measures the whole entry (a
// leader's tick) at 1,000, 10,000 and 100,000 accounts, each account with
// what a trader holds: its key, a 5x BTC-PERP position (60% long, so the
// funding rate is not zero), a resting limit order 1-10% from the mid, a
// leaderboard record with TraderDaysKept days of results that pass the
// gates, and every tenth account a 5x ETH-PERP position too. Built once
// per size through the machine and kept as a snapshot; each benchmark
// restores a copy. docs/performance.md has the figures.
var timerSizes = []int{1_000, 10_000, 100_000}

var timerFixtures struct {
	sync.Mutex
	by map[int]*timerFixture
}

type timerFixture struct {
	snap []byte
	ts   int64
	mid  map[string]int64
}

// timerWorld is a fresh copy of the n-account timer fixture, its indexes
// built and its time 1 ms past the last print.
func timerWorld(b *testing.B, n int) *benchWorld {
	b.Helper()
	timerFixtures.Lock()
	defer timerFixtures.Unlock()
	if timerFixtures.by == nil {
		timerFixtures.by = map[int]*timerFixture{}
	}
	f := timerFixtures.by[n]
	if f == nil {
		f = buildTimerFixture(b, n)
		timerFixtures.by[n] = f
	}
	w := &benchWorld{tb: b, m: NewMachine(Options{}), ts: f.ts, mid: maps.Clone(f.mid)}
	if err := w.m.Restore(f.snap); err != nil {
		b.Fatal(err)
	}
	w.idx = w.m.Applied()
	w.print("BTCUSD", benchBTCMidQ8)
	w.print("ETHUSD", benchETHMidQ8)
	return w
}

func buildTimerFixture(b *testing.B, n int) *timerFixture {
	w := newBenchWorld(b, n, btcBTC)
	rng := rand.New(rand.NewPCG(11, uint64(n)))
	entries := make([][]byte, 0, 3*n)
	for i := range n {
		side := "buy"
		if !riskLong(i) {
			side = "sell"
		}
		entries = append(entries, w.orderCmd(i, levered(mktOrder(fmt.Sprintf("p%d", i), "BTC-PERP", side, riskContracts), riskLowLev)))
		entries = append(entries, w.orderCmd(i, restingLimit(rng, fmt.Sprintf("r%d", i), "BTC-PERP", i%2 == 0, 1_000, benchBTCMidQ8, benchTickBTC)))
		if i%10 == 0 {
			entries = append(entries, w.orderCmd(i, levered(mktOrder(fmt.Sprintf("e%d", i), "ETH-PERP", side, 100), riskLowLev)))
		}
	}
	w.runEntries(entries, 256)
	// A month of results per trader, set directly (building it through
	// fills would take a month of log time): days that pass the gates,
	// with PnL and equity spread so the ranking has work to do.
	w.m.Read(func(st *State, _ uint64) {
		today := w.ts / growth.DayMs * growth.DayMs
		for id, t := range st.Growth.Board.Traders {
			var i int
			fmt.Sscanf(id, "acc_%d", &i)
			t.Days = t.Days[:0]
			for d := range int64(growth.TraderDaysKept) {
				t.Days = append(t.Days, growth.Day{Day: today - (growth.TraderDaysKept-1-d)*growth.DayMs,
					PnlMsat: int64((i*7+int(d)*13)%201-100) * 100_000, Volume: 2_000, Trades: 4, Wins: 2, Closes: 2,
					OpenEquityMsat: btcBTC + int64(i%997)*1_000_000})
			}
			t.All.Volume, t.All.Trades, t.All.Wins, t.All.Closes = 60_000, 120, 60, 60
		}
	})
	snap, err := w.m.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	return &timerFixture{snap: snap, ts: w.ts, mid: w.mid}
}

// holdBack makes the leaderboard recompute (boards) and the Proof of
// Reserves tree (por) not due at tsMs, so an entry there measures the
// other timers alone; restore puts them back. Untimed setup only: it
// edits the state under the machine.
func (w *benchWorld) holdBack(tsMs int64, boards, por bool) (restore func()) {
	var next, porTs int64
	w.m.Read(func(st *State, _ uint64) {
		if boards {
			next = st.Growth.Board.NextTsMs
			st.Growth.Board.NextTsMs = tsMs + 1
		}
		if por && st.PoR.Latest != nil {
			porTs = st.PoR.Latest.TsMs
			st.PoR.Latest.TsMs = tsMs
		}
	})
	return func() {
		w.m.Read(func(st *State, _ uint64) {
			if boards {
				st.Growth.Board.NextTsMs = next
			}
			if por && st.PoR.Latest != nil {
				st.PoR.Latest.TsMs = porTs
			}
		})
	}
}

// timedTick applies the tick entry stamped tsMs under the timer, and
// reports the process CPU time it took as cpu-ms/op (steadier than the
// wall time on a VM shared with other work; it includes the GC's).
func timedTick(b *testing.B, w *benchWorld, tsMs int64) []Event {
	entry := w.tickAt(tsMs)
	before := processCPU()
	b.StartTimer()
	r, evs := w.applyRaw(entry)
	b.StopTimer()
	cpu := processCPU() - before
	w.mustOK(r)
	// A benchmark runs once with N=1 before its N: count each run alone.
	t := timerCPU[b]
	if t.n != b.N {
		t = timerRun{n: b.N}
	}
	t.cpu += cpu
	timerCPU[b] = t
	b.ReportMetric(float64(t.cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
	return evs
}

type timerRun struct {
	n   int
	cpu time.Duration
}

var timerCPU = map[*testing.B]timerRun{}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTimers measures, per size:
//
//   - tick: an entry that makes no timer due (what every timer's check
//     costs on every entry);
//   - funding: the entry that passes an hourly boundary of both markets
//     (every BTC-PERP position and every tenth account's ETH-PERP one pays
//     or receives), the leaderboard recompute held back;
//   - boards: the leaderboard recompute alone, at a cadence stamp that is
//     not on the hour (no trader's days changed since the last one);
//   - boardsafterfunding: the recompute alone right after an hourly
//     boundary's funding, which changed the newest day of every trader
//     holding a position (as the recompute that shares the boundary's
//     entry sees them);
//   - por: the Proof of Reserves tree alone, due every minute (measured
//     for the record; fsm/por.go is not this file's to change);
//   - referralday: the first entry of a UTC day, which recounts every
//     referrer's active referees (every tenth account holds a code, the
//     other nine of its ten are bound to it and have traded since);
//   - cancelafter: the entry at which 1% of the accounts' dead-man switches
//     fire (each cancels its resting order).
func BenchmarkTimers(b *testing.B) {
	for _, n := range timerSizes {
		b.Run(fmt.Sprintf("accounts=%d/tick", n), func(b *testing.B) {
			w := timerWorld(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				if (w.ts+1)%60_000 == 0 {
					// A PoR minute (and every recompute stamp and
					// funding boundary): passed untimed.
					w.applyRaw(w.tickAt(w.ts + 1))
				}
				timedTick(b, w, w.ts+1)
			}
		})
		b.Run(fmt.Sprintf("accounts=%d/funding", n), func(b *testing.B) {
			w := timerWorld(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			flows := 0
			for i := 0; i < b.N; i++ {
				boundary := w.nextBoundary()
				w.walkBefore(boundary - 1)
				w.print("ETHUSD", benchETHMidQ8) // at boundary-1
				restore := w.holdBack(boundary, true, true)
				evs := timedTick(b, w, boundary)
				restore()
				n := 0
				for _, ev := range evs {
					if ev.Kind == "funding_flow" {
						n++
					}
				}
				if n < w.positions()*9/10 {
					b.Fatalf("%d funding flows for %d positions", n, w.positions())
				}
				flows += n
			}
			b.ReportMetric(float64(flows)/float64(b.N), "flows/op")
		})
		b.Run(fmt.Sprintf("accounts=%d/boards", n), func(b *testing.B) {
			w := timerWorld(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			cadence := int64(growth.CadenceMinutes * 60_000)
			for i := 0; i < b.N; i++ {
				stamp := (w.ts/cadence + 1) * cadence
				if stamp%market.FundingIntervalMs == 0 {
					w.walkBefore(stamp + 1)
					w.applyRaw(w.tickAt(stamp + 1))
					stamp += cadence
				}
				w.walkBefore(stamp)
				restore := w.holdBack(stamp, false, true)
				timedTick(b, w, stamp)
				restore()
				var ranked int64
				w.m.Read(func(st *State, _ uint64) {
					if t := st.Growth.Board.Traders["acc_000000"]; t != nil && t.Snap != nil {
						ranked = t.Snap.Ranks[1]
					}
				})
				if ranked == 0 {
					b.Fatal("acc_000000 holds no rank on pnl/30d: the recompute ranked nobody")
				}
			}
		})
		b.Run(fmt.Sprintf("accounts=%d/boardsafterfunding", n), func(b *testing.B) {
			w := timerWorld(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				// The boundary's funding (every position's flow changes
				// its trader's newest day) applied untimed with the
				// recompute held back, then the recompute alone.
				boundary := w.nextBoundary()
				w.walkBefore(boundary - 1)
				w.print("ETHUSD", benchETHMidQ8)
				restore := w.holdBack(boundary, true, true)
				w.applyRaw(w.tickAt(boundary))
				restore()
				restore = w.holdBack(boundary+1, false, true)
				timedTick(b, w, boundary+1)
				restore()
			}
		})
		b.Run(fmt.Sprintf("accounts=%d/por", n), func(b *testing.B) { benchPoRMinutes(b, timerWorld(b, n), false) })
		// por-beside: the same minute from LevelPoRBesideApply on a
		// node's machine, whose trees its shadow builds (stood in for by
		// a tree built once, untimed): the entry that makes the tree due
		// and the one that publishes it, PublishDelayMs later, both timed.
		b.Run(fmt.Sprintf("accounts=%d/por-beside", n), func(b *testing.B) { benchPoRMinutes(b, timerWorld(b, n), true) })
		b.Run(fmt.Sprintf("accounts=%d/referralday", n), func(b *testing.B) {
			w := timerWorld(b, n)
			entries := make([][]byte, 0, n+n/10*9)
			for i := 0; i < n; i += 10 {
				c := mustCommand(b, CmdReferralCode, 0, ReferralCodePayload{Code: fmt.Sprintf("R%06d", i)})
				c.Account, c.KeyID = benchAcct(i)
				entries = append(entries, w.encode(c))
			}
			for i := range n {
				if i%10 == 0 {
					continue
				}
				c := mustCommand(b, CmdReferralBind, 0, ReferralBindPayload{Code: fmt.Sprintf("R%06d", i/10*10)})
				c.Account, c.KeyID = benchAcct(i)
				entries = append(entries, w.encode(c))
			}
			w.runEntries(entries, 256)
			// Each referee trades once after binding (its last fill
			// counts it active).
			entries = entries[:0]
			for i := range n {
				if i%10 != 0 {
					entries = append(entries, w.orderCmd(i, mktOrder(fmt.Sprintf("rf%d", i), "BTC-PERP", "buy", 100)))
				}
			}
			w.runEntries(entries, 256)
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				if (w.ts+1)%60_000 == 0 {
					w.applyRaw(w.tickAt(w.ts + 1))
				}
				// The recount runs when the day moves past ActiveDay:
				// set it a day back (untimed) rather than walk a day.
				w.m.Read(func(st *State, _ uint64) { st.Growth.ActiveDay-- })
				timedTick(b, w, w.ts+1)
				var active int64
				w.m.Read(func(st *State, _ uint64) { active = st.Growth.Referrers["acc_000000"].Active })
				if active != 9 {
					b.Fatalf("acc_000000 counts %d active referees, want 9", active)
				}
			}
		})
		b.Run(fmt.Sprintf("accounts=%d/cancelafter", n), func(b *testing.B) {
			w := timerWorld(b, n)
			armed := max(n/100, 1)
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				if w.nextBoundary()-w.ts < 2*MaxClockStepMs {
					w.walkBefore(w.nextBoundary() + 2)
				}
				for k := range armed {
					a := (i*armed + k) % n
					c := mustCommand(b, CmdCancelAllAfter, 0, CancelAllAfterPayload{TimeoutMs: 5_000})
					c.Account, c.KeyID = benchAcct(a)
					w.mustOK(w.apply(c))
				}
				w.ts += 4_998
				w.print("BTCUSD", benchBTCMidQ8)
				restore := w.holdBack(w.ts+1, true, true)
				evs := timedTick(b, w, w.ts+1)
				restore()
				canceled := 0
				for _, ev := range evs {
					if ev.Kind == "order" {
						canceled++
					}
				}
				if canceled < armed {
					b.Fatalf("%d order events for %d armed switches", canceled, armed)
				}
				// Rest the orders again, untimed.
				rng := rand.New(rand.NewPCG(3, uint64(i)))
				for k := range armed {
					a := (i*armed + k) % n
					w.order(a, restingLimit(rng, fmt.Sprintf("ca%d-%d", i, k), "BTC-PERP", a%2 == 0, 1_000, benchBTCMidQ8, benchTickBTC))
				}
			}
		})
	}
}

// positions counts the open positions of every market.
func (w *benchWorld) positions() (n int) {
	w.m.Read(func(st *State, _ uint64) {
		for _, a := range st.Trade.Accounts {
			n += len(a.Positions)
		}
	})
	return n
}

// benchPoRMinutes times the entry at each minute's start (not a
// leaderboard's), where a Proof of Reserves tree is due; beside, that
// entry and the tree's publication on a machine whose trees a presetPoR
// builds.
func benchPoRMinutes(b *testing.B, w *benchWorld, beside bool) {
	if beside {
		var built *por.Snapshot
		w.m.Read(func(st *State, _ uint64) { built = BuildPoR(st) })
		w.m.opts.PoRBuilds = presetPoR{built}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	cadence := int64(growth.CadenceMinutes * 60_000)
	for i := 0; i < b.N; i++ {
		minute := (w.ts/60_000 + 1) * 60_000
		if minute%cadence == 0 {
			minute += 60_000
		}
		w.walkBefore(minute)
		timedTick(b, w, minute)
		if beside {
			timedTick(b, w, minute+por.PublishDelayMs)
		}
	}
}

// presetPoR stands in for a node's shadow (node/porbuild.go): every tree
// it is asked for is one built before the benchmark, at its time.
type presetPoR struct{ snap *por.Snapshot }

func (presetPoR) Want(uint64, int64, int) bool { return true }

func (p presetPoR) Await(_ uint64, tsMs int64) (*por.Snapshot, error) {
	s := *p.snap
	s.TsMs = tsMs
	return &s, nil
}
