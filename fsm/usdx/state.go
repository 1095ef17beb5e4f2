package usdx

import (
	"sort"

	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/trade"
)

// Venue accounts of USDx.
const (
	// HedgeAccount is the venue's own trading account that holds the hedge
	// short. Trader account ids start with "acc_", so it cannot collide.
	HedgeAccount = "venue_usdx"
	// HedgeMarket is the inverse BTC market the hedge trades in.
	HedgeMarket = "BTC-PERP"
	// Reserve is the ledger account of the sats buffer behind the hedge.
	Reserve = "venue:usdx_reserve"
	// YieldEscrow holds stakers' funding yield not yet minted into USDx
	// (less than the price of one whole USDx, or held back by the cap).
	YieldEscrow = "venue:usdx_yield"
)

// Bounds (docs/decisions.md, USDx): every collection has one.
const (
	QuotesPerAccountMax  = 20   // open quotes per account; the oldest goes first
	SagasKept            = 200  // sagas per account (queued ones are never dropped)
	QueuedPerAccountMax  = 50   // queued redemptions per account
	CoolingPerAccountMax = 50   // unstakes cooling per account
	UnstakesKept         = 50   // released unstakes kept per account
	ActivityKept         = 1000 // activity records per account
	WithdrawalsKept      = 200  // USDx withdrawals per account (requested ones never dropped)
	RequestedPerAccount  = 20   // USDx withdrawals in flight per account
	WaterfallsKept       = 2000 // waterfall entries (about 83 days of hourly boundaries)
	FreezesKept          = 1000 // freeze log entries
	FrozenMax            = 10000
	AddressLenMax        = 128
	VelocityWindowMs     = 3_600_000
	QuoteGraceMs         = 600_000 // an expired quote is kept this long, to answer usdx_quote_expired
	velocityBucketMs     = 60_000
)

// Q9 is one in q9.
const Q9 = market.Q9

// CurvePoint is one knot of the dynamic fee curve: at utilisation xQ9
// (supply after the mint / hardCap) the dynamic fee rate is yQ9.
type CurvePoint struct {
	XQ9 int64 `cbor:"1,keyasint"`
	YQ9 int64 `cbor:"2,keyasint"`
}

// Features are the operator's switches of the public state.
type Features struct {
	Mint     bool `cbor:"1,keyasint"`
	Redeem   bool `cbor:"2,keyasint"`
	Stake    bool `cbor:"3,keyasint"`
	Withdraw bool `cbor:"4,keyasint"`
}

// Params are USDx's parameters (SPEC's params block plus the limits it
// names without values; defaults in DefaultParams).
type Params struct {
	BaseFeeQ9          int64        `cbor:"1,keyasint"`
	ReserveTargetQ9    int64        `cbor:"2,keyasint"`
	ReserveFloorQ9     int64        `cbor:"3,keyasint"`
	DynFeeCurve        []CurvePoint `cbor:"4,keyasint"`
	HardCap            int64        `cbor:"5,keyasint"`
	QuoteTTLMs         int64        `cbor:"6,keyasint"`
	MintVelocityQ9PerH int64        `cbor:"7,keyasint"`
	MintVelocityFloor  int64        `cbor:"8,keyasint"`
	RequoteToleranceQ9 int64        `cbor:"9,keyasint"`
	UnstakeCooldownMs  int64        `cbor:"10,keyasint"`
	// MaxSkewQ9 bounds the market's skew toward shorts that the hedge may
	// cause; SkewFloor is the net short open interest always allowed.
	MaxSkewQ9 int64 `cbor:"11,keyasint"`
	SkewFloor int64 `cbor:"12,keyasint"`
	// The hedge may reach OrganicFloor + OrganicMultipleQ9 x organic open
	// interest (both sides, every account but the hedge) / 1e9.
	OrganicMultipleQ9 int64    `cbor:"13,keyasint"`
	OrganicFloor      int64    `cbor:"14,keyasint"`
	Features          Features `cbor:"15,keyasint"`
	TokenIdentifier   string   `cbor:"16,keyasint,omitempty"`
}

