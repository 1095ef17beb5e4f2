package growth

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/bits"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/perpd/perpd/fsm/wire"
	"github.com/perpd/perpd/internal/par"
)

// Leaderboard bounds and defaults (docs/decisions.md, issue 15).
const (
	// CadenceMinutes is how often (log time) the boards are recomputed.
	CadenceMinutes = 15
	// BoardRowsMax is how many rows a board keeps and serves.
	BoardRowsMax = 100
	// TraderDaysKept bounds a trader's day buckets (the 30d window and
	// the equity curve need 30; the all window folds older days).
	TraderDaysKept = 31
	// CurveDays is the length of a profile's equity curve.
	CurveDays = 30
	// DisplayNameMax bounds a display name, in characters.
	DisplayNameMax = 32
	// IndexMaxQ9 caps the equity index (a return of 1e9-fold), so a
	// trader who put almost nothing at risk cannot overflow it.
	IndexMaxQ9 = 1_000_000_000 * Q9
)

// LevelRoiCountsDeposits is the feature level (fsm.FeatureLevel) from
// which a day's return base (Day.OpenEquityMsat) takes in capital
// deposited after the day's first event (Observe). Found by a review on
// 2026-11-27: below it such a deposit earned PnL over the small opening
// equity alone (0.01 BTC at the first fill, 1 BTC deposited, a 1% move:
// ROI +424%), so the roi board was won by whoever deposited after a dust
// trade.
const LevelRoiCountsDeposits uint32 = 8

// LevelBoardsAfterFunding is the feature level (fsm.FeatureLevel) from
// which the recompute (OnClockBoards) runs after the markets' timer of the
// same entry, so a recompute that falls on an hourly funding boundary
// counts that boundary's funding flows (fsm/growth_boards.go). Below it
// the boards of every full hour left them out until the next recompute.
const LevelBoardsAfterFunding uint32 = 8

// Board and window names, in the order of a trader's Ranks.
var (
	BoardNames  = []string{"pnl", "roi"}
	WindowNames = []string{"7d", "30d", "all"}
	windowDays  = []int64{7, 30, 0}
)

// Gates decide who may appear on a board, per window.
type Gates struct {
	MinEquityMsat      int64 `cbor:"1,keyasint"`
	MinTrades          int64 `cbor:"2,keyasint"`
	MinVolumeContracts int64 `cbor:"3,keyasint"`
}

// DefaultGates are the testnet gates.
func DefaultGates() Gates {
	return Gates{MinEquityMsat: 10_000_000, MinTrades: 3, MinVolumeContracts: 100}
}

// Boards is the leaderboard state: every trader's day buckets and the
// result of the last recompute.
type Boards struct {
	Traders map[string]*Trader `cbor:"1,keyasint"`
	// Handles maps a handle to its account.
	Handles      map[string]string `cbor:"2,keyasint"`
	ComputedTsMs int64             `cbor:"3,keyasint,omitempty"`
	NextTsMs     int64             `cbor:"4,keyasint,omitempty"`
	// Rows holds, per board ("pnl/7d" ...), the top BoardRowsMax accounts
	// in rank order, as of the last recompute less later opt-outs.
	Rows  map[string][]string `cbor:"5,keyasint"`
	Gates Gates               `cbor:"6,keyasint"`
}

// Trader is one account's leaderboard record, created by its first fill
// (or its first settings call).
type Trader struct {
	Handle      string `cbor:"1,keyasint"`
	DisplayName string `cbor:"2,keyasint,omitempty"`
	OptedOut    bool   `cbor:"3,keyasint,omitempty"`
	SinceTsMs   int64  `cbor:"4,keyasint,omitempty"`
	// Days are the newest day buckets, ascending, at most TraderDaysKept.
	Days []Day `cbor:"5,keyasint,omitempty"`
	// All holds all-time sums, and the equity index folded over every day
	// but the newest in Days.
	All Totals `cbor:"6,keyasint"`
	// Rev counts settings changes (the share card's ETag carries it).
	Rev int64 `cbor:"7,keyasint,omitempty"`
	// Snap is the trader as of the last recompute.
	Snap *Snap `cbor:"8,keyasint,omitempty"`

	// memo is what the last recompute folded (boards_memo.go): derived,
	// never encoded, empty in a decoded trader.
	memo boardMemo
}

