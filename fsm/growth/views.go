package growth

import (
	"strconv"

	"github.com/perpd/perpd/fsm/wire"
)

// ProgramView is the status's program block.
type ProgramView struct {
	Enabled       bool     `json:"enabled"`
	Paused        bool     `json:"paused"`
	PolicyVersion wire.Int `json:"policyVersion" unit:"int"`
}

// TierView is one share tier.
type TierView struct {
	MinActiveReferees wire.Int `json:"minActiveReferees" unit:"int"`
	ShareQ9           wire.Int `json:"shareQ9" unit:"q9"`
}

// PolicyView is the status's policy block.
type PolicyView struct {
	ShareQ9                      wire.Int   `json:"shareQ9" unit:"q9" doc:"share of the net fee (gross fee less the referee discount) at the lowest tier"`
	ShareTiers                   []TierView `json:"shareTiers" doc:"the highest tier whose minActiveReferees the referrer reaches applies; active: a fill in the last 30 days"`
	RefereeDiscountQ9            wire.Int   `json:"refereeDiscountQ9" unit:"q9"`
	RefereeDiscountWindowMs      wire.Int   `json:"refereeDiscountWindowMs" unit:"ms"`
	RefereeDiscountVolumeCapMsat *wire.Int  `json:"refereeDiscountVolumeCapMsat" unit:"msat" doc:"trade notional that takes the discount; null: no cap"`
	RewardWindowMs               wire.Int   `json:"rewardWindowMs" unit:"ms" doc:"a referee's fills reward its referrer for this long after binding"`
	HoldbackMs                   wire.Int   `json:"holdbackMs" unit:"ms" doc:"rewards of a UTC day vest this long after the day ends"`
	MinClaimMsat                 wire.Int   `json:"minClaimMsat" unit:"msat"`
}

// GateView is one eligibility gate with its threshold and current value
// (in ms, msat or plain units, by the gate).
type GateView struct {
	Gate          string    `json:"gate" enum:"account_age,own_volume"`
	Met           bool      `json:"met"`
	ThresholdMs   *wire.Int `json:"thresholdMs,omitempty" unit:"ms"`
	CurrentMs     *wire.Int `json:"currentMs,omitempty" unit:"ms"`
	ThresholdMsat *wire.Int `json:"thresholdMsat,omitempty" unit:"msat"`
	CurrentMsat   *wire.Int `json:"currentMsat,omitempty" unit:"msat"`
	Threshold     *wire.Int `json:"threshold,omitempty" unit:"contracts"`
	Current       *wire.Int `json:"current,omitempty" unit:"contracts"`
}

// EligibilityView says whether the account's rewards vest (checked when
// they do; failing rewards are forfeited).
type EligibilityView struct {
	Eligible bool       `json:"eligible"`
	Gates    []GateView `json:"gates"`
}

// OwnCodeView is the account's own code.
type OwnCodeView struct {
	Code        string   `json:"code"`
	CreatedTsMs wire.Int `json:"createdTsMs" unit:"ms"`
	Disabled    bool     `json:"disabled"`
}

// ReferredByView is who referred the account, with its discount state.
type ReferredByView struct {
	Code                   string    `json:"code"`
	BoundTsMs              wire.Int  `json:"boundTsMs" unit:"ms"`
	DiscountQ9             wire.Int  `json:"discountQ9" unit:"q9"`
	DiscountExpiresTsMs    wire.Int  `json:"discountExpiresTsMs" unit:"ms"`
	DiscountVolumeCapMsat  *wire.Int `json:"discountVolumeCapMsat" unit:"msat"`
	DiscountVolumeUsedMsat wire.Int  `json:"discountVolumeUsedMsat" unit:"msat"`
	DiscountActive         bool      `json:"discountActive"`
	// The promoter code's kickback (docs/decisions.md, "The referee's
	// kickback is shown"): without these a referee of a promoter code
	// saw the programme's discount alone and was paid more than it.
	KickbackQ9          *wire.Int `json:"kickbackQ9,omitempty" unit:"q9" doc:"a promoter code's kickback: this share of the net fee (the gross fee less the discount) also comes back on each fill while kickbackActive; 0 for a referral code"`
	KickbackExpiresTsMs *wire.Int `json:"kickbackExpiresTsMs,omitempty" unit:"ms" doc:"when the kickback stops (the end of the code's reward window)"`
	KickbackActive      *bool     `json:"kickbackActive,omitempty" doc:"whether the next fill pays the kickback: a promoter code, not disabled, inside its window"`
}

