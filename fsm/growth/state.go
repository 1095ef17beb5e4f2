package growth

import (
	"fmt"
	"math/big"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/perpd/perpd/fsm/ledger"
)

// ReferralPayable is the ledger account that holds referral rewards from
// the fill that earned them until they are claimed (to the referrer's free
// balance) or forfeited (back to ledger.FeeRevenue).
const ReferralPayable = "venue:referral_payable"

// DayMs is one UTC day; epoch days, reward buckets and leaderboard days
// start at multiples of it.
const DayMs = 86_400_000

// Q9 is 1.0 in q9 fixed point.
const Q9 = 1_000_000_000

// Bounds (every collection of State has one; docs/decisions.md, issue 15).
const (
	// EarningsKept is how many earning records a referrer keeps for the
	// earnings page (newest kept). Money never depends on them: the
	// buckets and totals of Referrer hold it.
	EarningsKept = 1000
	// RefereesPerReferrerMax bounds one code's referees; a bind beyond it
	// is referral_forbidden.
	RefereesPerReferrerMax = 10_000
	// CodeLenMin and CodeLenMax bound a referral code (A-Z, 0-9).
	CodeLenMin = 4
	CodeLenMax = 16
	// ActiveWindowMs: a referee is active while its last fill is at most
	// this old (counted at day granularity, see Referrer.Active).
	ActiveWindowMs = 30 * DayMs
	// EarnedDaysKept is how many days of earned totals a referrer keeps
	// (earned30dMsat).
	EarnedDaysKept = 30
)

// Policy is the referral programme's terms. Version changes whenever a
// term does; fills and earnings carry the version that priced them.
type Policy struct {
	Version int64 `cbor:"1,keyasint"`
	Enabled bool  `cbor:"2,keyasint"`
	// Paused: binds are refused and fills earn no discount or reward;
	// what accrued before still vests and can be claimed.
	Paused  bool   `cbor:"3,keyasint,omitempty"`
	ShareQ9 int64  `cbor:"4,keyasint"`
	Tiers   []Tier `cbor:"5,keyasint"`
	// RefereeDiscountQ9 of the gross fee goes back to the referee for
	// RefereeDiscountWindowMs after binding, on at most
	// RefereeDiscountVolumeCapMsat of trade notional (0: no cap).
	RefereeDiscountQ9            int64 `cbor:"6,keyasint"`
	RefereeDiscountWindowMs      int64 `cbor:"7,keyasint"`
	RefereeDiscountVolumeCapMsat int64 `cbor:"8,keyasint"`
	// RewardWindowMs: a referee's fills earn its referrer a reward for
	// this long after binding.
	RewardWindowMs int64 `cbor:"9,keyasint"`
	// HoldbackMs: rewards of epoch day D vest at D + DayMs + HoldbackMs.
	HoldbackMs   int64 `cbor:"10,keyasint"`
	MinClaimMsat int64 `cbor:"11,keyasint"`
	// BindWindowMs: an account may bind a code until this long after its
	// signup.
	BindWindowMs int64 `cbor:"12,keyasint"`
	// Referrer eligibility gates, checked when rewards vest.
	MinReferrerAgeMs           int64 `cbor:"13,keyasint"`
	MinReferrerVolumeContracts int64 `cbor:"14,keyasint"`
	// PromoterShareQ9 of the net fee goes to a promoter code's owner, less
	// the code's kickback (at most MaxKickbackQ9), which goes to the
	// referee.
	PromoterShareQ9 int64 `cbor:"15,keyasint"`
	MaxKickbackQ9   int64 `cbor:"16,keyasint"`
}

// Tier raises the referrer's share once it has MinActiveReferees active
// referees.
type Tier struct {
	MinActiveReferees int64 `cbor:"1,keyasint"`
	ShareQ9           int64 `cbor:"2,keyasint"`
}

// DefaultPolicy is the testnet programme (docs/decisions.md, issue 15).
func DefaultPolicy() Policy {
	return Policy{Version: 1, Enabled: true,
		ShareQ9: 200_000_000, // 20% of the net fee
		Tiers: []Tier{{MinActiveReferees: 0, ShareQ9: 200_000_000}, {MinActiveReferees: 5, ShareQ9: 250_000_000},
			{MinActiveReferees: 20, ShareQ9: 300_000_000}},
		RefereeDiscountQ9: 100_000_000, RefereeDiscountWindowMs: 30 * DayMs,
		RefereeDiscountVolumeCapMsat: 1_000 * 100_000_000_000,                                 // 1000 BTC of notional
		RewardWindowMs:               365 * DayMs, HoldbackMs: DayMs, MinClaimMsat: 1_000_000, // 1000 sats
		BindWindowMs:     7 * DayMs,
		MinReferrerAgeMs: 3_600_000, MinReferrerVolumeContracts: 100,
		PromoterShareQ9: 300_000_000, MaxKickbackQ9: 150_000_000}
}