// Day is one UTC day of a trader's results. PnL is the change of ledger
// equity that fills (realised PnL, a deficit the trader did not pay, less
// the fee after any referral discount), funding flows and liquidations
// (less the penalty) made; deposits and withdrawals are not PnL.
// OpenEquityMsat is the equity just before the day's first such event;
// from LevelRoiCountsDeposits it is the day's base, the largest of that
// and the opening equity plus net deposits before each later event.
type Day struct {
	Day            int64 `cbor:"1,keyasint"`
	PnlMsat        int64 `cbor:"2,keyasint,omitempty"`
	Volume         int64 `cbor:"3,keyasint,omitempty"`
	Trades         int64 `cbor:"4,keyasint,omitempty"`
	Wins           int64 `cbor:"5,keyasint,omitempty"`
	Closes         int64 `cbor:"6,keyasint,omitempty"`
	OpenEquityMsat int64 `cbor:"7,keyasint"`
}

// Totals are all-time sums plus the folded equity index.
type Totals struct {
	PnlMsat int64 `cbor:"1,keyasint,omitempty"`
	Volume  int64 `cbor:"2,keyasint,omitempty"`
	Trades  int64 `cbor:"3,keyasint,omitempty"`
	Wins    int64 `cbor:"4,keyasint,omitempty"`
	Closes  int64 `cbor:"5,keyasint,omitempty"`
	IndexQ9 int64 `cbor:"6,keyasint"`
	PeakQ9  int64 `cbor:"7,keyasint"`
	MaxDDQ9 int64 `cbor:"8,keyasint,omitempty"`
}

// Metrics are one window's figures.
type Metrics struct {
	PnlMsat int64 `cbor:"1,keyasint,omitempty"`
	RoiQ9   int64 `cbor:"2,keyasint,omitempty"`
	Volume  int64 `cbor:"3,keyasint,omitempty"`
	Trades  int64 `cbor:"4,keyasint,omitempty"`
	Wins    int64 `cbor:"5,keyasint,omitempty"`
	Closes  int64 `cbor:"6,keyasint,omitempty"`
	MaxDDQ9 int64 `cbor:"7,keyasint,omitempty"`
}

// Snap is a trader as of a recompute: metrics per window, ranks per board
// (board*3 + window; 0: not ranked), the equity curve.
type Snap struct {
	Windows []Metrics    `cbor:"1,keyasint"`
	Ranks   []int64      `cbor:"2,keyasint"`
	Curve   []CurvePoint `cbor:"3,keyasint,omitempty"`
}

// CurvePoint is the equity index at the end of a day.
type CurvePoint struct {
	Day     int64 `cbor:"1,keyasint"`
	IndexQ9 int64 `cbor:"2,keyasint"`
}

func newBoards() *Boards {
	return &Boards{Gates: DefaultGates()}
}

func (b *Boards) fillNil() {
	if b.Traders == nil {
		b.Traders = map[string]*Trader{}
	}
	if b.Handles == nil {
		b.Handles = map[string]string{}
	}
	if b.Rows == nil {
		b.Rows = map[string][]string{}
	}
}

func boardKey(board, window int) string { return BoardNames[board] + "/" + WindowNames[window] }

// check verifies that handles and traders agree and that rows hold only
// ranked, opted-in traders in rank order.
func (b *Boards) check() error {
	if len(b.Handles) != len(b.Traders) {
		return fmt.Errorf("growth: %d handles, %d traders", len(b.Handles), len(b.Traders))
	}
	// Any order will do: the first offender found is reported (sorting
	// every trader on each entry would dominate the tests' checks).
	for id, t := range b.Traders {
		if b.Handles[t.Handle] != id {
			return fmt.Errorf("growth: handle %s of %s maps to %s", t.Handle, id, b.Handles[t.Handle])
		}
		if len(t.Days) > TraderDaysKept {
			return fmt.Errorf("growth: trader %s keeps %d days", id, len(t.Days))
		}
	}
	for bi := range BoardNames {
		for wi := range WindowNames {
			for i, id := range b.Rows[boardKey(bi, wi)] {
				t := b.Traders[id]
				if t == nil || t.OptedOut || t.Snap == nil || t.Snap.Ranks[bi*3+wi] != int64(i+1) {
					return fmt.Errorf("growth: board %s row %d (%s) is not that trader's rank", boardKey(bi, wi), i+1, id)
				}
			}
		}
	}
	return nil
}