// ShareView is the referrer's current tier.
type ShareView struct {
	ShareQ9 wire.Int `json:"shareQ9" unit:"q9"`
}

// StatsView is the referrer's figures.
type StatsView struct {
	Referees            wire.Int  `json:"referees" unit:"int"`
	ActiveReferees      wire.Int  `json:"activeReferees" unit:"int"`
	Tier                ShareView `json:"tier"`
	LifetimeEarnedMsat  wire.Int  `json:"lifetimeEarnedMsat" unit:"msat"`
	Earned30dMsat       wire.Int  `json:"earned30dMsat" unit:"msat"`
	ClaimableMsat       wire.Int  `json:"claimableMsat" unit:"msat"`
	PendingHoldbackMsat wire.Int  `json:"pendingHoldbackMsat" unit:"msat"`
	ClaimedMsat         wire.Int  `json:"claimedMsat" unit:"msat"`
	ForfeitedMsat       wire.Int  `json:"forfeitedMsat" unit:"msat"`
}

// BindWindowView is when the account may still bind a code.
type BindWindowView struct {
	OpenUntilTsMs wire.Int `json:"openUntilTsMs" unit:"ms"`
}

// StatusView is SPEC's referral status.
type StatusView struct {
	TsMs        wire.Int        `json:"tsMs" unit:"ms"`
	Program     ProgramView     `json:"program"`
	Policy      PolicyView      `json:"policy"`
	Eligibility EligibilityView `json:"eligibility"`
	Code        *OwnCodeView    `json:"code"`
	ReferredBy  *ReferredByView `json:"referredBy"`
	Stats       *StatsView      `json:"stats" doc:"null until the account has a code"`
	BindWindow  *BindWindowView `json:"bindWindow" doc:"null once bound or closed"`
}

// EarningView is SPEC's Earning.
type EarningView struct {
	Seq          wire.Int  `json:"seq" unit:"seq"`
	FillSeq      *wire.Int `json:"fillSeq" unit:"seq"`
	TsMs         wire.Int  `json:"tsMs" unit:"ms"`
	Ref          *string   `json:"ref" doc:"the referee, as referee-<n> in bind order; never its account"`
	GrossFeeMsat wire.Int  `json:"grossFeeMsat" unit:"msat"`
	NetFeeMsat   wire.Int  `json:"netFeeMsat" unit:"msat"`
	ShareQ9      wire.Int  `json:"shareQ9" unit:"q9"`
	RewardMsat   wire.Int  `json:"rewardMsat" unit:"msat"`
	Status       string    `json:"status" enum:"accrued,claimed,forfeited"`
	EpochDay     wire.Int  `json:"epochDay" unit:"ms" doc:"start of the UTC day of the accrual; its rewards vest at epochDay + 1 day + holdbackMs"`
	Code         *string   `json:"code"`
}

// NewEarningView renders an earning.
func NewEarningView(e *Earning) EarningView {
	v := EarningView{Seq: wire.Int(e.Seq), TsMs: wire.Int(e.TsMs), GrossFeeMsat: wire.Int(e.GrossFeeMsat),
		NetFeeMsat: wire.Int(e.NetFeeMsat), ShareQ9: wire.Int(e.ShareQ9), RewardMsat: wire.Int(e.RewardMsat),
		Status: e.Status, EpochDay: wire.Int(e.Day)}
	if e.FillSeq != 0 {
		v.FillSeq = wire.Ptr(int64(e.FillSeq))
	}
	if e.Ref != "" {
		ref := e.Ref
		v.Ref = &ref
	}
	if e.Code != "" {
		code := e.Code
		v.Code = &code
	}
	return v
}

// EarningsPage is SPEC's earnings page.
type EarningsPage struct {
	Earnings      []EarningView `json:"earnings"`
	NextBeforeSeq *wire.Int     `json:"nextBeforeSeq" unit:"seq"`
}