// shareFor is the share of the highest tier an active count reaches.
func (p *Policy) shareFor(active int64) int64 {
	share := p.ShareQ9
	for _, t := range p.Tiers {
		if active >= t.MinActiveReferees {
			share = t.ShareQ9
		}
	}
	return share
}

// State is the referral programme and the leaderboards.
type State struct {
	Policy Policy `cbor:"1,keyasint"`
	// Codes maps a code to its owner.
	Codes     map[string]string    `cbor:"2,keyasint"`
	Referrers map[string]*Referrer `cbor:"3,keyasint"`
	// Bindings maps a referee to its binding (one per account, forever).
	Bindings map[string]*Binding `cbor:"4,keyasint"`
	// VestDays lists, per epoch day, the referrers with a pending bucket
	// of that day (ascending ids). A day leaves once it vested.
	VestDays map[int64][]string `cbor:"5,keyasint"`
	// VestedThroughDay: every bucket of this epoch day and earlier vested.
	VestedThroughDay int64 `cbor:"6,keyasint,omitempty"`
	// ActiveDay is the epoch day of the last recount of active referees.
	ActiveDay int64 `cbor:"7,keyasint,omitempty"`
	// ActiveCountedTsMs is the log time of that recount (from feature level
	// LevelReferralRecount on; 0 before): a referee it counted, or one
	// that filled since, stays counted until the next recount.
	ActiveCountedTsMs int64 `cbor:"11,keyasint,omitempty"`

	// Leaderboards (leaderboard.go).
	Board *Boards `cbor:"8,keyasint"`

	// Promoters by account, and promoter codes (promoter.go). Codes holds
	// promoter codes too: one namespace.
	Promoters     map[string]*Promoter     `cbor:"9,keyasint,omitempty"`
	PromoterCodes map[string]*PromoterCode `cbor:"10,keyasint,omitempty"`
}

// Referrer is an account that created a code: its referees, its reward
// buckets and totals, and its newest earning records.
type Referrer struct {
	Code     string   `cbor:"1,keyasint"`
	CodeTsMs int64    `cbor:"2,keyasint"`
	Disabled bool     `cbor:"3,keyasint,omitempty"`
	Referees []string `cbor:"4,keyasint,omitempty"` // bind order
	// Active counts referees with a fill in the last ActiveWindowMs: a
	// referee's first fill after a quiet spell raises it at once, the
	// daily recount lowers it.
	Active int64 `cbor:"5,keyasint,omitempty"`
	// Pending are the unvested rewards by epoch day, ascending.
	Pending           []Bucket `cbor:"6,keyasint,omitempty"`
	ClaimableMsat     int64    `cbor:"7,keyasint,omitempty"`
	ClaimableAccruals int64    `cbor:"8,keyasint,omitempty"`
	LifetimeMsat      int64    `cbor:"9,keyasint,omitempty"`
	ClaimedMsat       int64    `cbor:"10,keyasint,omitempty"`
	ForfeitedMsat     int64    `cbor:"11,keyasint,omitempty"`
	// Earnings are oldest first, at most EarningsKept.
	Earnings []*Earning `cbor:"12,keyasint,omitempty"`
	// Earned is the reward accrued per epoch day, ascending, at most
	// EarnedDaysKept days.
	Earned []Bucket `cbor:"13,keyasint,omitempty"`
}

// Bucket is the reward of one epoch day (and how many accruals made it).
type Bucket struct {
	Day        int64 `cbor:"1,keyasint"`
	RewardMsat int64 `cbor:"2,keyasint"`
	Accruals   int64 `cbor:"3,keyasint"`
}

// Binding is a referee's tie to a code.
type Binding struct {
	Referrer  string `cbor:"1,keyasint"`
	Code      string `cbor:"2,keyasint"`
	BoundTsMs int64  `cbor:"3,keyasint"`
	Seq       uint64 `cbor:"4,keyasint"`
	// No is the referee's number among its referrer's referees (from 1);
	// earnings name the referee by it ("referee-<No>"), never by account.
	No int64 `cbor:"5,keyasint"`
	// DiscountVolumeUsedMsat is the trade notional that took a discount.
	DiscountVolumeUsedMsat int64 `cbor:"6,keyasint,omitempty"`
	LastFillTsMs           int64 `cbor:"7,keyasint,omitempty"`
	PolicyVersion          int64 `cbor:"8,keyasint"`
	// Promoter: the code is a promoter code.
	Promoter bool `cbor:"9,keyasint,omitempty"`
}

// Earning statuses (SPEC section 3). A vested, unclaimed earning is still
// accrued; it is claimable.
const (
	StatusAccrued   = "accrued"
	StatusClaimed   = "claimed"
	StatusForfeited = "forfeited"
)