// handleWords make handles: adjective-animal-nnnn.
var (
	handleAdjectives = []string{"amber", "bold", "brisk", "calm", "clever", "cosmic", "crisp", "daring",
		"eager", "fierce", "fleet", "gentle", "golden", "grand", "hardy", "humble", "jolly", "keen", "lively",
		"lucky", "mellow", "mighty", "nimble", "noble", "patient", "plucky", "proud", "quick", "quiet", "rapid",
		"royal", "rustic", "scarlet", "serene", "sharp", "silent", "silver", "sly", "solar", "steady", "stout",
		"sunny", "swift", "tidal", "tranquil", "true", "vivid", "wild", "wise", "witty", "zesty", "azure",
		"bright", "coral", "dusky", "frosty", "hazel", "ivory", "jade", "lunar", "misty", "onyx", "polar", "ruby"}
	handleAnimals = []string{"badger", "bear", "bison", "crane", "crow", "deer", "dolphin", "eagle", "falcon",
		"ferret", "finch", "fox", "gecko", "goose", "hare", "hawk", "heron", "ibex", "jaguar", "koala", "lark",
		"lemur", "lion", "lynx", "marten", "mink", "moose", "newt", "ocelot", "orca", "otter", "owl", "panda",
		"panther", "parrot", "pelican", "puffin", "puma", "quail", "rabbit", "raven", "robin", "salmon", "seal",
		"shark", "sparrow", "stork", "swan", "tapir", "tiger", "toucan", "trout", "turtle", "viper", "walrus",
		"weasel", "whale", "wolf", "wombat", "yak", "zebra", "bobcat", "cougar", "dingo"}
)

// newHandle derives a handle from the genesis seed and the account id
// (SHA-256, so the id cannot be read back from it); a taken handle takes
// the next round of the hash.
func (b *Boards) newHandle(seed uint64, accountID string) string {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seed)
	for round := uint32(0); ; round++ {
		h := sha256.New()
		h.Write([]byte("perpd-handle\x00"))
		h.Write(s[:])
		var r [4]byte
		binary.BigEndian.PutUint32(r[:], round)
		h.Write(r[:])
		h.Write([]byte(accountID))
		sum := h.Sum(nil)
		adj := handleAdjectives[int(sum[0])%len(handleAdjectives)]
		animal := handleAnimals[int(sum[1])%len(handleAnimals)]
		n := binary.BigEndian.Uint16(sum[2:4]) % 10000
		handle := fmt.Sprintf("%s-%s-%04d", adj, animal, n)
		if _, taken := b.Handles[handle]; !taken {
			return handle
		}
	}
}

// trader returns accountID's record, creating it (with its handle).
func (b *Boards) trader(seed uint64, accountID string) *Trader {
	t, ok := b.Traders[accountID]
	if !ok {
		t = &Trader{Handle: b.newHandle(seed, accountID), All: Totals{IndexQ9: Q9, PeakQ9: Q9}}
		b.Traders[accountID] = t
		b.Handles[t.Handle] = accountID
	}
	return t
}

// Event is one PnL event of an account: a fill (trade), a funding flow or
// a liquidation (trade and close).
type Event struct {
	AccountID string
	// PnlMsat is the change of the account's ledger equity the event made.
	PnlMsat int64
	// Volume is contracts traded (closed + opened); Trade marks a fill or
	// a liquidation; Close one that closed contracts, Win one whose
	// realised PnL (before fees) was positive.
	Volume            int64
	Trade, Close, Win bool
}