// RefereeView is one referee in the referees result (an addition to
// SPEC's shape): never its account id.
type RefereeView struct {
	Seq       wire.Int `json:"seq" unit:"seq" doc:"the bind's seq (the cursor)"`
	Ref       string   `json:"ref" doc:"referee-<n>, as in earnings"`
	BoundTsMs wire.Int `json:"boundTsMs" unit:"ms"`
	Active    bool     `json:"active" doc:"a fill in the last 30 days"`
}

// RefereesResult is SPEC's referees result: the count, plus the page.
type RefereesResult struct {
	Referees      wire.Int      `json:"referees" unit:"int" doc:"how many accounts bound this account's code"`
	Items         []RefereeView `json:"items" doc:"the page, newest bind first"`
	NextBeforeSeq *wire.Int     `json:"nextBeforeSeq" unit:"seq"`
}

// Status renders accountID's referral status at nowMs.
func (s *State) Status(env *Env, accountID string, volume func(string) int64) StatusView {
	p := &s.Policy
	v := StatusView{TsMs: wire.Int(env.NowMs),
		Program: ProgramView{Enabled: p.Enabled, Paused: p.Paused, PolicyVersion: wire.Int(p.Version)},
		Policy: PolicyView{ShareQ9: wire.Int(p.ShareQ9), RefereeDiscountQ9: wire.Int(p.RefereeDiscountQ9),
			RefereeDiscountWindowMs: wire.Int(p.RefereeDiscountWindowMs), RewardWindowMs: wire.Int(p.RewardWindowMs),
			HoldbackMs: wire.Int(p.HoldbackMs), MinClaimMsat: wire.Int(p.MinClaimMsat), ShareTiers: []TierView{}},
		Eligibility: s.eligibility(env, accountID, volume)}
	if p.RefereeDiscountVolumeCapMsat > 0 {
		v.Policy.RefereeDiscountVolumeCapMsat = wire.Ptr(p.RefereeDiscountVolumeCapMsat)
	}
	for _, t := range p.Tiers {
		v.Policy.ShareTiers = append(v.Policy.ShareTiers, TierView{MinActiveReferees: wire.Int(t.MinActiveReferees), ShareQ9: wire.Int(t.ShareQ9)})
	}
	if r, ok := s.Referrers[accountID]; ok {
		v.Code = &OwnCodeView{Code: r.Code, CreatedTsMs: wire.Int(r.CodeTsMs), Disabled: r.Disabled}
		var pending, earned30 int64
		for _, b := range r.Pending {
			pending += b.RewardMsat
		}
		for _, b := range r.Earned {
			if b.Day > env.NowMs-30*DayMs {
				earned30 += b.RewardMsat
			}
		}
		v.Stats = &StatsView{Referees: wire.Int(len(r.Referees)), ActiveReferees: wire.Int(r.Active),
			Tier: ShareView{ShareQ9: wire.Int(p.shareFor(r.Active))}, LifetimeEarnedMsat: wire.Int(r.LifetimeMsat),
			Earned30dMsat: wire.Int(earned30), ClaimableMsat: wire.Int(r.ClaimableMsat), PendingHoldbackMsat: wire.Int(pending),
			ClaimedMsat: wire.Int(r.ClaimedMsat), ForfeitedMsat: wire.Int(r.ForfeitedMsat)}
	}
	if b, ok := s.Bindings[accountID]; ok {
		v.ReferredBy = s.referredByView(env.NowMs, b, true)
	} else if until, ok := s.bindOpenUntil(env, accountID); ok && env.NowMs <= until && p.Enabled && !p.Paused {
		v.BindWindow = &BindWindowView{OpenUntilTsMs: wire.Int(until)}
	}
	return v
}