// DefaultParams are the testnet starting values.
func DefaultParams() Params {
	return Params{
		BaseFeeQ9:       1_000_000,  // 0.1%
		ReserveTargetQ9: 50_000_000, // 5% of supply's value
		ReserveFloorQ9:  10_000_000, // 1%
		DynFeeCurve: []CurvePoint{
			{XQ9: 0, YQ9: 0}, {XQ9: 500_000_000, YQ9: 0},
			{XQ9: 800_000_000, YQ9: 1_000_000}, {XQ9: 1_000_000_000, YQ9: 5_000_000},
		},
		HardCap:            10_000_000,
		QuoteTTLMs:         30_000,
		MintVelocityQ9PerH: 200_000_000, // 20% of supply per hour
		MintVelocityFloor:  1_000_000,
		RequoteToleranceQ9: 2_000_000, // 0.2%
		UnstakeCooldownMs:  3_600_000,
		MaxSkewQ9:          500_000_000,
		SkewFloor:          2_000_000,
		OrganicMultipleQ9:  3_000_000_000,
		OrganicFloor:       5_000_000,
		Features:           Features{Mint: true, Redeem: true, Stake: true, Withdraw: true},
		TokenIdentifier:    "usdx-testnet",
	}
}

// Quote is a priced offer to mint or redeem (SPEC's Quote).
type Quote struct {
	ID          string `cbor:"1,keyasint"`
	AccountID   string `cbor:"2,keyasint"`
	Side        string `cbor:"3,keyasint"`
	Usdx        int64  `cbor:"4,keyasint"`
	PriceQ8     int64  `cbor:"5,keyasint"`
	SpreadQ9    int64  `cbor:"6,keyasint"`
	FeeMsat     int64  `cbor:"7,keyasint"`
	DynFeeMsat  int64  `cbor:"8,keyasint"`
	ImpactMsat  int64  `cbor:"9,keyasint"`
	SatsMsat    int64  `cbor:"10,keyasint"`
	ExpiresAtMs int64  `cbor:"11,keyasint"`
	OracleTsMs  int64  `cbor:"12,keyasint"`
	CreatedTsMs int64  `cbor:"13,keyasint"`
}

// Saga states (SPEC section 3).
const (
	SagaHedging   = "hedging"
	SagaMinted    = "minted"
	SagaQueued    = "queued"
	SagaRedeeming = "redeeming"
	SagaPaid      = "paid"
)

// Saga is a mint or a redemption.
type Saga struct {
	ID            string `cbor:"1,keyasint"`
	AccountID     string `cbor:"2,keyasint"`
	Side          string `cbor:"3,keyasint"`
	State         string `cbor:"4,keyasint"`
	Usdx          int64  `cbor:"5,keyasint"`
	Contracts     int64  `cbor:"6,keyasint"`
	SatsMsat      int64  `cbor:"7,keyasint"`
	QueuedReason  string `cbor:"8,keyasint,omitempty"`
	QueuedSinceMs int64  `cbor:"9,keyasint,omitempty"`
	CreatedTsMs   int64  `cbor:"10,keyasint"`
	UpdatedTsMs   int64  `cbor:"11,keyasint"`
	FeeMsat       int64  `cbor:"12,keyasint,omitempty"`
	ReqHash       []byte `cbor:"13,keyasint,omitempty"`
}

// Unstake is sUSDx cooling (or released) after an unstake.
type Unstake struct {
	ID           string `cbor:"1,keyasint"`
	Susdx        int64  `cbor:"2,keyasint"`
	ReleaseAtMs  int64  `cbor:"3,keyasint"`
	Released     bool   `cbor:"4,keyasint,omitempty"`
	ReleasedUsdx int64  `cbor:"5,keyasint,omitempty"`
	RequestedMs  int64  `cbor:"6,keyasint"`
	// ReleasedMsat is the release's part of the yield escrow, paid to the
	// free balance; InKind says the release ran at LevelEscrowInPrice or
	// above, where it is paid (and shown) at all.
	ReleasedMsat int64 `cbor:"7,keyasint,omitempty"`
	InKind       bool  `cbor:"8,keyasint,omitempty"`
}