// Observe adds an event to its account's day bucket at env.NowMs. The
// ledger already holds the event's money: the day's opening equity is the
// equity now less the event's PnL.
func (s *State) Observe(env *Env, ev Event) {
	b := s.Board
	// A trader on the board is a signed-up account (accounts are never
	// removed), so only a new one is looked up: venue accounts (the USDx
	// hedge) do not rank.
	t, ok := b.Traders[ev.AccountID]
	if !ok {
		if _, ok := env.Host.CreatedMs(ev.AccountID); !ok {
			return
		}
		t = b.trader(env.Seed, ev.AccountID)
	}
	if t.SinceTsMs == 0 && ev.Trade {
		t.SinceTsMs = env.NowMs
	}
	day := dayOf(env.NowMs)
	pre := env.Host.Equity(ev.AccountID) - ev.PnlMsat
	if n := len(t.Days); n == 0 || t.Days[n-1].Day != day {
		if n > 0 {
			t.All.IndexQ9, t.All.PeakQ9, t.All.MaxDDQ9 = foldDay(t.All.IndexQ9, t.All.PeakQ9, t.All.MaxDDQ9, t.Days[n-1])
		}
		t.Days = append(t.Days, Day{Day: day, OpenEquityMsat: pre})
		if len(t.Days) > TraderDaysKept {
			t.Days = slices.Delete(t.Days, 0, len(t.Days)-TraderDaysKept)
		}
	} else if env.Level >= LevelRoiCountsDeposits {
		// pre less the day's PnL so far is the opening equity plus what was
		// deposited (less withdrawn) since: capital that earns this event's
		// PnL joins the day's base, so a deposit after the day's first
		// event cannot inflate its return. Withdrawals never shrink it.
		d := &t.Days[len(t.Days)-1]
		d.OpenEquityMsat = max(d.OpenEquityMsat, pre-d.PnlMsat)
	}
	d := &t.Days[len(t.Days)-1]
	d.PnlMsat += ev.PnlMsat
	t.All.PnlMsat += ev.PnlMsat
	d.Volume += ev.Volume
	t.All.Volume += ev.Volume
	if ev.Trade {
		d.Trades++
		t.All.Trades++
	}
	if ev.Close {
		d.Closes++
		t.All.Closes++
		if ev.Win {
			d.Wins++
			t.All.Wins++
		}
	}
}

// Volume is an account's lifetime traded contracts (the referrer gate).
func (s *State) Volume(accountID string) int64 {
	if t, ok := s.Board.Traders[accountID]; ok {
		return t.All.Volume
	}
	return 0
}

// indexStep applies one day's return to the equity index:
//
//	index' = index * (openEquity + pnl) / openEquity
//
// rounded down, with openEquity at least 1 msat, floored at 0 and capped
// at IndexMaxQ9.
func indexStep(index int64, d Day) int64 {
	open := max(d.OpenEquityMsat, 1)
	end := open + d.PnlMsat
	if end <= 0 || index == 0 {
		return 0
	}
	if index > 0 {
		// Every operand positive: the exact 128-bit product and its
		// floor quotient, the value math/big gives (it cost a leaderboard
		// recompute three allocations per day folded, about 70 a trader).
		hi, lo := bits.Mul64(uint64(index), uint64(end))
		if hi >= uint64(open) {
			return IndexMaxQ9 // the quotient needs more than 64 bits
		}
		q, _ := bits.Div64(hi, lo, uint64(open))
		if q > IndexMaxQ9 {
			return IndexMaxQ9
		}
		return int64(q)
	}
	return indexStepBig(index, end, open)
}

// indexStepBig is indexStep's arithmetic in math/big, for an index below
// zero (which no fold makes).
func indexStepBig(index, end, open int64) int64 {
	var x big.Int
	x.Mul(big.NewInt(index), big.NewInt(end))
	x.Quo(&x, big.NewInt(open))
	if !x.IsInt64() || x.Int64() > IndexMaxQ9 {
		return IndexMaxQ9
	}
	return x.Int64()
}

// drawdownQ9 is (peak - index) / peak in q9, rounded up.
func drawdownQ9(peak, index int64) int64 {
	if peak <= 0 || index >= peak {
		return 0
	}
	if index >= 0 {
		// 0 < peak-index <= peak: the exact 128-bit (peak-index) x Q9
		// over peak, rounded up, at most Q9 (what math/big gives).
		hi, lo := bits.Mul64(uint64(peak-index), Q9)
		q, r := bits.Div64(hi, lo, uint64(peak))
		if r != 0 {
			q++
		}
		return int64(q)
	}
	return drawdownQ9Big(peak, index)
}

// drawdownQ9Big is drawdownQ9's arithmetic in math/big, for an index
// below zero (which no fold makes).
func drawdownQ9Big(peak, index int64) int64 {
	var x, m big.Int
	x.Mul(big.NewInt(peak-index), big.NewInt(Q9))
	x.QuoRem(&x, big.NewInt(peak), &m)
	if m.Sign() != 0 {
		x.Add(&x, big.NewInt(1))
	}
	return x.Int64()
}

