package checker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perpd/perpd/jepsen/history"
)

const hourH = 5 * FundingHourMs // the fixture's funding boundary

// newLogTimeFixture is a valid history around one funding boundary H, on
// nodes a and b. The log (seq order): 1 a deposit at H-10 s, 2 the fill of
// o1 at H-4 s, 3 t's funding flow at H (rate 100), 4 a liquidation at
// H+0.5 s, 5 the fill of o2 at H+3 s. In real time: o1 placed at 0-0.1 s,
// o2 at 7-7.1 s (both answered filled), key k1 minted at 8 s (log H+4 s),
// withdrawal w1 at 9 s (H+5 s), a cancel-all-after arm of 1 s at 10 s
// (deadline H+7 s).
func newLogTimeFixture() ([]history.Op, *Final) {
	var ops []history.Op
	write := func(id int, f, key string, callMs, retMs int64, done history.Op) {
		ops = append(ops, history.Op{ID: id, Type: history.Invoke, Process: id, F: f, Account: "t", IdemKey: key, Order: key,
			TimeoutMs: done.TimeoutMs, TimeNs: callMs * 1e6})
		done.ID, done.Type, done.Process, done.F, done.Account, done.IdemKey, done.TimeNs = id, history.OK, id, f, "t", key, retMs*1e6
		done.TimeoutMs = nil
		ops = append(ops, done)
	}
	write(1, history.FOrder, "o1", 0, 100, history.Op{OrderStatus: "filled"})
	write(2, history.FOrder, "o2", 7000, 7100, history.Op{OrderStatus: "filled"})
	write(3, history.FMint, "k1", 8000, 8100, history.Op{KeyID: "key1"})
	write(4, history.FWithdraw, "w1", 9000, 9100, history.Op{RailRef: "r1"})
	armed := true
	ops = append(ops, history.Op{ID: 5, Type: history.Invoke, Process: 5, F: history.FCancelAfter, Account: "t", IdemKey: "c1",
		TimeoutMs: history.Int64(1000), TimeNs: 10_000e6})
	ops = append(ops, history.Op{ID: 5, Type: history.OK, Process: 5, F: history.FCancelAfter, Account: "t", IdemKey: "c1",
		Armed: &armed, DeadlineTsMs: history.Int64(hourH + 7000), TimeNs: 10_100e6})
	ops = traffic(ops, 0, 10_100)
	for i := range ops {
		ops[i].Index = i
	}
	view := func() *TraderView {
		return &TraderView{
			Fills: []FillFinal{{OrderID: "o2", MarketID: "M", Seq: "5", TsMs: hourH + 3000},
				{OrderID: "o1", MarketID: "M", Seq: "2", TsMs: hourH - 4000}},
			Liquidations: []LiquidationFinal{{MarketID: "M", Seq: "4", TsMs: hourH + 500}},
			Funding:      []FundingFinal{{MarketID: "M", BoundaryTsMs: hourH, RateQ9: 100, Seq: "3"}},
		}
	}
	history := func() map[string][]FundingEntry {
		return map[string][]FundingEntry{"M": {{TsMs: hourH - FundingHourMs, RateQ9: 50}, {TsMs: hourH, RateQ9: 100}}}
	}
	final := &Final{
		Accounts: map[string]*AccountFinal{"t": {
			Deposits: []Deposit{{Seq: "1", RailRef: "d1", TsMs: hourH - 10_000}},
			Sessions: []Session{{KeyID: "key1", Label: "k1", CreatedTsMs: hourH + 4000}},
		}},
		Traders: map[string]*TraderFinal{"t": {Nodes: map[string]*TraderView{"a": view(), "b": view()}}},
		Withdrawers: map[string]*WithdrawerFinal{"t": {Nodes: map[string]*WithdrawerView{
			"a": {Withdrawals: []WithdrawalFinal{{IdemKey: "w1", RequestedTsMs: hourH + 5000}}}}}},
		MarketFunding: map[string]map[string][]FundingEntry{"a": history(), "b": history()},
		// o1 invoked at 0 s with log time H-4 s: log time is on the base
		// calendar throughout.
		LogTimeOriginMs: hourH - 4000,
	}
	return ops, final
}

// traffic appends grants acknowledged every 100 ms from fromMs to toMs:
// the writes that flow while a leader stamps, with no gap between them.
func traffic(ops []history.Op, fromMs, toMs int64) []history.Op {
	for at := fromMs; at <= toMs; at += 100 {
		id := 10_000 + len(ops)
		ops = append(ops,
			history.Op{ID: id, Index: len(ops), Type: history.Invoke, Process: id, F: history.FFaucet, Account: "g", IdemKey: fmt.Sprint("g", id), TimeNs: (at - 5) * 1e6},
			history.Op{ID: id, Index: len(ops) + 1, Type: history.OK, Process: id, F: history.FFaucet, Account: "g", IdemKey: fmt.Sprint("g", id), TimeNs: at * 1e6})
	}
	return ops
}

