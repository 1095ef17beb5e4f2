package growth

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/perpd/perpd/fsm/wire"
)

// PromoterPayable holds promoters' rewards from the fill that earned them
// until they are claimed or forfeited, as ReferralPayable does for
// referrers.
const PromoterPayable = "venue:promoter_payable"

// Promoter programme terms and bounds (docs/decisions.md, issue 15).
const (
	// PromoterTermsVersion is the terms an application must accept.
	PromoterTermsVersion = "2026-11"
	// PromoterCodesMax bounds one promoter's codes.
	PromoterCodesMax = 20
	// PromoterDaysKept bounds a promoter's daily stats (newest kept).
	PromoterDaysKept = 90
	// Application bounds.
	ChannelsMax      = 10
	JurisdictionsMax = 50
	PlanLenMax       = 1000
	URLLenMax        = 200
	LabelLenMax      = 64
)

// Promoter statuses. Testnet approves at once; elsewhere an application
// waits (pending) for an operator. An operator may later revoke an
// approved promoter; refused and revoked are final.
const (
	PromoterPending  = "pending"
	PromoterApproved = "approved"
	PromoterRefused  = "refused"
	PromoterRevoked  = "revoked"
)

// LevelPromoterReview is the feature level (fsm.FeatureLevel) from which an
// operator can approve or refuse a pending application
// (fsm.CmdPromoterReview). Below it prod left every application pending
// for good: nothing could approve one.
const LevelPromoterReview uint32 = 8

// LevelReferredByKickback is the feature level from which a bind's answer
// shows the code's kickback beside the discount (ReferredByView); GET
// /v1/referral shows it at every level, a read not being in the log.
const LevelReferredByKickback uint32 = 8

// Review decisions: approve or refuse a pending application, revoke an
// approved promoter.
const (
	ReviewApprove = "approve"
	ReviewRefuse  = "refuse"
	ReviewRevoke  = "revoke"
)

// ReviewResult is what an operator's review answers.
type ReviewResult struct {
	AccountID  string `json:"accountId"`
	PromoterID string `json:"promoterId"`
	Status     string `json:"status" enum:"approved,refused,revoked"`
}

// Review applies an operator's decision to accountID's application:
// approve or refuse it while it is pending, revoke it once approved. A
// refused or revoked account does not apply again.
//
// Revoking disables every code of the promoter (docs/decisions.md, "Promoter
// revocation"), so the rules for a disabled code do the rest: no new
// referee binds to them, its referees' later fills pay neither kickback nor
// reward (they keep the programme's own referee discount, which the venue
// promised them, not the promoter), and its buckets still in their holdback
// are forfeited when they come due (a promoter's bucket vests only while it
// is approved). What had vested before stays claimable: the holdback is the
// window in which rewards can be refused.
func (s *State) Review(accountID, decision string) (ReviewResult, *wire.Refusal) {
	var from, to string
	switch decision {
	case ReviewApprove:
		from, to = PromoterPending, PromoterApproved
	case ReviewRefuse:
		from, to = PromoterPending, PromoterRefused
	case ReviewRevoke:
		from, to = PromoterApproved, PromoterRevoked
	default:
		return ReviewResult{}, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "decision must be %s, %s or %s",
			ReviewApprove, ReviewRefuse, ReviewRevoke)
	}
	p, ok := s.Promoters[accountID]
	if !ok {
		return ReviewResult{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "account %s has not applied to the promoter programme", accountID)
	}
	if p.Status != from {
		if from == PromoterApproved && p.Status == PromoterPending {
			return ReviewResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "the application %s is pending: refuse it instead", p.ID)
		}
		return ReviewResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "the application %s is %s already", p.ID, p.Status)
	}
	p.Status = to
	if to == PromoterRevoked {
		for _, code := range p.Codes {
			s.PromoterCodes[code].Disabled = true
		}
	}
	return ReviewResult{AccountID: accountID, PromoterID: p.ID, Status: to}, nil
}

// ChannelKinds are the accepted channel kinds.
var ChannelKinds = []string{"website", "x", "youtube", "telegram", "discord", "newsletter", "podcast", "other"}

// Channel is one place a promoter publishes.
type Channel struct {
	Kind     string `cbor:"1,keyasint" json:"kind"`
	URL      string `cbor:"2,keyasint" json:"url"`
	Audience string `cbor:"3,keyasint" json:"audience"`
}