// foldDay applies a day to an index, its running peak and the maximum
// drawdown.
func foldDay(index, peak, maxDD int64, d Day) (int64, int64, int64) {
	index = indexStep(index, d)
	peak = max(peak, index)
	return index, peak, max(maxDD, drawdownQ9(peak, index))
}

// windowMetrics folds the days of window wi ending at day today. The index
// starts at 1.0 at the window's start; "all" continues the folded index.
// roiQ9 = index at the end - 1.0.
func (t *Trader) windowMetrics(wi int, today int64) Metrics {
	if windowDays[wi] == 0 {
		return t.allWindow()
	}
	f := newWindowFold()
	for _, d := range t.Days {
		if inWindow(wi, d.Day, today) {
			f.add(d)
		}
	}
	return f.metrics()
}

// curve is the equity index at the end of each kept day of the last
// CurveDays, starting from 1.0.
func (t *Trader) curve(today int64) []CurvePoint {
	// Sized once (a recompute makes every trader's curve): still nil
	// when no day is in range, as the appends alone left it.
	n := 0
	for _, d := range t.Days {
		if inCurve(d.Day, today) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]CurvePoint, 0, n)
	index := int64(Q9)
	for _, d := range t.Days {
		if !inCurve(d.Day, today) {
			continue
		}
		index = indexStep(index, d)
		out = append(out, CurvePoint{Day: d.Day, IndexQ9: index})
	}
	return out
}

// inCurve says whether day is one of the curve's CurveDays ending today.
func inCurve(day, today int64) bool {
	return day > today-CurveDays*DayMs && day <= today
}

// passes says whether window metrics m at equity pass the three gates.
func (b *Boards) passes(m Metrics, equity int64) bool {
	g := b.Gates
	return equity >= g.MinEquityMsat && m.Trades >= g.MinTrades && m.Volume >= g.MinVolumeContracts
}

// OnClockBoards recomputes the boards when log time reaches the next cadence
// stamp: every trader's window metrics and curve, then per board the
// eligible opted-in traders ranked (pnl: PnL, then ROI; roi: ROI, then PnL;
// ties by handle), the top BoardRowsMax kept as rows.
//
// Both phases run on every core (par.For), as the Proof of Reserves trees
// do: a trader's refold reads the state and writes only that trader's
// record, and each of the six boards writes only its own rank of each
// candidate, so the result is the same however the work falls on cores
// (TestRecomputeWithMemosAsFromScratch runs it on one and on several).
func (s *State) OnClockBoards(env *Env) {
	b := s.Board
	if env.NowMs < b.NextTsMs {
		return
	}
	cadence := int64(CadenceMinutes * 60_000)
	b.ComputedTsMs = env.NowMs
	b.NextTsMs = (env.NowMs/cadence + 1) * cadence
	today := dayOf(env.NowMs)
	// A Go map is walked on one goroutine, so the traders are copied out
	// first. The walk's order cannot matter: each trader's snapshot is its
	// own, and each board's order is total (ties by handle, which is
	// unique), so no sorted copy of every id is made.
	ids := make([]string, 0, len(b.Traders))
	traders := make([]*Trader, 0, len(b.Traders))
	for id, t := range b.Traders {
		ids = append(ids, id)
		traders = append(traders, t)
	}
	passed := make([]uint8, len(traders)) // bit wi: eligible on window wi
	par.For(len(traders), boardsRefoldGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			passed[i] = b.refold(traders[i], ids[i], today, env.Host)
		}
	})
	// A candidate holds only what the ranking reads (40 bytes, not the
	// window's whole metrics), so the six sorts move a third of the bytes.
	counts := make([]int, len(WindowNames))
	for _, p := range passed {
		for wi := range counts {
			counts[wi] += int(p >> wi & 1)
		}
	}
	eligible := make([][]boardCand, len(WindowNames))
	for wi := range eligible {
		eligible[wi] = make([]boardCand, 0, counts[wi])
	}
	for i, p := range passed {
		for wi := range eligible {
			if p>>wi&1 != 0 {
				m := traders[i].Snap.Windows[wi]
				eligible[wi] = append(eligible[wi], boardCand{traders[i], ids[i], m.PnlMsat, m.RoiQ9})
			}
		}
	}
	boards := len(BoardNames) * len(WindowNames)
	grain := boards // small boards: one goroutine sorts all six
	if counts[0]+counts[1]+counts[2] >= boardsSortParallelFrom {
		grain = 1
	}
	rows := make([][]string, boards)
	par.For(boards, grain, func(lo, hi int) {
		var cs, slots []boardCand
		for k := lo; k < hi; k++ {
			cs, slots = inLastOrder(cs, slots, eligible[k%3], k)
			if k/3 == 0 {
				slices.SortFunc(cs, byPnl)
			} else {
				slices.SortFunc(cs, byRoi)
			}
			rows[k] = make([]string, 0, min(len(cs), BoardRowsMax))
			for i, c := range cs {
				c.t.Snap.Ranks[k] = int64(i + 1)
				if i < BoardRowsMax {
					rows[k] = append(rows[k], c.id)
				}
			}
		}
	})
	for k, r := range rows {
		b.Rows[boardKey(k/3, k%3)] = r
	}
}

