package growth

import (
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
)

// activeHost numbers seqs; every account exists, signed up at created.
type activeHost struct{ seq, created uint64 }

func (h *activeHost) NextSeq() uint64                  { h.seq++; return h.seq }
func (h *activeHost) Emit(string, string, uint64, any) {}
func (h *activeHost) CreatedMs(string) (int64, bool)   { return int64(h.created), true }
func (h *activeHost) Equity(string) int64              { return 0 }

// TestActiveRefereeCountedOnceBetweenRecounts: referee A fills on day 0 at
// 10:00; the recount at the start of day 30 keeps it active (its fill is
// 29 days 14 hours old); B, C and D fill; A fills again at 11:00, when its
// old fill is just past the window. Four referees are active, not five.
// Below LevelReferralRecount the old count stands (five): a replica
// applies an older cluster's log as the build before did.
func TestActiveRefereeCountedOnceBetweenRecounts(t *testing.T) {
	for _, tc := range []struct {
		level uint32
		want  int64
	}{{LevelReferralRecount, 4}, {LevelReferralRecount - 1, 5}} {
		s := NewState()
		l := ledger.New()
		l.Balances[ledger.FeeRevenue] = 1 << 50
		const day0 = 20_000 * DayMs
		h := &activeHost{created: day0}
		env := func(now int64) *Env { return &Env{Ledger: l, NowMs: now, Seed: 1, Host: h, Level: tc.level} }
		if _, ref := s.CreateCode(env(day0), "referrer", "CODE"); ref != nil {
			t.Fatal(ref.Msg)
		}
		for _, x := range []string{"A", "B", "C", "D"} {
			if _, ref := s.Bind(env(day0+1), x, "CODE"); ref != nil {
				t.Fatal(ref.Msg)
			}
		}
		volume := func(string) int64 { return 1 << 30 }
		fill := func(now int64, acct string) {
			s.OnClock(env(now), volume)
			s.FeeSplit(env(now), &trade.Fill{AccountID: acct, FeeMsat: 1_000_000, TradeNotionalMsat: 1 << 31, Seq: h.NextSeq()})
		}
		fill(day0+10*3_600_000, "A")
		day30 := int64(day0 + 30*DayMs)
		s.OnClock(env(day30+1), volume)
		if got := s.Referrers["referrer"].Active; got != 1 {
			t.Fatalf("level %d: %d active after the recount, want 1", tc.level, got)
		}
		for _, x := range []string{"B", "C", "D"} {
			fill(day30+3_600_000, x)
		}
		fill(day30+11*3_600_000, "A")
		if got := s.Referrers["referrer"].Active; got != tc.want {
			t.Errorf("level %d: %d active referees, want %d", tc.level, got, tc.want)
		}
		// The next recount counts what is true either way: A, B, C and D
		// filled within the window.
		s.OnClock(env(day30+DayMs+1), volume)
		if got := s.Referrers["referrer"].Active; got != 4 {
			t.Errorf("level %d: %d active after the next recount, want 4", tc.level, got)
		}
	}
}