// Activity is one USDx event of an account (GET /v1/usdx/activity).
type Activity struct {
	Seq      uint64 `cbor:"1,keyasint"`
	TsMs     int64  `cbor:"2,keyasint"`
	Event    string `cbor:"3,keyasint"` // the activity's kind
	Ref      string `cbor:"4,keyasint"`
	Usdx     int64  `cbor:"5,keyasint,omitempty"`
	Susdx    int64  `cbor:"6,keyasint,omitempty"`
	SatsMsat int64  `cbor:"7,keyasint,omitempty"`
	State    string `cbor:"8,keyasint,omitempty"`
}

// Withdrawal is a USDx withdrawal to a token address.
type Withdrawal struct {
	ID            string `cbor:"1,keyasint"`
	AccountID     string `cbor:"2,keyasint"`
	Usdx          int64  `cbor:"3,keyasint"`
	SparkAddress  string `cbor:"4,keyasint"`
	State         string `cbor:"5,keyasint"`
	IssuerRef     string `cbor:"6,keyasint,omitempty"`
	RequestedTsMs int64  `cbor:"7,keyasint"`
	PaidTsMs      int64  `cbor:"8,keyasint,omitempty"`
	Seq           uint64 `cbor:"9,keyasint"`
	// RailID names the custody transfer to the token rail, from
	// LevelFreshRailIDs: ID, which the client's idempotency key derives,
	// and this entry's seq, so it is never reused (TransferID).
	RailID string `cbor:"10,keyasint,omitempty"`
}

// TransferID is the id the token rail's transfer carries: RailID, or ID
// for a withdrawal requested below LevelFreshRailIDs.
func (w *Withdrawal) TransferID() string {
	if w.RailID != "" {
		return w.RailID
	}
	return w.ID
}

// Withdrawal states.
const (
	WithdrawalRequested = "requested"
	WithdrawalPaid      = "paid"
)

// Holder is one account's USDx and sUSDx.
type Holder struct {
	Usdx    int64 `cbor:"1,keyasint"`
	Pending int64 `cbor:"2,keyasint"` // USDx in queued redemptions
	Susdx   int64 `cbor:"3,keyasint"`
	// Unstakes: cooling ones first by release time, then released ones
	// (bounded) in release order.
	Unstakes []*Unstake `cbor:"4,keyasint,omitempty"`
	Activity []Activity `cbor:"5,keyasint,omitempty"`
	// Sagas and Withdrawals are ids, oldest first.
	Sagas       []string `cbor:"6,keyasint,omitempty"`
	Withdrawals []string `cbor:"7,keyasint,omitempty"`
	// Withdrawing is USDx in requested withdrawals.
	Withdrawing int64 `cbor:"8,keyasint,omitempty"`
	// Quotes are the account's open quotes' ids, oldest first.
	Quotes []string `cbor:"9,keyasint,omitempty"`
}

// Waterfall is one applied funding boundary of the hedge (SPEC).
type Waterfall struct {
	BoundaryTsMs       int64 `cbor:"1,keyasint"`
	MarkQ8             int64 `cbor:"2,keyasint"`
	FlowMsat           int64 `cbor:"3,keyasint"`
	ToReserveMsat      int64 `cbor:"4,keyasint"`
	ToStakersMsat      int64 `cbor:"5,keyasint"`
	OverflowMsat       int64 `cbor:"6,keyasint"`
	ShortfallMsat      int64 `cbor:"7,keyasint"`
	Markdown           int64 `cbor:"8,keyasint"`
	YieldMinted        int64 `cbor:"9,keyasint"`
	SharePriceQ9Before int64 `cbor:"10,keyasint"`
	SharePriceQ9After  int64 `cbor:"11,keyasint"`
	// FromReserveMsat, FromEscrowMsat and UncoveredMsat break the
	// shortfall down (order of loss, docs/decisions.md).
	FromReserveMsat int64 `cbor:"12,keyasint,omitempty"`
	FromEscrowMsat  int64 `cbor:"13,keyasint,omitempty"`
	UncoveredMsat   int64 `cbor:"14,keyasint,omitempty"`
	// RepaidMsat is the part of a positive flow that refilled the
	// uncovered shortfall (from LevelRepayShortfall).
	RepaidMsat int64 `cbor:"15,keyasint,omitempty"`
}