// Promoter is an account in the promoter programme: its application, its
// codes, its accrual record (the referral shape) and its daily stats.
type Promoter struct {
	ID            string        `cbor:"1,keyasint"`
	DisplayName   string        `cbor:"2,keyasint"`
	Channels      []Channel     `cbor:"3,keyasint"`
	Plan          string        `cbor:"4,keyasint"`
	Jurisdictions []string      `cbor:"5,keyasint"`
	TermsVersion  string        `cbor:"6,keyasint"`
	Status        string        `cbor:"7,keyasint"`
	AppliedTsMs   int64         `cbor:"8,keyasint"`
	Codes         []string      `cbor:"9,keyasint,omitempty"`
	Acc           Referrer      `cbor:"10,keyasint"`
	Days          []PromoterDay `cbor:"11,keyasint,omitempty"`
}

// PromoterCode is a promoter's code with its kickback.
type PromoterCode struct {
	Owner       string `cbor:"1,keyasint"`
	Label       string `cbor:"2,keyasint"`
	KickbackQ9  int64  `cbor:"3,keyasint"`
	CreatedTsMs int64  `cbor:"4,keyasint"`
	Referees    int64  `cbor:"5,keyasint,omitempty"`
	Disabled    bool   `cbor:"6,keyasint,omitempty"`
}

// PromoterDay is one UTC day of a promoter's programme.
type PromoterDay struct {
	Day          int64 `cbor:"1,keyasint"`
	Binds        int64 `cbor:"2,keyasint,omitempty"`
	Fills        int64 `cbor:"3,keyasint,omitempty"`
	VolumeMsat   int64 `cbor:"4,keyasint,omitempty"`
	GrossFeeMsat int64 `cbor:"5,keyasint,omitempty"`
	KickbackMsat int64 `cbor:"6,keyasint,omitempty"`
	RewardMsat   int64 `cbor:"7,keyasint,omitempty"`
}

// day returns the promoter's bucket of the UTC day of nowMs.
func (p *Promoter) day(nowMs int64) *PromoterDay {
	d := dayOf(nowMs)
	if n := len(p.Days); n == 0 || p.Days[n-1].Day != d {
		p.Days = append(p.Days, PromoterDay{Day: d})
		if len(p.Days) > PromoterDaysKept {
			p.Days = p.Days[len(p.Days)-PromoterDaysKept:]
		}
	}
	return &p.Days[len(p.Days)-1]
}

// Application is a promoter application as decoded.
type Application struct {
	DisplayName          string    `cbor:"1,keyasint"`
	Channels             []Channel `cbor:"2,keyasint"`
	Plan                 string    `cbor:"3,keyasint"`
	Jurisdictions        []string  `cbor:"4,keyasint"`
	AcceptedTermsVersion string    `cbor:"5,keyasint"`
}

// ValidateApplication checks every field: a valid display name, 1 to
// ChannelsMax channels of a known kind with an http(s) URL and an
// audience, a plan of 1 to PlanLenMax characters, 1 to JurisdictionsMax
// ISO 3166-1 alpha-2 codes (upper case, no repeats), and the current terms.
func ValidateApplication(a Application) *wire.Refusal {
	bad := func(format string, args ...any) *wire.Refusal {
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, format, args...)
	}
	if ref := ValidateDisplayName(a.DisplayName); ref != nil {
		return ref
	}
	if len(a.Channels) == 0 || len(a.Channels) > ChannelsMax {
		return bad("channels: 1 to %d", ChannelsMax)
	}
	for i, c := range a.Channels {
		known := false
		for _, k := range ChannelKinds {
			known = known || c.Kind == k
		}
		if !known {
			return bad("channels[%d].kind: one of %s", i, strings.Join(ChannelKinds, ", "))
		}
		if len(c.URL) > URLLenMax || !(strings.HasPrefix(c.URL, "https://") || strings.HasPrefix(c.URL, "http://")) ||
			strings.ContainsAny(c.URL, " \t\r\n") || len(c.URL) < len("https://x.y") {
			return bad("channels[%d].url: an http(s) URL of at most %d characters", i, URLLenMax)
		}
		if n := utf8.RuneCountInString(strings.TrimSpace(c.Audience)); n == 0 || len(c.Audience) > LabelLenMax {
			return bad("channels[%d].audience: 1 to %d characters", i, LabelLenMax)
		}
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(a.Plan)); n == 0 || utf8.RuneCountInString(a.Plan) > PlanLenMax {
		return bad("plan: 1 to %d characters", PlanLenMax)
	}
	if len(a.Jurisdictions) == 0 || len(a.Jurisdictions) > JurisdictionsMax {
		return bad("jurisdictions: 1 to %d", JurisdictionsMax)
	}
	seen := map[string]bool{}
	for i, j := range a.Jurisdictions {
		if len(j) != 2 || j[0] < 'A' || j[0] > 'Z' || j[1] < 'A' || j[1] > 'Z' || seen[j] {
			return bad("jurisdictions[%d]: an ISO 3166-1 alpha-2 code in upper case, once", i)
		}
		seen[j] = true
	}
	if a.AcceptedTermsVersion != PromoterTermsVersion {
		return bad("acceptedTermsVersion: the current terms are %s", PromoterTermsVersion)
	}
	return nil
}

