package growth

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Env is what the programme needs for one entry: the ledger, the log
// time, the genesis seed (handles derive from it) and the Host.
type Env struct {
	Ledger *ledger.Ledger
	NowMs  int64
	Seed   uint64
	Host   Host
	// Level is the cluster's feature level (fsm.State.FeatureLevel): apply
	// behaviour that changed since the programme shipped is gated on it.
	Level uint32
}

// LevelReferralRecount is the feature level (fsm.FeatureLevel) from which
// a referee counts once as active between two daily recounts (FeeSplit).
const LevelReferralRecount uint32 = 3

// Host is the rest of the state machine, as the programme sees it: the
// shared seq space, the event queue and two reads of other domains. (An
// interface rather than closures: the fill path builds an Env per entry
// and should not allocate for it.)
type Host interface {
	NextSeq() uint64
	Emit(kind, accountID string, seq uint64, data any)
	// CreatedMs is an account's signup time (false: no such account).
	CreatedMs(accountID string) (int64, bool)
	// Equity is an account's ledger equity: free + reserved + margins.
	Equity(accountID string) int64
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

// reservedCodes are codes that speak with the venue's voice.
var reservedCodes = map[string]bool{"ADMIN": true, "SUPPORT": true, "STAFF": true, "TEAM": true, "HELP": true,
	"HELPDESK": true, "SYSTEM": true, "VENUE": true, "OPERATOR": true, "SECURITY": true, "MODERATOR": true, "COMPLIANCE": true}

// CheckCodeImpersonation refuses, at the API's edge, a new code (normalized)
// that poses as the venue: one naming it or claiming to be official, or a
// word of the venue's staff (trust review, 2026-11-27: anyone could create
// PERPD or OFFICIAL and hand it out as the venue's own). The state machine
// keeps NormalizeCode alone, so old logs apply as before, and codes made
// before stay valid to bind to.
//
// A code is upper case, where the digit 0 reads as O and 1 as I or L (the
// drawn alphabet leaves them all out for that reason), so each word is
// also looked for with those digits read as letters: "0FFICIAL", "SUPP0RT"
// and "HE1P" (growth review, 2026-11-28).
func CheckCodeImpersonation(norm string) *wire.Refusal {
	for _, one := range []string{"I", "L"} {
		read := strings.NewReplacer("0", "O", "1", one).Replace(norm)
		if strings.Contains(read, "PERPD") || strings.Contains(read, "OFFICIAL") || reservedCodes[read] {
			return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "code %s is reserved: a code may not pose as the venue", norm)
		}
	}
	return nil
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
	e := s.earnerOfCode(norm)
	if e.disabled() {
		return forbid("code %s is disabled", norm)
	}
	if e.promo != nil && e.promo.Status != PromoterApproved {
		return forbid("code %s belongs to a promoter not approved (yet)", norm)
	}
	r := e.acc
	if len(r.Referees) >= RefereesPerReferrerMax {
		return forbid("code %s has the most referees a code may have (%d)", norm, RefereesPerReferrerMax)
	}
	r.Referees = append(r.Referees, accountID)
	b := &Binding{Referrer: owner, Code: norm, BoundTsMs: env.NowMs, Seq: env.Host.NextSeq(), No: int64(len(r.Referees)),
		PolicyVersion: s.Policy.Version, Promoter: e.promo != nil}
	s.Bindings[accountID] = b
	if e.pcode != nil {
		e.pcode.Referees++
		e.promo.day(env.NowMs).Binds++
	}
	return BindResult{Bound: true, ReferredBy: s.referredByView(env.NowMs, b, env.Level >= LevelReferredByKickback)}, nil
}

// bindOpenUntil is the end of an account's bind window (false: unknown
// account).
func (s *State) bindOpenUntil(env *Env, accountID string) (int64, bool) {
	created, ok := env.Host.CreatedMs(accountID)
	if !ok {
		return 0, false
	}
	return created + s.Policy.BindWindowMs, true
}