// Halt is a mint halt.
type Halt struct {
	Reason  string `cbor:"1,keyasint"`
	SinceMs int64  `cbor:"2,keyasint"`
	// Attestation: caused by a failed issuer attestation; only an
	// operator resumes, and only after an attestation passes.
	Attestation bool `cbor:"3,keyasint,omitempty"`
}

// Attestation is the issuer's report compared with the ledger.
type Attestation struct {
	AsOfTsMs      int64 `cbor:"1,keyasint"`
	IssuerSupply  int64 `cbor:"2,keyasint"`
	IssuerIssued  int64 `cbor:"3,keyasint"`
	IssuerBurned  int64 `cbor:"4,keyasint"`
	IssuerCustody int64 `cbor:"5,keyasint"`
	LedgerSupply  int64 `cbor:"6,keyasint"`
	LedgerCustody int64 `cbor:"7,keyasint"`
	OK            bool  `cbor:"8,keyasint"`
}

// Freeze log entry states and actions.
const (
	FreezeRequested = "requested"
	FreezeApplied   = "applied"
	ActionFreeze    = "freeze"
	ActionUnfreeze  = "unfreeze"
)

// Freeze is a freeze log entry.
type Freeze struct {
	Seq           uint64 `cbor:"1,keyasint"`
	OpID          string `cbor:"2,keyasint,omitempty"`
	SparkAddress  string `cbor:"3,keyasint"`
	Action        string `cbor:"4,keyasint"`
	State         string `cbor:"5,keyasint"`
	Reason        string `cbor:"6,keyasint,omitempty"`
	IssuerRef     string `cbor:"7,keyasint,omitempty"`
	ImpactedMicro int64  `cbor:"8,keyasint,omitempty"`
	HasImpacted   bool   `cbor:"9,keyasint,omitempty"`
	TsMs          int64  `cbor:"10,keyasint"`
	AppliedTsMs   int64  `cbor:"11,keyasint,omitempty"`
	Recovered     bool   `cbor:"12,keyasint,omitempty"`
}

// Bucket is one minute of mints and redemptions (the rolling hour).
type Bucket struct {
	MinuteMs int64 `cbor:"1,keyasint"`
	Minted   int64 `cbor:"2,keyasint"`
	Redeemed int64 `cbor:"3,keyasint"`
}

// CoolRef points at a cooling unstake, for the release timer.
type CoolRef struct {
	ReleaseAtMs int64  `cbor:"1,keyasint"`
	AccountID   string `cbor:"2,keyasint"`
	UnstakeID   string `cbor:"3,keyasint"`
}