// ApplyResult is SPEC's apply result.
type ApplyResult struct {
	PromoterID string `json:"promoterId"`
	Status     string `json:"status" enum:"pending,approved"`
}

// Apply enrols accountID as a promoter (once); autoApprove on testnet.
func (s *State) Apply(env *Env, accountID string, a Application, autoApprove bool) (ApplyResult, *wire.Refusal) {
	if ref := ValidateApplication(a); ref != nil {
		return ApplyResult{}, ref
	}
	if p, ok := s.Promoters[accountID]; ok {
		return ApplyResult{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "this account applied already (%s, %s)", p.ID, p.Status)
	}
	status := PromoterPending
	if autoApprove {
		status = PromoterApproved
	}
	p := &Promoter{ID: "prm_" + strconv.FormatUint(env.Host.NextSeq(), 10), DisplayName: a.DisplayName, Channels: a.Channels,
		Plan: a.Plan, Jurisdictions: a.Jurisdictions, TermsVersion: a.AcceptedTermsVersion, Status: status, AppliedTsMs: env.NowMs}
	s.Promoters[accountID] = p
	return ApplyResult{PromoterID: p.ID, Status: p.Status}, nil
}

// NewPromoterCode is a promoter code request as decoded.
type NewPromoterCode struct {
	Code       string `cbor:"1,keyasint"`
	Label      string `cbor:"2,keyasint"`
	KickbackQ9 int64  `cbor:"3,keyasint"`
}

// PromoterCodeView is a promoter code (the 201 body of POST
// /v1/promoter/codes and an element of GET /v1/promoter/codes).
type PromoterCodeView struct {
	Code        string   `json:"code"`
	Label       string   `json:"label"`
	KickbackQ9  wire.Int `json:"kickbackQ9" unit:"q9" doc:"share of the net fee paid back to each referee, out of the promoter's share"`
	ShareQ9     wire.Int `json:"shareQ9" unit:"q9" doc:"the promoter's own share of the net fee: promoterShareQ9 less kickbackQ9"`
	CreatedTsMs wire.Int `json:"createdTsMs" unit:"ms"`
	Referees    wire.Int `json:"referees" unit:"int"`
	Disabled    bool     `json:"disabled"`
}

// PromoterCodes is the code list.
type PromoterCodes struct {
	Codes    []PromoterCodeView `json:"codes"`
	CodesMax wire.Int           `json:"codesMax" unit:"int" doc:"how many codes a promoter may hold"`
}

func (s *State) codeView(code string) PromoterCodeView {
	pc := s.PromoterCodes[code]
	return PromoterCodeView{Code: code, Label: pc.Label, KickbackQ9: wire.Int(pc.KickbackQ9),
		ShareQ9: wire.Int(s.Policy.PromoterShareQ9 - pc.KickbackQ9), CreatedTsMs: wire.Int(pc.CreatedTsMs),
		Referees: wire.Int(pc.Referees), Disabled: pc.Disabled}
}