// FeeSplit splits the fee of a referred account's fill (trade.Env.FeeSplit).
// The whole fee is in ledger.FeeRevenue when it runs. Formulas, each
// rounded down (in the venue's favour):
//
//	discount = grossFee * discountQ9 / 1e9 * discountedNotional / tradeNotional
//	net      = grossFee - discount
//	kickback = net * kickbackQ9 / 1e9                 (promoter codes only)
//	reward   = net * (shareQ9 - kickbackQ9) / 1e9
//
// discountedNotional is the trade notional still under the discount volume
// cap (all of it without a cap), while the discount window lasts. shareQ9
// is, for a referral code, the tier of the referrer's active referees
// (this fill counts its referee active), for a promoter code the policy's
// PromoterShareQ9, of which the code's kickbackQ9 goes to the referee.
// Discount and kickback go back to the referee's free balance (the fill's
// discountMsat is their sum); the reward goes to the earner's payable as
// an accrual of the fill's epoch day. Kickback and reward stop at the end
// of the reward window.
func (s *State) FeeSplit(env *Env, f *trade.Fill) *trade.Referral {
	b, ok := s.Bindings[f.AccountID]
	if !ok {
		return nil
	}
	p := &s.Policy
	now := env.NowMs
	gross := f.FeeMsat
	e := s.earnerOfCode(b.Code)
	r := e.acc
	if !s.countedActive(env, b) {
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
			d := mulDivFloor(mulDivFloor(gross, p.RefereeDiscountQ9, Q9), discounted, f.TradeNotionalMsat)
			out.DiscountMsat = min(d, gross)
			b.DiscountVolumeUsedMsat += discounted
		}
	}
	net := gross - out.DiscountMsat
	rewarding := live && !e.disabled() && now < b.BoundTsMs+p.RewardWindowMs
	var share, kickback int64
	if rewarding {
		share = p.shareFor(r.Active)
		if e.pcode != nil {
			kickback = mulDivFloor(net, e.pcode.KickbackQ9, Q9)
			share = p.PromoterShareQ9 - e.pcode.KickbackQ9
		}
		out.RewardMsat = mulDivFloor(net, share, Q9)
	}
	out.DiscountMsat += kickback
	transfer(env.Ledger, ledger.FeeRevenue, ledger.Free(f.AccountID), out.DiscountMsat)
	if e.promo != nil {
		d := e.promo.day(now)
		d.Fills++
		d.VolumeMsat += f.TradeNotionalMsat
		d.GrossFeeMsat += gross
		d.KickbackMsat += kickback
		d.RewardMsat += out.RewardMsat
	}
	if out.RewardMsat == 0 {
		return out
	}
	transfer(env.Ledger, ledger.FeeRevenue, e.payable, out.RewardMsat)
	day := dayOf(now)
	ev := &Earning{Seq: env.Host.NextSeq(), FillSeq: f.Seq, TsMs: now, Ref: "referee-" + strconv.FormatInt(b.No, 10),
		GrossFeeMsat: gross, NetFeeMsat: net, ShareQ9: share, RewardMsat: out.RewardMsat, Status: StatusAccrued,
		Day: day, Code: b.Code}
	r.Earnings = append(r.Earnings, ev)
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
	if i, found := slices.BinarySearch(list, e.key); !found {
		s.VestDays[day] = slices.Insert(list, i, e.key)
	}
	if e.promo != nil {
		env.Host.Emit("promoter_earning", b.Referrer, ev.Seq, NewEarningView(ev))
	} else {
		env.Host.Emit("referral_earning", b.Referrer, ev.Seq, NewEarningView(ev))
	}
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

// countedActive reports whether the referee of b is already in its
// earner's active count. Below LevelReferralRecount: when its last fill is
// inside the window now. That double-counted a referee the last recount
// kept (its fill was inside the window then) whose fill has since left
// the window: its next fill raised the count again, and the earner's tier
// and reward with it, until the next recount. From that level: when its
// last fill was inside the window at the last recount, or came after it
// (a fill after the recount raised the count). Until the first recount at
// that level the old rule stands.
func (s *State) countedActive(env *Env, b *Binding) bool {
	if b.LastFillTsMs == 0 {
		return false
	}
	if env.Level >= LevelReferralRecount && s.ActiveCountedTsMs != 0 {
		return b.LastFillTsMs >= s.ActiveCountedTsMs-ActiveWindowMs
	}
	return b.LastFillTsMs >= env.NowMs-ActiveWindowMs
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
		if env.Level >= LevelReferralRecount {
			s.ActiveCountedTsMs = now
		}
		for _, key := range s.earnerKeys() {
			r := s.earnerOfKey(key).acc
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
		for _, key := range s.VestDays[d] {
			s.vest(env, key, d, volume)
		}
		delete(s.VestDays, d)
	}
	s.VestedThroughDay = due
}