// The recompute's work split over cores: a trader's refold is a few
// microseconds (an equity lookup in a ledger far larger than the cache,
// the newest day folded), so 4,096 of them are worth a core of their own;
// the six boards' sorts are split from 8,192 candidates in all. Tests
// lower both to run the parallel path on small states.
var (
	boardsRefoldGrain      = 4096
	boardsSortParallelFrom = 8192
)

// refold brings trader t's snapshot to today (its windows and curve; its
// ranks stay the last recompute's until the ranking, which starts each
// board from them) and returns the windows it is eligible on, one bit
// each, zeroing its ranks on the others. It writes only t's record, and
// reads the account's equity only when a window passes the other gates.
func (b *Boards) refold(t *Trader, id string, today int64, host Host) uint8 {
	snap := t.Snap
	if snap == nil || len(snap.Windows) != len(WindowNames) || len(snap.Ranks) != len(BoardNames)*len(WindowNames) {
		// A new trader (or a decoded snapshot of another shape):
		// a fresh snapshot, folded from every day.
		snap = &Snap{Windows: make([]Metrics, len(WindowNames)), Ranks: make([]int64, len(BoardNames)*len(WindowNames))}
		t.Snap, t.memo.ok = snap, false
	}
	// The snapshot is the trader's own (nothing else holds it), so it is
	// refolded in place: its windows and curve change only where the days
	// did.
	t.foldInto(snap, today)
	snap.Windows[2] = t.allWindow()
	var passed uint8
	equity, looked := int64(0), false
	for wi := range WindowNames {
		m := snap.Windows[wi]
		ok := !t.OptedOut && m.Trades >= b.Gates.MinTrades && m.Volume >= b.Gates.MinVolumeContracts
		if ok && !looked {
			equity, looked = host.Equity(id), true
		}
		if ok && b.passes(m, equity) {
			passed |= 1 << wi
			continue
		}
		for bi := range BoardNames {
			snap.Ranks[bi*3+wi] = 0
		}
	}
	return passed
}

// boardCand is a trader eligible on a window, as the ranking reads it.
type boardCand struct {
	t        *Trader
	id       string
	pnl, roi int64
}

// inLastOrder puts a board's candidates in the order of their ranks on it
// at the last recompute (k: board*3 + window), those it did not rank
// after them, reusing cs and slots. It only saves the sort work (the
// board's order moves little between recomputes, and the sort finishes
// an almost sorted input in a few passes): each board's order is total,
// so the sort gives the same order from any start.
func inLastOrder(cs, slots, eligible []boardCand, k int) ([]boardCand, []boardCand) {
	cs = cs[:0]
	n := len(eligible)
	slots = slices.Grow(slots[:0], n)[:n]
	clear(slots)
	// Ranks on a board are 1..n, distinct: a rank past the candidates
	// (the board lost some), or a slot taken twice (a state that broke
	// that), leaves the candidate to the tail.
	var tail []boardCand
	for _, c := range eligible {
		r := c.t.Snap.Ranks[k]
		if r < 1 || r > int64(n) || slots[r-1].t != nil {
			tail = append(tail, c)
			continue
		}
		slots[r-1] = c
	}
	for _, c := range slots {
		if c.t != nil {
			cs = append(cs, c)
		}
	}
	return append(cs, tail...), slots
}