// CreatePromoterCode adds a code to an approved promoter: a referral-code
// name (one namespace with referral codes), a label, and a kickback of at
// most MaxKickbackQ9.
func (s *State) CreatePromoterCode(env *Env, accountID string, req NewPromoterCode) (PromoterCodeView, *wire.Refusal) {
	norm, ref := NormalizeCode(req.Code)
	if ref != nil {
		return PromoterCodeView{}, ref
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(req.Label)); n == 0 || utf8.RuneCountInString(req.Label) > LabelLenMax {
		return PromoterCodeView{}, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "label: 1 to %d characters", LabelLenMax)
	}
	if req.KickbackQ9 < 0 || req.KickbackQ9 > s.Policy.MaxKickbackQ9 {
		return PromoterCodeView{}, wire.Refuse(http.StatusBadRequest, wire.CodeValidation,
			"kickbackQ9: 0 to %d (of the promoter's share %d)", s.Policy.MaxKickbackQ9, s.Policy.PromoterShareQ9)
	}
	p, ok := s.Promoters[accountID]
	if !ok {
		return PromoterCodeView{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "this account is not a promoter; apply first")
	}
	if p.Status != PromoterApproved {
		return PromoterCodeView{}, wire.Refuse(http.StatusForbidden, wire.CodeReferralForbidden, "the application is %s", p.Status)
	}
	if len(p.Codes) >= PromoterCodesMax {
		return PromoterCodeView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "a promoter holds at most %d codes", PromoterCodesMax)
	}
	if _, taken := s.Codes[norm]; taken {
		return PromoterCodeView{}, wire.Refuse(http.StatusConflict, wire.CodeConflict, "code %s is taken", norm)
	}
	s.Codes[norm] = accountID
	s.PromoterCodes[norm] = &PromoterCode{Owner: accountID, Label: req.Label, KickbackQ9: req.KickbackQ9, CreatedTsMs: env.NowMs}
	p.Codes = append(p.Codes, norm)
	return s.codeView(norm), nil
}

// PromoterClaim pays a promoter's vested rewards, as Claim does.
func (s *State) PromoterClaim(env *Env, accountID string) (ClaimResult, *wire.Refusal) {
	if _, ok := s.Promoters[accountID]; !ok {
		return ClaimResult{}, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "this account is not a promoter")
	}
	return s.claim(env, s.earnerOfKey(promoterKeyPrefix+accountID), accountID)
}

// PromoterView is GET /v1/promoter: the application, the terms, and the
// totals in the referral shape.
type PromoterView struct {
	PromoterID           string    `json:"promoterId"`
	Status               string    `json:"status" enum:"pending,approved,refused,revoked"`
	DisplayName          string    `json:"displayName"`
	Channels             []Channel `json:"channels"`
	Plan                 string    `json:"plan"`
	Jurisdictions        []string  `json:"jurisdictions"`
	AcceptedTermsVersion string    `json:"acceptedTermsVersion"`
	AppliedTsMs          wire.Int  `json:"appliedTsMs" unit:"ms"`
	ShareQ9              wire.Int  `json:"shareQ9" unit:"q9" doc:"the promoter share of the net fee, before a code's kickback"`
	MaxKickbackQ9        wire.Int  `json:"maxKickbackQ9" unit:"q9"`
	Codes                wire.Int  `json:"codes" unit:"int"`
	Referees             wire.Int  `json:"referees" unit:"int"`
	ActiveReferees       wire.Int  `json:"activeReferees" unit:"int"`
	LifetimeEarnedMsat   wire.Int  `json:"lifetimeEarnedMsat" unit:"msat"`
	ClaimableMsat        wire.Int  `json:"claimableMsat" unit:"msat"`
	PendingHoldbackMsat  wire.Int  `json:"pendingHoldbackMsat" unit:"msat"`
	ClaimedMsat          wire.Int  `json:"claimedMsat" unit:"msat"`
	ForfeitedMsat        wire.Int  `json:"forfeitedMsat" unit:"msat"`
	MinClaimMsat         wire.Int  `json:"minClaimMsat" unit:"msat"`
}