func (s *State) vest(env *Env, key string, day int64, volume func(string) int64) {
	e := s.earnerOfKey(key)
	r := e.acc
	if len(r.Pending) == 0 || r.Pending[0].Day != day {
		panic(fmt.Sprintf("growth: earner %s has no pending bucket of day %d to vest", key, day))
	}
	bk := r.Pending[0]
	r.Pending = r.Pending[1:]
	if len(r.Pending) == 0 {
		r.Pending = nil
	}
	var eligible bool
	if e.promo != nil {
		eligible = e.promo.Status == PromoterApproved
	} else {
		eligible = s.eligibility(env, key, volume).Eligible
	}
	if eligible {
		r.ClaimableMsat += bk.RewardMsat
		r.ClaimableAccruals += bk.Accruals
		return
	}
	transfer(env.Ledger, e.payable, ledger.FeeRevenue, bk.RewardMsat)
	r.ForfeitedMsat += bk.RewardMsat
	for _, ev := range r.Earnings {
		if ev.Day == day && ev.Status == StatusAccrued {
			ev.Status = StatusForfeited
		}
	}
}

// ClaimResult is SPEC's claim result.
type ClaimResult struct {
	ClaimedMsat wire.Int `json:"claimedMsat" unit:"msat"`
	Accruals    wire.Int `json:"accruals" unit:"int" doc:"how many accruals (one per rewarded fill) the claim paid"`
}

// Claim pays accountID's vested referral rewards to its free balance:
// all of them, once they reach the minimum claim.
func (s *State) Claim(env *Env, accountID string) (ClaimResult, *wire.Refusal) {
	if _, ok := s.Referrers[accountID]; !ok {
		return ClaimResult{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "this account has no referral code")
	}
	return s.claim(env, s.earnerOfKey(accountID), accountID)
}

func (s *State) claim(env *Env, e earner, accountID string) (ClaimResult, *wire.Refusal) {
	r := e.acc
	if r.ClaimableMsat < s.Policy.MinClaimMsat || r.ClaimableMsat == 0 {
		return ClaimResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict,
			"claimable %d msat is below the minimum claim of %d msat", r.ClaimableMsat, s.Policy.MinClaimMsat)
	}
	out := ClaimResult{ClaimedMsat: wire.Int(r.ClaimableMsat), Accruals: wire.Int(r.ClaimableAccruals)}
	transfer(env.Ledger, e.payable, ledger.Free(accountID), r.ClaimableMsat)
	r.ClaimedMsat += r.ClaimableMsat
	r.ClaimableMsat, r.ClaimableAccruals = 0, 0
	for _, ev := range r.Earnings {
		if ev.Status == StatusAccrued && ev.Day <= s.VestedThroughDay {
			ev.Status = StatusClaimed
		}
	}
	return out, nil
}

// earner is who a code pays: a referrer's or a promoter's accrual record,
// the payable that holds its rewards, and its key in VestDays (the account
// id; "p:" + the account id for a promoter).
type earner struct {
	key     string
	acc     *Referrer
	payable string
	promo   *Promoter
	pcode   *PromoterCode
}

func (e earner) disabled() bool {
	if e.pcode != nil {
		return e.pcode.Disabled
	}
	return e.acc.Disabled
}

const promoterKeyPrefix = "p:"

func (s *State) earnerOfCode(code string) earner {
	if pc, ok := s.PromoterCodes[code]; ok {
		e := s.earnerOfKey(promoterKeyPrefix + pc.Owner)
		e.pcode = pc
		return e
	}
	return s.earnerOfKey(s.Codes[code])
}

func (s *State) earnerOfKey(key string) earner {
	if id, ok := strings.CutPrefix(key, promoterKeyPrefix); ok {
		pr := s.Promoters[id]
		return earner{key: key, acc: &pr.Acc, payable: PromoterPayable, promo: pr}
	}
	return earner{key: key, acc: s.Referrers[key], payable: ReferralPayable}
}

// earnerKeys lists every earner's key, sorted.
func (s *State) earnerKeys() []string {
	keys := sortedKeys(s.Referrers)
	for _, id := range sortedKeys(s.Promoters) {
		keys = append(keys, promoterKeyPrefix+id)
	}
	return keys
}