// referredByView renders b; withKickback adds the kickback fields (a
// bind's answer has them from LevelReferredByKickback, so that a replica
// of an older build stores the same answer below it).
func (s *State) referredByView(nowMs int64, b *Binding, withKickback bool) *ReferredByView {
	p := &s.Policy
	expires := b.BoundTsMs + p.RefereeDiscountWindowMs
	v := &ReferredByView{Code: b.Code, BoundTsMs: wire.Int(b.BoundTsMs), DiscountQ9: wire.Int(p.RefereeDiscountQ9),
		DiscountExpiresTsMs: wire.Int(expires), DiscountVolumeUsedMsat: wire.Int(b.DiscountVolumeUsedMsat)}
	active := p.Enabled && !p.Paused && nowMs < expires
	if c := p.RefereeDiscountVolumeCapMsat; c > 0 {
		v.DiscountVolumeCapMsat = wire.Ptr(c)
		active = active && b.DiscountVolumeUsedMsat < c
	}
	v.DiscountActive = active
	if withKickback {
		e := s.earnerOfCode(b.Code)
		var kick int64
		if e.pcode != nil {
			kick = e.pcode.KickbackQ9
		}
		until := b.BoundTsMs + p.RewardWindowMs
		on := kick > 0 && p.Enabled && !p.Paused && !e.disabled() && nowMs < until
		v.KickbackQ9, v.KickbackExpiresTsMs, v.KickbackActive = wire.Ptr(kick), wire.Ptr(until), &on
	}
	return v
}

// eligibility checks the referrer gates: account age and own traded
// volume (contracts, lifetime).
func (s *State) eligibility(env *Env, accountID string, volume func(string) int64) EligibilityView {
	p := &s.Policy
	created, _ := env.Host.CreatedMs(accountID)
	age := max(env.NowMs-created, 0)
	vol := volume(accountID)
	gates := []GateView{
		{Gate: "account_age", Met: age >= p.MinReferrerAgeMs, ThresholdMs: wire.Ptr(p.MinReferrerAgeMs), CurrentMs: wire.Ptr(age)},
		{Gate: "own_volume", Met: vol >= p.MinReferrerVolumeContracts, Threshold: wire.Ptr(p.MinReferrerVolumeContracts), Current: wire.Ptr(vol)},
	}
	v := EligibilityView{Eligible: true, Gates: gates}
	for _, g := range gates {
		v.Eligible = v.Eligible && g.Met
	}
	return v
}

// Earnings is accountID's referral earnings page, newest first, by seq.
func (s *State) Earnings(accountID string, beforeSeq uint64, limit int) EarningsPage {
	if r, ok := s.Referrers[accountID]; ok {
		return earningsPage(r, beforeSeq, limit)
	}
	return EarningsPage{Earnings: []EarningView{}}
}

func earningsPage(r *Referrer, beforeSeq uint64, limit int) EarningsPage {
	out := EarningsPage{Earnings: []EarningView{}}
	for i := len(r.Earnings) - 1; i >= 0; i-- {
		e := r.Earnings[i]
		if beforeSeq != 0 && e.Seq >= beforeSeq {
			continue
		}
		if len(out.Earnings) == limit {
			out.NextBeforeSeq = wire.Ptr(int64(out.Earnings[limit-1].Seq))
			break
		}
		out.Earnings = append(out.Earnings, NewEarningView(e))
	}
	return out
}

// RefereesPage is accountID's referees page, newest bind first.
func (s *State) RefereesPage(accountID string, nowMs int64, beforeSeq uint64, limit int) RefereesResult {
	out := RefereesResult{Items: []RefereeView{}}
	r, ok := s.Referrers[accountID]
	if !ok {
		return out
	}
	out.Referees = wire.Int(len(r.Referees))
	for i := len(r.Referees) - 1; i >= 0; i-- {
		b := s.Bindings[r.Referees[i]]
		if beforeSeq != 0 && b.Seq >= beforeSeq {
			continue
		}
		if len(out.Items) == limit {
			out.NextBeforeSeq = wire.Ptr(int64(out.Items[limit-1].Seq))
			break
		}
		out.Items = append(out.Items, RefereeView{Seq: wire.Int(b.Seq), Ref: "referee-" + strconv.FormatInt(b.No, 10), BoundTsMs: wire.Int(b.BoundTsMs),
			Active: b.LastFillTsMs != 0 && b.LastFillTsMs >= nowMs-ActiveWindowMs})
	}
	return out
}