// PromoterOf renders accountID's promoter profile (false: not a promoter).
func (s *State) PromoterOf(accountID string) (PromoterView, bool) {
	p, ok := s.Promoters[accountID]
	if !ok {
		return PromoterView{}, false
	}
	var pending int64
	for _, b := range p.Acc.Pending {
		pending += b.RewardMsat
	}
	return PromoterView{PromoterID: p.ID, Status: p.Status, DisplayName: p.DisplayName, Channels: p.Channels, Plan: p.Plan,
		Jurisdictions: p.Jurisdictions, AcceptedTermsVersion: p.TermsVersion, AppliedTsMs: wire.Int(p.AppliedTsMs),
		ShareQ9: wire.Int(s.Policy.PromoterShareQ9), MaxKickbackQ9: wire.Int(s.Policy.MaxKickbackQ9),
		Codes: wire.Int(len(p.Codes)), Referees: wire.Int(len(p.Acc.Referees)), ActiveReferees: wire.Int(p.Acc.Active),
		LifetimeEarnedMsat: wire.Int(p.Acc.LifetimeMsat), ClaimableMsat: wire.Int(p.Acc.ClaimableMsat),
		PendingHoldbackMsat: wire.Int(pending), ClaimedMsat: wire.Int(p.Acc.ClaimedMsat),
		ForfeitedMsat: wire.Int(p.Acc.ForfeitedMsat), MinClaimMsat: wire.Int(s.Policy.MinClaimMsat)}, true
}

// CodesOf lists accountID's promoter codes in creation order.
func (s *State) CodesOf(accountID string) PromoterCodes {
	out := PromoterCodes{Codes: []PromoterCodeView{}, CodesMax: wire.Int(PromoterCodesMax)}
	if p, ok := s.Promoters[accountID]; ok {
		for _, c := range p.Codes {
			out.Codes = append(out.Codes, s.codeView(c))
		}
	}
	return out
}

// PromoterDayView is one day of promoter stats.
type PromoterDayView struct {
	DayTsMs      wire.Int `json:"dayTsMs" unit:"ms"`
	Binds        wire.Int `json:"binds" unit:"int" doc:"accounts that bound one of the codes"`
	Fills        wire.Int `json:"fills" unit:"int" doc:"fills of the referees"`
	VolumeMsat   wire.Int `json:"volumeMsat" unit:"msat" doc:"trade notional of those fills"`
	GrossFeeMsat wire.Int `json:"grossFeeMsat" unit:"msat"`
	KickbackMsat wire.Int `json:"kickbackMsat" unit:"msat"`
	RewardMsat   wire.Int `json:"rewardMsat" unit:"msat"`
}

// PromoterStats is GET /v1/promoter/stats: one row per UTC day of the
// last `days` (days without activity included as zeros), oldest first,
// and their totals.
type PromoterStats struct {
	Days   []PromoterDayView `json:"days"`
	Totals PromoterDayView   `json:"totals" doc:"sums over the days (dayTsMs: the first day)"`
}

// StatsOf renders the last days UTC days up to nowMs.
func (s *State) StatsOf(accountID string, nowMs int64, days int) PromoterStats {
	out := PromoterStats{Days: []PromoterDayView{}}
	p := s.Promoters[accountID]
	first := dayOf(nowMs) - int64(days-1)*DayMs
	out.Totals.DayTsMs = wire.Int(first)
	i := 0
	for d := first; d <= dayOf(nowMs); d += DayMs {
		v := PromoterDayView{DayTsMs: wire.Int(d)}
		if p != nil {
			for i < len(p.Days) && p.Days[i].Day < d {
				i++
			}
			if i < len(p.Days) && p.Days[i].Day == d {
				pd := p.Days[i]
				v = PromoterDayView{DayTsMs: wire.Int(d), Binds: wire.Int(pd.Binds), Fills: wire.Int(pd.Fills),
					VolumeMsat: wire.Int(pd.VolumeMsat), GrossFeeMsat: wire.Int(pd.GrossFeeMsat),
					KickbackMsat: wire.Int(pd.KickbackMsat), RewardMsat: wire.Int(pd.RewardMsat)}
			}
		}
		t := &out.Totals
		t.Binds += v.Binds
		t.Fills += v.Fills
		t.VolumeMsat += v.VolumeMsat
		t.GrossFeeMsat += v.GrossFeeMsat
		t.KickbackMsat += v.KickbackMsat
		t.RewardMsat += v.RewardMsat
		out.Days = append(out.Days, v)
	}
	return out
}

// PromoterEarnings is the promoter's earnings page (the referral shape).
func (s *State) PromoterEarnings(accountID string, beforeSeq uint64, limit int) EarningsPage {
	if p, ok := s.Promoters[accountID]; ok {
		return earningsPage(&p.Acc, beforeSeq, limit)
	}
	return EarningsPage{Earnings: []EarningView{}}
}