// byPnl is the pnl boards' order: PnL, then ROI, descending; then handle
// and id ascending.
func byPnl(x, y boardCand) int { return rankOrder(x.pnl, x.roi, y.pnl, y.roi, x, y) }

// byRoi is the roi boards' order: ROI, then PnL, descending; then handle
// and id ascending.
func byRoi(x, y boardCand) int { return rankOrder(x.roi, x.pnl, y.roi, y.pnl, x, y) }

// rankOrder orders x (keys x1, x2) and y (keys y1, y2): first key, then
// second, descending; then handle and id ascending.
func rankOrder(x1, x2, y1, y2 int64, x, y boardCand) int {
	switch {
	case x1 != y1:
		return cmpDesc(x1, y1)
	case x2 != y2:
		return cmpDesc(x2, y2)
	}
	return byHandle(x, y)
}

func byHandle(x, y boardCand) int {
	if c := strings.Compare(x.t.Handle, y.t.Handle); c != 0 {
		return c
	}
	// Handles are unique (newHandle, checked by the invariants); the id
	// keeps the order total even if a state ever broke that, since
	// candidates come in map order.
	return strings.Compare(x.id, y.id)
}

func cmpDesc(a, b int64) int {
	if a > b {
		return -1
	}
	return 1
}

// SettingsRequest is a settings change: nil fields stay as they are;
// ClearName sets the display name to null.
type SettingsRequest struct {
	OptedOut    *bool   `cbor:"1,keyasint,omitempty"`
	DisplayName *string `cbor:"2,keyasint,omitempty"`
	ClearName   bool    `cbor:"3,keyasint,omitempty"`
}

// ValidateDisplayName checks a display name: 1 to DisplayNameMax
// characters of letters, digits, spaces and . _ - ' , no leading,
// trailing or double spaces.
func ValidateDisplayName(name string) *wire.Refusal {
	bad := func(why string) *wire.Refusal {
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "displayName %s", why)
	}
	n := utf8.RuneCountInString(name)
	if !utf8.ValidString(name) || n < 1 || n > DisplayNameMax {
		return bad(fmt.Sprintf("must have 1 to %d characters", DisplayNameMax))
	}
	if strings.TrimSpace(name) != name || strings.Contains(name, "  ") {
		return bad("must not start or end with a space or hold two in a row")
	}
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(" ._-'", r) {
			return bad("may hold only letters, digits, spaces and . _ - '")
		}
	}
	return nil
}

// handleShape is the shape of a generated handle (adjective-animal-NNNN).
var handleShape = regexp.MustCompile(`(?i)^[a-z]+-[a-z]+-[0-9]{4}$`)

// CheckDisplayNameImpersonation refuses, at the API's edge, display names
// that pass ValidateDisplayName but pose as someone else or show nothing
// (review of 2026-11-26): a handle's shape other than ownHandle (the card
// shows the display name as its headline, the handle small); the venue's
// name; letters that render blank (the Hangul fillers); fullwidth forms;
// Latin mixed with Cyrillic or Greek (lookalike letters). The state
// machine keeps ValidateDisplayName alone, so old logs apply as before.
func CheckDisplayNameImpersonation(name, ownHandle string) *wire.Refusal {
	bad := func(why string) *wire.Refusal {
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "displayName %s", why)
	}
	// Styled forms first (review of 2026-11-28): a mathematical bold
	// "perpd", mathematical digits in a handle, small capitals, ligatures
	// and sub- or superscript letters show as the plain letters the checks
	// below look for, without being them. NFKC maps each compatibility form
	// to its plain letter; a name it changes holds one.
	if r, ok := smallCapital(name); ok {
		return bad(fmt.Sprintf("may not hold small capital or phonetic letters (%U)", r))
	}
	if norm.NFKC.String(name) != name {
		if strings.ContainsFunc(name, func(r rune) bool { return r >= 0xFF00 && r <= 0xFFEF }) {
			return bad("may not hold fullwidth or halfwidth forms")
		}
		return bad("may not hold styled forms of letters or digits (mathematical, ligature, subscript or superscript)")
	}
	if handleShape.MatchString(name) && !strings.EqualFold(name, ownHandle) {
		return bad("may not look like a trader's handle")
	}
	if strings.Contains(strings.ToLower(name), "perpd") {
		return bad("may not name the venue")
	}
	var latin, lookalike bool
	for _, r := range name {
		switch {
		case r == 0x115F || r == 0x1160 || r == 0x3164 || r == 0xFFA0:
			return bad("may not hold letters that render blank")
		case r >= 0xFF00 && r <= 0xFFEF:
			return bad("may not hold fullwidth or halfwidth forms")
		case unicode.Is(unicode.Latin, r):
			latin = true
		case unicode.Is(unicode.Cyrillic, r) || unicode.Is(unicode.Greek, r):
			lookalike = true
		}
	}
	if latin && lookalike {
		return bad("may not mix Latin letters with Cyrillic or Greek ones")
	}
	return nil
}