// mintAt appends key label minted at real time callMs (answered 100 ms
// later), its session created at log time tsMs.
func mintAt(ops []history.Op, f *Final, label string, callMs, tsMs int64) []history.Op {
	id := len(ops) + 100
	ops = append(ops,
		history.Op{ID: id, Index: len(ops), Type: history.Invoke, Process: id, F: history.FMint, Account: "t", IdemKey: label, TimeNs: callMs * 1e6},
		history.Op{ID: id, Index: len(ops) + 1, Type: history.OK, Process: id, F: history.FMint, Account: "t", IdemKey: label, KeyID: label, TimeNs: (callMs + 100) * 1e6})
	f.Accounts["t"].Sessions = append(f.Accounts["t"].Sessions, Session{KeyID: label, Label: label, CreatedTsMs: tsMs})
	return ops
}

func TestLogTimeAcceptsAValidHistory(t *testing.T) {
	ops, final := newLogTimeFixture()
	res, rep := LogTime(ops, final)
	if res.Verdict != Valid {
		t.Fatalf("valid history judged %s: %v", res.Verdict, res.Details)
	}
	if rep.Records != 4 || rep.Flows != 1 || rep.Observations != 5 || rep.Boundaries != 4 || rep.MaxTrailMs != 0 {
		t.Fatalf("report %+v", rep)
	}
	// Log time that fell 6 s behind in a 6 s outage (an election whose
	// new leader applied the last entries before it stamped) is within
	// the allowance; the same stamps with writes flowing all along are
	// not (TestLogTimeCatchesLogTimeFallingBehind).
	ops2 := mintAt(traffic(ops, 16_100, 16_500), final, "k2", 16_200, hourH+6000)
	if res, rep := LogTime(ops2, final); res.Verdict != Valid || rep.MaxTrailMs != 6200 {
		t.Fatalf("log time 6.2 s behind after a 6 s outage judged %s, trail %d ms: %v", res.Verdict, rep.MaxTrailMs, res.Details)
	}
	if res, _ := LogTime(traffic(ops2, 10_200, 16_000), final); res.Verdict != Violation {
		t.Fatalf("log time 6.2 s behind with no outage judged %s: %v", res.Verdict, res.Details)
	}
	final.Accounts["t"].Sessions = final.Accounts["t"].Sessions[:1]
	// Log time 4.9 s behind needs no outage (a few leadership transfers).
	ops2 = mintAt(traffic(ops, 10_200, 15_000), final, "k2", 15_000, hourH+6100)
	if res, rep := LogTime(ops2, final); res.Verdict != Valid || rep.MaxTrailMs != 4900 {
		t.Fatalf("log time 4.9 s behind judged %s, trail %d ms: %v", res.Verdict, rep.MaxTrailMs, res.Details)
	}
	// Without the base calendar (an older harness) nothing says how far
	// behind log time is.
	ops2 = mintAt(ops2, final, "k3", 60_000, hourH+6100)
	final.LogTimeOriginMs = 0
	if res, _ := LogTime(ops2, final); res.Verdict != Valid {
		t.Fatalf("without a base calendar judged %s: %v", res.Verdict, res.Details)
	}
	final.LogTimeOriginMs = hourH - 4000
	final.Accounts["t"].Sessions = final.Accounts["t"].Sessions[:1]
	// A node whose calendar clock was stepped changes none of this: only
	// what log time did is judged. A run without timestamps (an older
	// build) proves nothing and passes.
	for _, v := range final.Traders["t"].Nodes {
		for i := range v.Fills {
			v.Fills[i].TsMs = 0
		}
	}
	if res, _ := LogTime(ops, final); res.Verdict != Valid {
		t.Fatalf("history without fill timestamps judged %s: %v", res.Verdict, res.Details)
	}
}

