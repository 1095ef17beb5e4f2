package usdx

import (
	"sort"
	"strconv"

	"github.com/perpd/perpd/fsm/wire"
)

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func msPtr(v int64) *wire.Int {
	if v == 0 {
		return nil
	}
	return wire.Ptr(v)
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// QuoteView is SPEC's Quote.
type QuoteView struct {
	QuoteID     string   `json:"quoteId"`
	Side        string   `json:"side" enum:"mint,redeem"`
	Usdx        string   `json:"usdx" doc:"whole USDx"`
	Contracts   wire.Int `json:"contracts" unit:"contracts" doc:"hedge contracts opened (mint) or closed (redeem): one per USDx"`
	PriceQ8     wire.Int `json:"priceQ8" unit:"q8" doc:"the hedge's execution price: the oracle mid less (mint) or plus (redeem) the spread"`
	SpreadQ9    wire.Int `json:"spreadQ9" unit:"q9"`
	FeeMsat     wire.Int `json:"feeMsat" unit:"msat" doc:"base fee plus the hedge's taker fee"`
	DynFeeMsat  wire.Int `json:"dynFeeMsat" unit:"msat" doc:"dynamic fee from params.dynFeeCurve at the utilisation after the mint (0 for redemptions)"`
	ImpactMsat  wire.Int `json:"impactMsat" unit:"msat" doc:"what the skew impact adds to the price (included in priceQ8, reported)"`
	SatsMsat    wire.Int `json:"satsMsat" unit:"msat" doc:"mint: what the trader pays in all; redeem: what the trader receives"`
	ExpiresAtMs wire.Int `json:"expiresAtMs" unit:"ms"`
	OracleTsMs  wire.Int `json:"oracleTsMs" unit:"ms"`
}

// NewQuoteView renders a quote.
func NewQuoteView(q *Quote) QuoteView {
	return QuoteView{QuoteID: q.ID, Side: q.Side, Usdx: itoa(q.Usdx), Contracts: wire.Int(q.Usdx), PriceQ8: wire.Int(q.PriceQ8),
		SpreadQ9: wire.Int(q.SpreadQ9), FeeMsat: wire.Int(q.FeeMsat), DynFeeMsat: wire.Int(q.DynFeeMsat),
		ImpactMsat: wire.Int(q.ImpactMsat), SatsMsat: wire.Int(q.SatsMsat), ExpiresAtMs: wire.Int(q.ExpiresAtMs),
		OracleTsMs: wire.Int(q.OracleTsMs)}
}

// SagaView is SPEC's Saga.
type SagaView struct {
	SagaID        string    `json:"sagaId"`
	Side          string    `json:"side" enum:"mint,redeem"`
	State         string    `json:"state" enum:"hedging,minted,queued,redeeming,paid"`
	Usdx          string    `json:"usdx"`
	Contracts     wire.Int  `json:"contracts" unit:"contracts"`
	SatsMsat      wire.Int  `json:"satsMsat" unit:"msat" doc:"mint: paid; redeem: received (0 while queued)"`
	QueuedReason  *string   `json:"queuedReason"`
	QueuedSinceMs *wire.Int `json:"queuedSinceMs" unit:"ms"`
	CreatedTsMs   wire.Int  `json:"createdTsMs" unit:"ms"`
	UpdatedTsMs   wire.Int  `json:"updatedTsMs" unit:"ms"`
}

// NewSagaView renders a saga.
func NewSagaView(s *Saga) SagaView {
	v := SagaView{SagaID: s.ID, Side: s.Side, State: s.State, Usdx: itoa(s.Usdx), Contracts: wire.Int(s.Contracts),
		SatsMsat: wire.Int(s.SatsMsat), QueuedReason: strPtr(s.QueuedReason), CreatedTsMs: wire.Int(s.CreatedTsMs),
		UpdatedTsMs: wire.Int(s.UpdatedTsMs)}
	if s.State == SagaQueued {
		v.QueuedSinceMs = msPtr(s.QueuedSinceMs)
	}
	return v
}

// UnstakeView is one unstake (GET /v1/usdx/unstakes, POST /v1/usdx/unstake).
type UnstakeView struct {
	UnstakeID    string    `json:"unstakeId"`
	Susdx        string    `json:"susdx"`
	State        string    `json:"state" enum:"cooling,released"`
	RequestedMs  wire.Int  `json:"requestedTsMs" unit:"ms"`
	ReleaseAtMs  wire.Int  `json:"releaseAtMs" unit:"ms"`
	ReleasedUsdx *string   `json:"releasedUsdx" doc:"USDx received at release: floor(susdx x staked / sUSDx supply); null while cooling"`
	ReleasedTsMs *wire.Int `json:"releasedTsMs" unit:"ms"`
	ReleasedMsat *wire.Int `json:"releasedEscrowMsat,omitempty" unit:"msat" doc:"the release's part of the yield escrow, paid to the free balance: floor(susdx x yieldEscrowMsat / sUSDx supply); present once released at feature level 5 or above"`
}

// NewUnstakeView renders an unstake.
func NewUnstakeView(u *Unstake) UnstakeView {
	v := UnstakeView{UnstakeID: u.ID, Susdx: itoa(u.Susdx), State: "cooling", RequestedMs: wire.Int(u.RequestedMs), ReleaseAtMs: wire.Int(u.ReleaseAtMs)}
	if u.Released {
		v.State = "released"
		r := itoa(u.ReleasedUsdx)
		v.ReleasedUsdx, v.ReleasedTsMs = &r, wire.Ptr(u.ReleaseAtMs)
		if u.InKind {
			v.ReleasedMsat = wire.Ptr(u.ReleasedMsat)
		}
	}
	return v
}

// UnstakesView is GET /v1/usdx/unstakes: cooling first, by release time,
// then released ones.
type UnstakesView struct {
	Unstakes []UnstakeView `json:"unstakes"`
	Cooling  string        `json:"cooling" doc:"sUSDx cooling in all"`
}

// Unstakes renders an account's unstakes.
func (s *State) Unstakes(accountID string) UnstakesView {
	out := UnstakesView{Unstakes: []UnstakeView{}}
	h := s.Holder(accountID)
	var cooling int64
	var cool, done []*Unstake
	for _, u := range h.Unstakes {
		if u.Released {
			done = append(done, u)
		} else {
			cool = append(cool, u)
			cooling += u.Susdx
		}
	}
	sort.SliceStable(cool, func(i, j int) bool { return cool[i].ReleaseAtMs < cool[j].ReleaseAtMs })
	for _, u := range append(cool, done...) {
		out.Unstakes = append(out.Unstakes, NewUnstakeView(u))
	}
	out.Cooling = itoa(cooling)
	return out
}

// WithdrawalView is SPEC's USDx withdrawal.
type WithdrawalView struct {
	WithdrawalID  string    `json:"withdrawalId"`
	Usdx          string    `json:"usdx"`
	SparkAddress  string    `json:"sparkAddress"`
	State         string    `json:"state" enum:"requested,paid"`
	IssuerRef     *string   `json:"issuerRef"`
	RequestedTsMs wire.Int  `json:"requestedTsMs" unit:"ms"`
	PaidTsMs      *wire.Int `json:"paidTsMs" unit:"ms"`
}

// NewWithdrawalView renders a USDx withdrawal.
func NewWithdrawalView(w *Withdrawal) WithdrawalView {
	return WithdrawalView{WithdrawalID: w.ID, Usdx: itoa(w.Usdx), SparkAddress: w.SparkAddress, State: w.State,
		IssuerRef: strPtr(w.IssuerRef), RequestedTsMs: wire.Int(w.RequestedTsMs), PaidTsMs: msPtr(w.PaidTsMs)}
}

// WithdrawalsView is GET /v1/usdx/withdrawals, newest first.
type WithdrawalsView struct {
	Withdrawals []WithdrawalView `json:"withdrawals"`
}

// WithdrawalsOf renders an account's USDx withdrawals, newest first.
func (s *State) WithdrawalsOf(accountID string) WithdrawalsView {
	out := WithdrawalsView{Withdrawals: []WithdrawalView{}}
	h := s.Holder(accountID)
	for i := len(h.Withdrawals) - 1; i >= 0; i-- {
		if w := s.Withdrawals[h.Withdrawals[i]]; w != nil {
			out.Withdrawals = append(out.Withdrawals, NewWithdrawalView(w))
		}
	}
	return out
}

// FreezeView is SPEC's freeze log entry.
type FreezeView struct {
	Seq           wire.Int  `json:"seq" unit:"seq"`
	OpID          *string   `json:"opId"`
	SparkAddress  string    `json:"sparkAddress"`
	Action        string    `json:"action" enum:"freeze,unfreeze"`
	State         string    `json:"state" enum:"requested,applied"`
	Reason        *string   `json:"reason"`
	IssuerRef     *string   `json:"issuerRef"`
	ImpactedMicro *wire.Int `json:"impactedMicro" unit:"int"`
	TsMs          wire.Int  `json:"tsMs" unit:"ms"`
	AppliedTsMs   *wire.Int `json:"appliedTsMs" unit:"ms"`
	Recovered     bool      `json:"recovered"`
}

// NewFreezeView renders a freeze log entry.
func NewFreezeView(f Freeze) FreezeView {
	v := FreezeView{Seq: wire.Int(f.Seq), OpID: strPtr(f.OpID), SparkAddress: f.SparkAddress, Action: f.Action, State: f.State,
		Reason: strPtr(f.Reason), IssuerRef: strPtr(f.IssuerRef), TsMs: wire.Int(f.TsMs), AppliedTsMs: msPtr(f.AppliedTsMs), Recovered: f.Recovered}
	if f.HasImpacted {
		v.ImpactedMicro = wire.Ptr(f.ImpactedMicro)
	}
	return v
}

// FreezesView is GET /v1/usdx/freezes: the log, newest first, and the
// frozen addresses.
type FreezesView struct {
	Freezes []FreezeView `json:"freezes"`
	Frozen  []string     `json:"frozen"`
}

// FreezeLog renders the freeze log.
func (s *State) FreezeLog() FreezesView {
	out := FreezesView{Freezes: []FreezeView{}, Frozen: append([]string{}, s.Frozen...)}
	for i := len(s.Freezes) - 1; i >= 0; i-- {
		out.Freezes = append(out.Freezes, NewFreezeView(s.Freezes[i]))
	}
	return out
}

// AttestationView is SPEC's lastAttestation.
type AttestationView struct {
	AsOfTsMs      string `json:"asOfTsMs" unit:"ms"`
	IssuerSupply  string `json:"issuerSupply"`
	IssuerIssued  string `json:"issuerIssued"`
	IssuerBurned  string `json:"issuerBurned"`
	IssuerCustody string `json:"issuerCustody"`
	LedgerSupply  string `json:"ledgerSupply"`
	LedgerCustody string `json:"ledgerCustody"`
	OK            bool   `json:"ok"`
}

// NewAttestationView renders an attestation.
func NewAttestationView(a Attestation) AttestationView {
	return AttestationView{AsOfTsMs: itoa(a.AsOfTsMs), IssuerSupply: itoa(a.IssuerSupply), IssuerIssued: itoa(a.IssuerIssued),
		IssuerBurned: itoa(a.IssuerBurned), IssuerCustody: itoa(a.IssuerCustody), LedgerSupply: itoa(a.LedgerSupply),
		LedgerCustody: itoa(a.LedgerCustody), OK: a.OK}
}

// ActivityView is one element of GET /v1/usdx/activity.
type ActivityView struct {
	Seq      wire.Int  `json:"seq" unit:"seq"`
	TsMs     wire.Int  `json:"tsMs" unit:"ms"`
	Kind     string    `json:"kind" enum:"mint,redeem,redeem_returned,stake,unstake,unstake_release,withdrawal,deposit"`
	Ref      *string   `json:"ref" doc:"saga, unstake or withdrawal id"`
	Usdx     *string   `json:"usdx"`
	Susdx    *string   `json:"susdx"`
	SatsMsat *wire.Int `json:"satsMsat" unit:"msat"`
	State    *string   `json:"state"`
}

// NewActivityView renders an activity record.
func NewActivityView(a Activity) ActivityView {
	v := ActivityView{Seq: wire.Int(a.Seq), TsMs: wire.Int(a.TsMs), Kind: a.Event, Ref: strPtr(a.Ref), State: strPtr(a.State)}
	if a.Usdx != 0 {
		u := itoa(a.Usdx)
		v.Usdx = &u
	}
	if a.Susdx != 0 {
		u := itoa(a.Susdx)
		v.Susdx = &u
	}
	if a.SatsMsat != 0 {
		v.SatsMsat = wire.Ptr(a.SatsMsat)
	}
	return v
}

// ActivityPage is GET /v1/usdx/activity.
type ActivityPage struct {
	Activity      []ActivityView `json:"activity"`
	NextBeforeSeq *wire.Int      `json:"nextBeforeSeq" unit:"seq"`
}

// ActivityOf pages an account's activity newest first, before seq
// beforeSeq (0: from the newest).
func (s *State) ActivityOf(accountID string, beforeSeq uint64, limit int) ActivityPage {
	out := ActivityPage{Activity: []ActivityView{}}
	acts := s.Holder(accountID).Activity
	i := len(acts) - 1
	for i >= 0 && beforeSeq != 0 && acts[i].Seq >= beforeSeq {
		i--
	}
	for ; i >= 0 && len(out.Activity) < limit; i-- {
		out.Activity = append(out.Activity, NewActivityView(acts[i]))
	}
	if i >= 0 && len(out.Activity) > 0 {
		out.NextBeforeSeq = wire.Ptr(int64(acts[i+1].Seq))
	}
	return out
}

// WaterfallView is SPEC's waterfall entry (plus the loss breakdown).
type WaterfallView struct {
	BoundaryTsMs       wire.Int `json:"boundaryTsMs" unit:"ms"`
	MarkQ8             wire.Int `json:"markQ8" unit:"q8"`
	FlowMsat           wire.Int `json:"flowMsat" unit:"msat" doc:"the hedge's funding at the boundary: > 0 received, < 0 paid"`
	ToReserveMsat      wire.Int `json:"toReserveMsat" unit:"msat"`
	ToStakersMsat      wire.Int `json:"toStakersMsat" unit:"msat"`
	OverflowMsat       wire.Int `json:"overflowMsat" unit:"msat" doc:"the stakers' part when no sUSDx exists; goes to the reserve"`
	ShortfallMsat      wire.Int `json:"shortfallMsat" unit:"msat" doc:"the loss the reserve above its floor could not cover"`
	Markdown           string   `json:"markdown" doc:"USDx of the staking pool burnt to cover the shortfall"`
	YieldMinted        string   `json:"yieldMinted" doc:"USDx minted into the staking pool"`
	SharePriceQ9Before wire.Int `json:"sharePriceQ9Before" unit:"q9"`
	SharePriceQ9After  wire.Int `json:"sharePriceQ9After" unit:"q9"`
	FromReserveMsat    wire.Int `json:"fromReserveMsat" unit:"msat"`
	FromEscrowMsat     wire.Int `json:"fromEscrowMsat" unit:"msat"`
	UncoveredMsat      wire.Int `json:"uncoveredMsat" unit:"msat"`
	RepaidMsat         wire.Int `json:"repaidMsat" unit:"msat" doc:"the part of a positive flow that refilled the uncovered shortfall"`
}

// NewWaterfallView renders a waterfall entry.
func NewWaterfallView(w Waterfall) WaterfallView {
	return WaterfallView{BoundaryTsMs: wire.Int(w.BoundaryTsMs), MarkQ8: wire.Int(w.MarkQ8), FlowMsat: wire.Int(w.FlowMsat),
		ToReserveMsat: wire.Int(w.ToReserveMsat), ToStakersMsat: wire.Int(w.ToStakersMsat), OverflowMsat: wire.Int(w.OverflowMsat),
		ShortfallMsat: wire.Int(w.ShortfallMsat), Markdown: itoa(w.Markdown), YieldMinted: itoa(w.YieldMinted),
		SharePriceQ9Before: wire.Int(w.SharePriceQ9Before), SharePriceQ9After: wire.Int(w.SharePriceQ9After),
		FromReserveMsat: wire.Int(w.FromReserveMsat), FromEscrowMsat: wire.Int(w.FromEscrowMsat), UncoveredMsat: wire.Int(w.UncoveredMsat),
		RepaidMsat: wire.Int(w.RepaidMsat)}
}

// HistoryPage is GET /v1/usdx/history.
type HistoryPage struct {
	Waterfalls     []WaterfallView `json:"waterfalls"`
	NextBeforeTsMs *wire.Int       `json:"nextBeforeTsMs" unit:"ms"`
}

// HistoryPage pages the waterfall entries newest first, with boundaries
// before beforeTsMs (0: from the newest).
func (s *State) HistoryPage(beforeTsMs int64, limit int) HistoryPage {
	out := HistoryPage{Waterfalls: []WaterfallView{}}
	i := len(s.History) - 1
	for i >= 0 && beforeTsMs != 0 && s.History[i].BoundaryTsMs >= beforeTsMs {
		i--
	}
	for ; i >= 0 && len(out.Waterfalls) < limit; i-- {
		out.Waterfalls = append(out.Waterfalls, NewWaterfallView(s.History[i]))
	}
	if i >= 0 && len(out.Waterfalls) > 0 {
		out.NextBeforeTsMs = wire.Ptr(s.History[i+1].BoundaryTsMs)
	}
	return out
}

// CurvePointView is one knot of params.dynFeeCurve.
type CurvePointView struct {
	XQ9 wire.Int `json:"xQ9" unit:"q9" doc:"utilisation: supply after the mint / hardCap"`
	YQ9 wire.Int `json:"yQ9" unit:"q9" doc:"dynamic fee rate on the notional"`
}

// ParamsView is the public state's params.
type ParamsView struct {
	BaseFeeQ9          wire.Int         `json:"baseFeeQ9" unit:"q9"`
	SpreadQ9           wire.Int         `json:"spreadQ9" unit:"q9" doc:"the hedge market's base spread (the skew impact comes on top, per quote)"`
	ReserveTargetQ9    wire.Int         `json:"reserveTargetQ9" unit:"q9"`
	ReserveFloorQ9     wire.Int         `json:"reserveFloorQ9" unit:"q9"`
	DynFeeCurve        []CurvePointView `json:"dynFeeCurve"`
	HardCap            string           `json:"hardCap"`
	QuoteTTLMs         wire.Int         `json:"quoteTtlMs" unit:"ms"`
	MintVelocityQ9PerH wire.Int         `json:"mintVelocityQ9PerH" unit:"q9"`
	MintVelocityFloor  string           `json:"mintVelocityFloor"`
	RequoteToleranceQ9 wire.Int         `json:"requoteToleranceQ9" unit:"q9"`
}

// HedgeView is the public state's hedge.
type HedgeView struct {
	Contracts    wire.Int  `json:"contracts" unit:"contracts"`
	EntryPriceQ8 *wire.Int `json:"entryPriceQ8" unit:"q8"`
	MarginMsat   wire.Int  `json:"marginMsat" unit:"msat"`
}

// CapacityView is the public state's capacity: null fields without a
// hedge market.
type CapacityView struct {
	Headroom *string       `json:"headroom" doc:"USDx that may be minted now: the smallest of perLimit"`
	Limit    *string       `json:"limit" enum:"organic_oi,hard_cap,oi_cap,skew,velocity" doc:"the binding limit"`
	PerLimit *PerLimitView `json:"perLimit"`
}

// PerLimitView is each capacity limit's headroom in USDx (at least 0).
type PerLimitView struct {
	OrganicOI string `json:"organic_oi"`
	HardCap   string `json:"hard_cap"`
	OICap     string `json:"oi_cap"`
	Skew      string `json:"skew"`
	Velocity  string `json:"velocity"`
}

// FeaturesView is the public state's features.
type FeaturesView struct {
	Mint     bool `json:"mint"`
	Redeem   bool `json:"redeem"`
	Stake    bool `json:"stake"`
	Withdraw bool `json:"withdraw"`
}

// StakingView is the public state's staking.
type StakingView struct {
	SharePriceQ9           wire.Int       `json:"sharePriceQ9" unit:"q9" doc:"the price a stake is served: USDx per sUSDx, rounded down; the pool counts the staked USDx, the yield escrow at the mark and (from feature level 8) the yield accrued since the last funding boundary"`
	Staked                 string         `json:"staked"`
	SusdxSupply            string         `json:"susdxSupply"`
	YieldEscrowMsat        wire.Int       `json:"yieldEscrowMsat" unit:"msat"`
	UncoveredShortfallMsat wire.Int       `json:"uncoveredShortfallMsat" unit:"msat"`
	UnstakeCooldownMs      wire.Int       `json:"unstakeCooldownMs" unit:"ms"`
	LastWaterfall          *WaterfallView `json:"lastWaterfall"`
}

// PublicView is GET /v1/usdx: one consistent snapshot, no user data.
type PublicView struct {
	TsMs                 wire.Int         `json:"tsMs" unit:"ms"`
	Params               ParamsView       `json:"params"`
	Supply               string           `json:"supply"`
	Hedge                HedgeView        `json:"hedge"`
	BackingIdentityHolds bool             `json:"backingIdentityHolds"`
	ReserveMsat          wire.Int         `json:"reserveMsat" unit:"msat"`
	ReserveTargetMsat    *wire.Int        `json:"reserveTargetMsat" unit:"msat"`
	ReserveFloorMsat     *wire.Int        `json:"reserveFloorMsat" unit:"msat"`
	MarkQ8               *wire.Int        `json:"markQ8" unit:"q8"`
	OracleFresh          bool             `json:"oracleFresh"`
	MintedLastHour       string           `json:"mintedLastHour"`
	RedeemedLastHour     string           `json:"redeemedLastHour"`
	Capacity             CapacityView     `json:"capacity"`
	MintsHalted          bool             `json:"mintsHalted"`
	MintsHaltedReason    *string          `json:"mintsHaltedReason"`
	LastAttestation      *AttestationView `json:"lastAttestation"`
	Features             FeaturesView     `json:"features"`
	Staking              StakingView      `json:"staking"`
	TokenIdentifier      *string          `json:"tokenIdentifier"`
	FreezeCount          int              `json:"freezeCount"`
	FrozenCount          int              `json:"frozenCount"`
}

// Public renders the public state at log time nowMs (the env's time).
func (s *State) Public(e *Env) PublicView {
	p := &s.Params
	v := PublicView{TsMs: wire.Int(e.now()), Supply: itoa(s.Supply), ReserveMsat: wire.Int(s.ReserveMsat),
		BackingIdentityHolds: s.IdentityHolds(e.Trade), OracleFresh: e.oracleFresh(),
		TokenIdentifier: strPtr(p.TokenIdentifier), FreezeCount: int(s.FreezeCount), FrozenCount: len(s.Frozen)}
	v.Params = ParamsView{BaseFeeQ9: wire.Int(p.BaseFeeQ9), ReserveTargetQ9: wire.Int(p.ReserveTargetQ9),
		ReserveFloorQ9: wire.Int(p.ReserveFloorQ9), DynFeeCurve: []CurvePointView{}, HardCap: itoa(p.HardCap),
		QuoteTTLMs: wire.Int(p.QuoteTTLMs), MintVelocityQ9PerH: wire.Int(p.MintVelocityQ9PerH),
		MintVelocityFloor: itoa(p.MintVelocityFloor), RequoteToleranceQ9: wire.Int(p.RequoteToleranceQ9)}
	for _, c := range p.DynFeeCurve {
		v.Params.DynFeeCurve = append(v.Params.DynFeeCurve, CurvePointView{XQ9: wire.Int(c.XQ9), YQ9: wire.Int(c.YQ9)})
	}
	m, pr, printed := e.hedgeMarket()
	if m != nil {
		v.Params.SpreadQ9 = wire.Int(m.Params.BaseSpreadQ9)
	}
	pos := e.hedge()
	v.Hedge = HedgeView{Contracts: wire.Int(pos.Contracts), MarginMsat: wire.Int(pos.MarginMsat)}
	if pos.Contracts > 0 {
		v.Hedge.EntryPriceQ8 = wire.Ptr(pos.EntryQ8)
	}
	if printed {
		v.MarkQ8 = wire.Ptr(pr.MidQ8)
		t, f, _ := s.ReserveBounds(pr.MidQ8)
		v.ReserveTargetMsat, v.ReserveFloorMsat = wire.Ptr(t), wire.Ptr(f)
	}
	minted, redeemed := s.windowSums(e.T.Level, e.now())
	v.MintedLastHour, v.RedeemedLastHour = itoa(minted), itoa(redeemed)
	if c := s.Capacity(e); c.Known {
		h, l := itoa(c.Headroom), c.Limit
		v.Capacity = CapacityView{Headroom: &h, Limit: &l, PerLimit: &PerLimitView{OrganicOI: itoa(c.Per["organic_oi"]),
			HardCap: itoa(c.Per["hard_cap"]), OICap: itoa(c.Per["oi_cap"]), Skew: itoa(c.Per["skew"]), Velocity: itoa(c.Per["velocity"])}}
	}
	// Every halt a mint or a stake would be refused for: an operator's or a
	// failed attestation's, a hedge market that is not live, an uncovered
	// shortfall (from LevelShortfallHaltsMints).
	if ref := s.mintHaltRefusal(e); ref != nil {
		reason, _ := ref.Extra["reason"].(string)
		v.MintsHalted, v.MintsHaltedReason = true, &reason
	}
	if s.Attested != nil {
		a := NewAttestationView(*s.Attested)
		v.LastAttestation = &a
	}
	v.Features = FeaturesView{Mint: p.Features.Mint, Redeem: p.Features.Redeem, Stake: p.Features.Stake, Withdraw: p.Features.Withdraw}
	v.Staking = StakingView{SharePriceQ9: wire.Int(s.ServedSharePriceQ9(e)), Staked: itoa(s.Staked),
		SusdxSupply: itoa(s.SusdxSupply), YieldEscrowMsat: wire.Int(s.YieldEscrowMsat),
		UncoveredShortfallMsat: wire.Int(s.UncoveredShortfallMsat), UnstakeCooldownMs: wire.Int(p.UnstakeCooldownMs)}
	if n := len(s.History); n > 0 {
		w := NewWaterfallView(s.History[n-1])
		v.Staking.LastWaterfall = &w
	}
	return v
}

// AccountFields are the Account resource's USDx fields.
type AccountFields struct {
	Usdx         string
	UsdxPending  string
	Susdx        string
	SusdxCooling string
	Cooling      []CoolingView
}

// CoolingView is one element of Account.cooling.
type CoolingView struct {
	UnstakeID   string   `json:"unstakeId"`
	Susdx       string   `json:"susdx"`
	ReleaseAtMs wire.Int `json:"releaseAtMs" unit:"ms"`
}

// Account returns an account's USDx fields.
func (s *State) Account(accountID string) AccountFields {
	h := s.Holder(accountID)
	out := AccountFields{Usdx: itoa(h.Usdx), UsdxPending: itoa(h.Pending), Susdx: itoa(h.Susdx), Cooling: []CoolingView{}}
	var cooling int64
	for _, u := range h.Unstakes {
		if !u.Released {
			cooling += u.Susdx
			out.Cooling = append(out.Cooling, CoolingView{UnstakeID: u.ID, Susdx: itoa(u.Susdx), ReleaseAtMs: wire.Int(u.ReleaseAtMs)})
		}
	}
	sort.SliceStable(out.Cooling, func(i, j int) bool { return out.Cooling[i].ReleaseAtMs < out.Cooling[j].ReleaseAtMs })
	out.SusdxCooling = itoa(cooling)
	return out
}
