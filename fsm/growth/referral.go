package growth

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Env is what the programme needs from the rest of the state for one
// entry: the ledger, the log time, the shared seq space, the event queue,
// and two reads of other domains.
type Env struct {
	Ledger  *ledger.Ledger
	NowMs   int64
	NextSeq func() uint64
	Emit    func(kind, accountID string, seq uint64, data any)
	// CreatedMs is an account's signup time (false: no such account).
	CreatedMs func(accountID string) (int64, bool)
	// Equity is an account's ledger equity: free + reserved + margins.
	Equity func(accountID string) int64
	// Seed is the cluster's genesis seed (handles derive from it).
	Seed uint64
}

func transfer(l *ledger.Ledger, from, to string, msat int64) {
	if msat == 0 {
		return
	}
	if err := l.Transfer(from, to, msat); err != nil {
		panic(fmt.Sprintf("growth: transfer %s -> %s %d: %v", from, to, msat, err))
	}
}

// NormalizeCode upper-cases a code and checks its length and alphabet
// (A-Z, 0-9).
func NormalizeCode(code string) (string, *wire.Refusal) {
	if len(code) < CodeLenMin || len(code) > CodeLenMax {
		return "", wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "a code has %d to %d characters", CodeLenMin, CodeLenMax)
	}
	b := []byte(code)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			return "", wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "a code holds only letters A-Z and digits 0-9")
		}
	}
	return string(b), nil
}

// CodeResult is SPEC's code create result.
type CodeResult struct {
	Code        string   `json:"code"`
	CreatedTsMs wire.Int `json:"createdTsMs" unit:"ms"`
}

// CreateCode gives accountID its code. An account has one code; a taken
// code (case-insensitive) is a conflict.
func (s *State) CreateCode(env *Env, accountID, code string) (CodeResult, *wire.Refusal) {
	if !s.Policy.Enabled {
		return CodeResult{}, wire.Refuse(http.StatusForbidden, wire.CodeReferralForbidden, "the referral programme is not enabled")
	}
	norm, ref := NormalizeCode(code)
	if ref != nil {
		return CodeResult{}, ref
	}
	if r, ok := s.Referrers[accountID]; ok {
		return CodeResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "this account already has code %s", r.Code)
	}
	if _, taken := s.Codes[norm]; taken {
		return CodeResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "code %s is taken", norm)
	}
	s.Codes[norm] = accountID
	s.Referrers[accountID] = &Referrer{Code: norm, CodeTsMs: env.NowMs}
	return CodeResult{Code: norm, CreatedTsMs: wire.Int(env.NowMs)}, nil
}

// BindResult is SPEC's bind result.
type BindResult struct {
	Bound      bool            `json:"bound"`
	ReferredBy *ReferredByView `json:"referredBy"`
}

// Bind ties accountID to code: within its bind window, never to its own
// code or to a code whose owner it (transitively) referred, and once.
func (s *State) Bind(env *Env, accountID, code string) (BindResult, *wire.Refusal) {
	norm, ref := NormalizeCode(code)
	if ref != nil {
		return BindResult{}, ref
	}
	if b, ok := s.Bindings[accountID]; ok {
		return BindResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "this account is already bound to code %s", b.Code)
	}
	owner, ok := s.Codes[norm]
	if !ok {
		return BindResult{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "code %s not found", norm)
	}
	forbid := func(format string, args ...any) (BindResult, *wire.Refusal) {
		return BindResult{}, wire.Refuse(http.StatusForbidden, wire.CodeReferralForbidden, format, args...)
	}
	if !s.Policy.Enabled || s.Policy.Paused {
		return forbid("the referral programme is paused")
	}
	if owner == accountID {
		return forbid("an account cannot bind its own code")
	}
	if until, ok := s.bindOpenUntil(env, accountID); !ok || env.NowMs > until {
		return forbid("the bind window closed %d ms after signup", s.Policy.BindWindowMs)
	}
	for up, n := owner, 0; n <= len(s.Bindings); n++ {
		b, ok := s.Bindings[up]
		if !ok {
			break
		}
		if b.Referrer == accountID {
			return forbid("code %s belongs to an account this account referred", norm)
		}
		up = b.Referrer
	}
	r := s.Referrers[owner]
	if r.Disabled {
		return forbid("code %s is disabled", norm)
	}
	if len(r.Referees) >= RefereesPerReferrerMax {
		return forbid("code %s has the most referees a code may have (%d)", norm, RefereesPerReferrerMax)
	}
	r.Referees = append(r.Referees, accountID)
	b := &Binding{Referrer: owner, Code: norm, BoundTsMs: env.NowMs, Seq: env.NextSeq(), No: int64(len(r.Referees)),
		PolicyVersion: s.Policy.Version}
	s.Bindings[accountID] = b
	return BindResult{Bound: true, ReferredBy: s.referredByView(env.NowMs, b)}, nil
}