// smallCapitals are the Latin small capital letters outside the block of
// them (U+1D00-1D2B, turned and small capital letters of phonetic
// notation): the IPA ones and Latin Extended-D's. NFKC leaves them as
// they are, and "\u1d18\u1d07\u0280\u1d18\u1d05" reads PERPD.
var smallCapitals = []rune{0x0262, 0x026A, 0x0274, 0x0276, 0x0280, 0x0281, 0x028F, 0x0299, 0x029B, 0x029C, 0x029F,
	0xA730, 0xA731, 0xA7AE, 0xA7AF}

// smallCapital returns the first small capital letter of name.
func smallCapital(name string) (rune, bool) {
	for _, r := range name {
		if (r >= 0x1D00 && r <= 0x1D2B) || slices.Contains(smallCapitals, r) {
			return r, true
		}
	}
	return 0, false
}

// Settings applies a settings change. Opting out takes the trader off
// every board at once (the traders ranked below move up); opting back in
// shows at the next recompute.
func (s *State) Settings(env *Env, accountID string, req SettingsRequest) *wire.Refusal {
	if req.DisplayName != nil {
		if ref := ValidateDisplayName(*req.DisplayName); ref != nil {
			return ref
		}
	}
	b := s.Board
	t := b.trader(env.Seed, accountID)
	t.Rev++
	switch {
	case req.ClearName:
		t.DisplayName = ""
	case req.DisplayName != nil:
		t.DisplayName = *req.DisplayName
	}
	if req.OptedOut != nil && *req.OptedOut != t.OptedOut {
		t.OptedOut = *req.OptedOut
		if t.OptedOut {
			b.unrank(accountID)
		}
	}
	return nil
}

// unrank takes a trader off every board: one walk of the traders moves
// those ranked below it up one on each board it held a rank on, and finds
// who now fills each board's last row. Ranks on a board are distinct and
// boards do not touch each other's ranks, so neither the walk's order nor
// doing the boards together can matter (the smallest id would win a tie,
// as in id order). It used to sort every trader's id, then walk them
// twice per board: 1.6 MB and 60 ms of apply per ranked trader's opt-out
// with 100,000 traders. A trader on no board (most of them) opts out
// without a walk, and a toggle repeated until the next recompute finds
// its ranks already 0.
func (b *Boards) unrank(accountID string) {
	t := b.Traders[accountID]
	if t.Snap == nil {
		return
	}
	type board struct {
		k           int
		rank, next  int64
		rows        []string
		fill        string
		found, room bool
	}
	on := make([]board, 0, len(t.Snap.Ranks))
	for k, rank := range t.Snap.Ranks {
		if rank == 0 {
			continue
		}
		t.Snap.Ranks[k] = 0
		rows := slices.DeleteFunc(b.Rows[boardKey(k/3, k%3)], func(id string) bool { return id == accountID })
		on = append(on, board{k: k, rank: rank, next: int64(len(rows) + 1), rows: rows, room: len(rows) < BoardRowsMax})
	}
	if len(on) == 0 {
		return
	}
	for id, o := range b.Traders {
		if o.Snap == nil {
			continue
		}
		for i := range on {
			x := &on[i]
			r := &o.Snap.Ranks[x.k]
			if *r > x.rank {
				*r--
			}
			if *r == x.next && (!x.found || id < x.fill) {
				x.fill, x.found = id, true
			}
		}
	}
	for _, x := range on {
		if x.room && x.found {
			x.rows = append(x.rows, x.fill)
		}
		b.Rows[boardKey(x.k/3, x.k%3)] = x.rows
	}
}