func TestLogTimeCatchesPlantedBugs(t *testing.T) {
	views := func(f *Final) []*TraderView {
		return []*TraderView{f.Traders["t"].Nodes["a"], f.Traders["t"].Nodes["b"]}
	}
	for _, tc := range []struct {
		name, want string
		plant      func(ops []history.Op, f *Final)
	}{
		{"log time goes back along the log", "log time went back along the log", func(_ []history.Op, f *Final) {
			f.Accounts["t"].Deposits[0].TsMs = hourH - 3000 // seq 1 after seq 2's H-4 s
		}},
		{"one seq, two timestamps", "seq 2 is stamped", func(_ []history.Op, f *Final) {
			f.Traders["t"].Nodes["b"].Fills[1].TsMs = hourH - 3999
		}},
		{"boundary not a whole hour", "not a whole hour", func(_ []history.Op, f *Final) {
			for _, v := range views(f) {
				v.Funding[0].BoundaryTsMs = hourH + 1
			}
			for _, h := range f.MarketFunding {
				h["M"][1].TsMs = hourH + 1
			}
		}},
		{"funding settled before log time reached the boundary", "before log time reached it", func(_ []history.Op, f *Final) {
			for _, v := range views(f) {
				v.Liquidations[0].TsMs = hourH - 1
			}
		}},
		{"one boundary paid twice", "a position pays once per boundary", func(_ []history.Op, f *Final) {
			for _, v := range views(f) {
				v.Funding = append(v.Funding, FundingFinal{MarketID: "M", BoundaryTsMs: hourH, RateQ9: 100, Seq: "6"})
			}
		}},
		{"an older boundary paid after a newer one", "a position pays once per boundary, in order", func(_ []history.Op, f *Final) {
			for _, v := range views(f) {
				v.Funding = append(v.Funding, FundingFinal{MarketID: "M", BoundaryTsMs: hourH - FundingHourMs, RateQ9: 50, Seq: "6"})
			}
		}},
		{"boundary settled late, after records past it", "settled late, or twice", func(_ []history.Op, f *Final) {
			for _, v := range views(f) {
				v.Funding[0].Seq = "6"
			}
		}},
		{"flow of a boundary the market never recorded", "does not hold", func(_ []history.Op, f *Final) {
			f.MarketFunding["b"]["M"] = f.MarketFunding["b"]["M"][:1]
		}},
		{"flow at another rate than the boundary's", "history says", func(_ []history.Op, f *Final) {
			for _, v := range views(f) {
				v.Funding[0].RateQ9 = 101
			}
		}},
		{"nodes disagree on a boundary's rate", "has rate 100 on a but 7 on b", func(_ []history.Op, f *Final) {
			f.MarketFunding["b"]["M"][1].RateQ9 = 7
		}},
		{"a boundary recorded twice", "each boundary once, in order", func(_ []history.Op, f *Final) {
			f.MarketFunding["a"]["M"] = append(f.MarketFunding["a"]["M"], FundingEntry{TsMs: hourH, RateQ9: 100})
		}},
		{"log time jumps with a clock stepped ahead", "log time jumped", func(ops []history.Op, _ *Final) {
			// The arm at 10 s lands ten minutes of log time after the
			// write at 9 s.
			for i := range ops {
				if ops[i].F == history.FCancelAfter && ops[i].Type == history.OK {
					ops[i].DeadlineTsMs = history.Int64(hourH + 600_000)
				}
			}
		}},
		{"log time goes back against real time", "log time went back:", func(_ []history.Op, f *Final) {
			f.Accounts["t"].Sessions[0].CreatedTsMs = hourH - 4500 // minted after o1 filled at H-4 s
		}},
	} {
		ops, final := newLogTimeFixture()
		tc.plant(ops, final)
		res, _ := LogTime(ops, final)
		if res.Verdict != Violation || !strings.Contains(strings.Join(res.Details, "\n"), tc.want) {
			t.Errorf("%s: verdict %s, want a violation saying %q: %v", tc.name, res.Verdict, tc.want, res.Details)
		}
	}
}

// Log time that does not keep up with real time: a leader whose clock
// stalls, or that stamps from a calendar stepped behind (the FSM keeps
// log time from going back, so it stands still), or that runs slow.
// Neither goes back nor jumps; only the base calendar gives it away.
func TestLogTimeCatchesLogTimeFallingBehind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(ops []history.Op, f *Final) []history.Op
	}{
		{"a leader whose clock stalls after the arm", func(ops []history.Op, f *Final) []history.Op {
			ops = traffic(ops, 10_200, 30_000)
			for _, at := range []int64{12_000, 18_000, 24_000, 30_000} {
				ops = mintAt(ops, f, fmt.Sprintf("k%d", at), at, hourH+6000)
			}
			return ops
		}},
		{"log time at half the speed of real time", func(ops []history.Op, f *Final) []history.Op {
			ops = traffic(ops, 10_200, 40_000)
			for _, at := range []int64{20_000, 30_000, 40_000} {
				ops = mintAt(ops, f, fmt.Sprintf("k%d", at), at, hourH+6000+(at-10_000)/2)
			}
			return ops
		}},
	} {
		ops, final := newLogTimeFixture()
		ops = tc.plant(ops, final)
		res, _ := LogTime(ops, final)
		if res.Verdict != Violation || !strings.Contains(strings.Join(res.Details, "\n"), "log time fell behind") {
			t.Errorf("%s: verdict %s, want a violation saying log time fell behind: %v", tc.name, res.Verdict, res.Details)
		}
		for _, d := range res.Details {
			if strings.Contains(d, "went back") || strings.Contains(d, "jumped") {
				t.Errorf("%s: the other bounds fired too, so this case proves nothing new: %s", tc.name, d)
			}
		}
	}
}