// State is USDx's part of the replicated state.
type State struct {
	Params Params `cbor:"1,keyasint"`
	// Supply is every USDx in existence: held, pending, staked, in flight
	// and outside custody. It equals the hedge's short contracts.
	Supply int64 `cbor:"2,keyasint"`
	// Staked is the staking pool's USDx; SusdxSupply its shares.
	Staked      int64 `cbor:"3,keyasint"`
	SusdxSupply int64 `cbor:"4,keyasint"`
	// ReserveMsat and YieldEscrowMsat mirror the ledger accounts Reserve
	// and YieldEscrow (checked).
	ReserveMsat            int64 `cbor:"5,keyasint"`
	YieldEscrowMsat        int64 `cbor:"6,keyasint"`
	UncoveredShortfallMsat int64 `cbor:"7,keyasint"`
	// Outside is USDx withdrawn to token addresses (outside custody).
	Outside  int64              `cbor:"8,keyasint"`
	Holders  map[string]*Holder `cbor:"9,keyasint"`
	Quotes   map[string]*Quote  `cbor:"10,keyasint"`
	Sagas    map[string]*Saga   `cbor:"11,keyasint"`
	Queue    []string           `cbor:"12,keyasint,omitempty"` // queued redemption saga ids, FIFO
	Cooling  []CoolRef          `cbor:"13,keyasint,omitempty"` // sorted by release time, account, id
	History  []Waterfall        `cbor:"14,keyasint,omitempty"` // oldest first
	Buckets  []Bucket           `cbor:"15,keyasint,omitempty"`
	Halt     *Halt              `cbor:"16,keyasint,omitempty"`
	Attested *Attestation       `cbor:"17,keyasint,omitempty"`
	Freezes  []Freeze           `cbor:"18,keyasint,omitempty"`
	// Frozen lists frozen addresses, sorted.
	Frozen      []string               `cbor:"19,keyasint,omitempty"`
	Withdrawals map[string]*Withdrawal `cbor:"20,keyasint"`
	// InFlight lists requested withdrawals' ids in request order.
	InFlight []string `cbor:"21,keyasint,omitempty"`
	// NextOp numbers the hedge's orders.
	NextOp uint64 `cbor:"22,keyasint"`
	// FreezeCount counts freeze log entries ever written.
	FreezeCount int64 `cbor:"23,keyasint,omitempty"`
	// QuoteOrder lists quote ids in creation order, for expiry.
	QuoteOrder []string `cbor:"24,keyasint,omitempty"`
	// NextUnstake numbers unstakes.
	NextUnstake uint64 `cbor:"25,keyasint,omitempty"`
	// DepositRefs are the token deposits credited (issuer ref -> log
	// time), the newest DepositRefsKept, in DepositOrder.
	DepositRefs  map[string]int64 `cbor:"26,keyasint,omitempty"`
	DepositOrder []string         `cbor:"27,keyasint,omitempty"`
	// PoolOpenedTsMs is when a stake last found no sUSDx in existence
	// (from LevelStakePaysAccrual; 0 before, and once a boundary passed
	// it): the stakers take the part of that interval's yield after it,
	// the reserve the part before (waterfall.go, positive).
	PoolOpenedTsMs int64 `cbor:"28,keyasint,omitempty"`
	// PeakSupply is the largest supply since the hedge market's last
	// funding boundary (from LevelReserveBoundsAtPeak; 0 before): the
	// reserve's target and floor are measured on it (ReserveBounds).
	PeakSupply int64 `cbor:"29,keyasint,omitempty"`

	// queuedBy counts each account's redemptions in Queue (derived, not
	// encoded; nil until queuedOf builds it).
	queuedBy map[string]int
}

// NewState returns USDx with default parameters and nothing minted.
func NewState() *State {
	s := &State{Params: DefaultParams()}
	s.FillNil()
	return s
}

// FillNil gives a decoded state non-nil maps.
func (s *State) FillNil() {
	if s.Holders == nil {
		s.Holders = map[string]*Holder{}
	}
	if s.Quotes == nil {
		s.Quotes = map[string]*Quote{}
	}
	if s.Sagas == nil {
		s.Sagas = map[string]*Saga{}
	}
	if s.Withdrawals == nil {
		s.Withdrawals = map[string]*Withdrawal{}
	}
	if s.DepositRefs == nil {
		s.DepositRefs = map[string]int64{}
	}
}

func (s *State) holder(id string) *Holder {
	h, ok := s.Holders[id]
	if !ok {
		h = &Holder{}
		s.Holders[id] = h
	}
	return h
}

// Holder returns an account's USDx holdings (zero when it has none).
func (s *State) Holder(id string) Holder {
	if h, ok := s.Holders[id]; ok {
		return *h
	}
	return Holder{}
}

// IsFrozen reports whether a token address is frozen.
func (s *State) IsFrozen(addr string) bool {
	i := sort.SearchStrings(s.Frozen, addr)
	return i < len(s.Frozen) && s.Frozen[i] == addr
}

func init() { trade.RegisterVenueAccount(HedgeAccount) }