// bindOpenUntil is the end of an account's bind window (false: unknown
// account).
func (s *State) bindOpenUntil(env *Env, accountID string) (int64, bool) {
	created, ok := env.CreatedMs(accountID)
	if !ok {
		return 0, false
	}
	return created + s.Policy.BindWindowMs, true
}

// FeeSplit splits the fee of a referred account's fill (trade.Env.FeeSplit).
// The whole fee is in ledger.FeeRevenue when it runs. Formulas, each
// rounded down (in the venue's favour):
//
//	discount = grossFee * discountQ9 * discountedNotional / (1e9 * tradeNotional)
//	reward   = (grossFee - discount) * shareQ9 / 1e9
//
// discountedNotional is the trade notional still under the discount volume
// cap (all of it without a cap), while the discount window lasts; shareQ9
// is the tier of the referrer's active referees (this fill counts its
// referee active). The discount goes back to the referee's free balance,
// the reward to ReferralPayable as an accrual of the fill's epoch day.
func (s *State) FeeSplit(env *Env, f *trade.Fill) *trade.Referral {
	b, ok := s.Bindings[f.AccountID]
	if !ok {
		return nil
	}
	p := &s.Policy
	now := env.NowMs
	gross := f.FeeMsat
	r := s.Referrers[b.Referrer]
	if b.LastFillTsMs == 0 || b.LastFillTsMs < now-ActiveWindowMs {
		r.Active++
	}
	b.LastFillTsMs = now
	out := &trade.Referral{Code: b.Code, GrossFeeMsat: gross, PolicyVersion: p.Version}
	live := p.Enabled && !p.Paused
	if live && now < b.BoundTsMs+p.RefereeDiscountWindowMs && f.TradeNotionalMsat > 0 {
		discounted := f.TradeNotionalMsat
		if cap := p.RefereeDiscountVolumeCapMsat; cap > 0 {
			discounted = max(0, min(discounted, cap-b.DiscountVolumeUsedMsat))
		}
		if discounted > 0 {
			// gross*discountQ9 fits 128 bits; the second step scales by
			// the discounted share of the notional, both floors.
			d := mulDivFloor(mulDivFloor(gross, p.RefereeDiscountQ9, Q9), discounted, f.TradeNotionalMsat)
			out.DiscountMsat = min(d, gross)
			b.DiscountVolumeUsedMsat += discounted
		}
	}
	transfer(env.Ledger, ledger.FeeRevenue, ledger.Free(f.AccountID), out.DiscountMsat)
	net := gross - out.DiscountMsat
	if !live || r.Disabled || now >= b.BoundTsMs+p.RewardWindowMs {
		return out
	}
	share := p.shareFor(r.Active)
	out.RewardMsat = mulDivFloor(net, share, Q9)
	if out.RewardMsat == 0 {
		return out
	}
	transfer(env.Ledger, ledger.FeeRevenue, ReferralPayable, out.RewardMsat)
	day := dayOf(now)
	e := &Earning{Seq: env.NextSeq(), FillSeq: f.Seq, TsMs: now, Ref: "referee-" + strconv.FormatInt(b.No, 10),
		GrossFeeMsat: gross, NetFeeMsat: net, ShareQ9: share, RewardMsat: out.RewardMsat, Status: StatusAccrued,
		Day: day, Code: b.Code}
	r.Earnings = append(r.Earnings, e)
	if len(r.Earnings) > EarningsKept {
		r.Earnings = r.Earnings[len(r.Earnings)-EarningsKept:]
	}
	r.LifetimeMsat += out.RewardMsat
	r.Pending = addToBucket(r.Pending, day, out.RewardMsat)
	r.Earned = addToBucket(r.Earned, day, out.RewardMsat)
	if len(r.Earned) > EarnedDaysKept {
		r.Earned = r.Earned[len(r.Earned)-EarnedDaysKept:]
	}
	list := s.VestDays[day]
	if i, found := slices.BinarySearch(list, b.Referrer); !found {
		s.VestDays[day] = slices.Insert(list, i, b.Referrer)
	}
	env.Emit("referral_earning", b.Referrer, e.Seq, NewEarningView(e))
	return out
}