// Earning is one accrual: the reward a referee's fill earned.
type Earning struct {
	Seq          uint64 `cbor:"1,keyasint"`
	FillSeq      uint64 `cbor:"2,keyasint"`
	TsMs         int64  `cbor:"3,keyasint"`
	Ref          string `cbor:"4,keyasint"`
	GrossFeeMsat int64  `cbor:"5,keyasint"`
	NetFeeMsat   int64  `cbor:"6,keyasint"`
	ShareQ9      int64  `cbor:"7,keyasint"`
	RewardMsat   int64  `cbor:"8,keyasint"`
	Status       string `cbor:"9,keyasint"`
	Day          int64  `cbor:"10,keyasint"`
	Code         string `cbor:"11,keyasint"`
}

// NewState returns the programme with the default policy and empty boards.
func NewState() *State {
	s := &State{Policy: DefaultPolicy()}
	s.FillNil()
	return s
}

// FillNil gives a decoded state non-nil maps.
func (s *State) FillNil() {
	if s.Codes == nil {
		s.Codes = map[string]string{}
	}
	if s.Referrers == nil {
		s.Referrers = map[string]*Referrer{}
	}
	if s.Bindings == nil {
		s.Bindings = map[string]*Binding{}
	}
	if s.VestDays == nil {
		s.VestDays = map[int64][]string{}
	}
	if s.Promoters == nil {
		s.Promoters = map[string]*Promoter{}
	}
	if s.PromoterCodes == nil {
		s.PromoterCodes = map[string]*PromoterCode{}
	}
	if s.Board == nil {
		s.Board = newBoards()
	}
	s.Board.fillNil()
}

// OwedByAccount is what the programmes owe each earning account: its
// claimable and still-vesting referral and promoter rewards (the balances
// of ReferralPayable and PromoterPayable, attributed). Proof of Reserves
// counts them in the account's leaf: they are the venue's debts even
// before a claim moves them to the free balance.
func (s *State) OwedByAccount() map[string]int64 {
	out := map[string]int64{}
	for _, key := range s.earnerKeys() {
		e := s.earnerOfKey(key)
		id := strings.TrimPrefix(key, promoterKeyPrefix)
		out[id] += e.acc.ClaimableMsat
		for _, b := range e.acc.Pending {
			out[id] += b.RewardMsat
		}
	}
	return out
}

// CheckInvariants verifies that the referral payable holds exactly the
// pending and claimable rewards, that every pending bucket is listed under
// its vesting day, and that codes and referrers agree.
func (s *State) CheckInvariants(l *ledger.Ledger) error {
	owed := map[string]int64{}
	for _, key := range s.earnerKeys() {
		e := s.earnerOfKey(key)
		r := e.acc
		if e.promo == nil && s.Codes[r.Code] != key {
			return fmt.Errorf("growth: referrer %s's code %q maps to %q", key, r.Code, s.Codes[r.Code])
		}
		owed[e.payable] += r.ClaimableMsat
		for _, b := range r.Pending {
			owed[e.payable] += b.RewardMsat
			if _, ok := slices.BinarySearch(s.VestDays[b.Day], key); !ok {
				return fmt.Errorf("growth: earner %s's bucket of day %d is not listed to vest", key, b.Day)
			}
		}
		if r.ClaimableMsat < 0 || r.LifetimeMsat < r.ClaimedMsat+r.ForfeitedMsat+r.ClaimableMsat {
			return fmt.Errorf("growth: earner %s totals do not add up: %+v", key, *r)
		}
	}
	for _, payable := range []string{ReferralPayable, PromoterPayable} {
		if got := l.Balance(payable); got != owed[payable] {
			return fmt.Errorf("growth: %s holds %d, earners are owed %d", payable, got, owed[payable])
		}
	}
	for _, code := range sortedKeys(s.PromoterCodes) {
		pc := s.PromoterCodes[code]
		if s.Codes[code] != pc.Owner || s.Promoters[pc.Owner] == nil || pc.KickbackQ9 < 0 || pc.KickbackQ9 > s.Policy.MaxKickbackQ9 {
			return fmt.Errorf("growth: promoter code %s: %+v", code, *pc)
		}
	}
	if len(s.Codes) != len(s.Referrers)+len(s.PromoterCodes) {
		return fmt.Errorf("growth: %d codes, %d referrers, %d promoter codes", len(s.Codes), len(s.Referrers), len(s.PromoterCodes))
	}
	return s.Board.check()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// mulDivFloor returns floor(a*b/c) for a, b >= 0 and c > 0, through a
// 128-bit product; math/big only when the quotient would not fit 64 bits.
func mulDivFloor(a, b, c int64) int64 {
	if a < 0 || b < 0 || c <= 0 {
		panic(fmt.Sprintf("growth: mulDivFloor(%d, %d, %d)", a, b, c))
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi < uint64(c) {
		q, _ := bits.Div64(hi, lo, uint64(c))
		if q <= 1<<63-1 {
			return int64(q)
		}
	}
	var x big.Int
	x.Mul(big.NewInt(a), big.NewInt(b))
	x.Quo(&x, big.NewInt(c))
	if !x.IsInt64() {
		panic("growth: mulDivFloor overflow")
	}
	return x.Int64()
}

func dayOf(tsMs int64) int64 { return tsMs / DayMs * DayMs }