// addToBucket adds to the bucket of day (days only grow: log time never
// runs backwards).
func addToBucket(bs []Bucket, day, msat int64) []Bucket {
	if n := len(bs); n > 0 && bs[n-1].Day == day {
		bs[n-1].RewardMsat += msat
		bs[n-1].Accruals++
		return bs
	}
	return append(bs, Bucket{Day: day, RewardMsat: msat, Accruals: 1})
}

// OnClock vests what the holdback released and, once a day, recounts
// active referees. Buckets of epoch day D vest at D + DayMs + HoldbackMs:
// claimable when the referrer passes the eligibility gates then, else
// forfeited back to fee revenue. Days vest in ascending order, referrers
// in id order.
func (s *State) OnClock(env *Env, volume func(accountID string) int64) {
	now := env.NowMs
	if today := dayOf(now); today > s.ActiveDay {
		s.ActiveDay = today
		for _, id := range sortedKeys(s.Referrers) {
			r := s.Referrers[id]
			r.Active = 0
			for _, ref := range r.Referees {
				if b := s.Bindings[ref]; b.LastFillTsMs != 0 && b.LastFillTsMs >= now-ActiveWindowMs {
					r.Active++
				}
			}
		}
	}
	// Day d vests once now >= d + DayMs + HoldbackMs: every day up to due.
	x := now - DayMs - s.Policy.HoldbackMs
	due := dayOf(x)
	if x < 0 || due <= s.VestedThroughDay {
		return
	}
	var days []int64
	for d := range s.VestDays {
		if d <= due {
			days = append(days, d)
		}
	}
	slices.Sort(days)
	for _, d := range days {
		for _, id := range s.VestDays[d] {
			s.vest(env, id, d, volume)
		}
		delete(s.VestDays, d)
	}
	s.VestedThroughDay = due
}

func (s *State) vest(env *Env, id string, day int64, volume func(string) int64) {
	r := s.Referrers[id]
	if len(r.Pending) == 0 || r.Pending[0].Day != day {
		panic(fmt.Sprintf("growth: referrer %s has no pending bucket of day %d to vest", id, day))
	}
	b := r.Pending[0]
	r.Pending = r.Pending[1:]
	if len(r.Pending) == 0 {
		r.Pending = nil
	}
	elig := s.eligibility(env, id, volume)
	if elig.Eligible {
		r.ClaimableMsat += b.RewardMsat
		r.ClaimableAccruals += b.Accruals
		return
	}
	transfer(env.Ledger, ReferralPayable, ledger.FeeRevenue, b.RewardMsat)
	r.ForfeitedMsat += b.RewardMsat
	for _, e := range r.Earnings {
		if e.Day == day && e.Status == StatusAccrued {
			e.Status = StatusForfeited
		}
	}
}

// ClaimResult is SPEC's claim result.
type ClaimResult struct {
	ClaimedMsat wire.Int `json:"claimedMsat" unit:"msat"`
	Accruals    wire.Int `json:"accruals" unit:"int" doc:"how many accruals (one per rewarded fill) the claim paid"`
}

// Claim pays accountID's vested rewards to its free balance: all of them,
// once they reach the minimum claim.
func (s *State) Claim(env *Env, accountID string) (ClaimResult, *wire.Refusal) {
	r, ok := s.Referrers[accountID]
	if !ok {
		return ClaimResult{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "this account has no referral code")
	}
	if r.ClaimableMsat < s.Policy.MinClaimMsat || r.ClaimableMsat == 0 {
		return ClaimResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"claimable %d msat is below the minimum claim of %d msat", r.ClaimableMsat, s.Policy.MinClaimMsat)
	}
	out := ClaimResult{ClaimedMsat: wire.Int(r.ClaimableMsat), Accruals: wire.Int(r.ClaimableAccruals)}
	transfer(env.Ledger, ReferralPayable, ledger.Free(accountID), r.ClaimableMsat)
	r.ClaimedMsat += r.ClaimableMsat
	r.ClaimableMsat, r.ClaimableAccruals = 0, 0
	for _, e := range r.Earnings {
		if e.Status == StatusAccrued && e.Day <= s.VestedThroughDay {
			e.Status = StatusClaimed
		}
	}
	return out, nil
}
