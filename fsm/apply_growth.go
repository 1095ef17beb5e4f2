package fsm

import (
	"net/http"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Referral, promoter and leaderboards: command types 120-139.
const (
	CmdReferralCode        CmdType = 120 // an account creates its referral code
	CmdReferralBind        CmdType = 121 // an account binds a code within its bind window
	CmdReferralClaim       CmdType = 122 // a referrer claims its vested rewards
	CmdLeaderboardSettings CmdType = 123 // opt out or in, set or clear the display name
	CmdPromoterApply       CmdType = 124 // an account applies to the promoter programme
	CmdPromoterCode        CmdType = 125 // a promoter creates a code with a kickback
	CmdPromoterClaim       CmdType = 126 // a promoter claims its vested rewards
	CmdPromoterReview      CmdType = 127 // operator: approve or refuse a pending application
)

func init() {
	registerDomain(CmdReferralCode, applyReferralCode)
	registerDomain(CmdReferralBind, applyReferralBind)
	registerDomain(CmdReferralClaim, applyReferralClaim)
	registerDomain(CmdLeaderboardSettings, applyLeaderboardSettings)
	registerDomain(CmdPromoterApply, applyPromoterApply)
	registerDomain(CmdPromoterCode, applyPromoterCode)
	registerDomain(CmdPromoterClaim, applyPromoterClaim)
	registerDomain(CmdPromoterReview, applyPromoterReview)
	fillHooks = append(fillHooks, func(s *State) {
		if s.Growth != nil {
			s.Growth.FillNil()
		}
	})
	tradeFeeSplit = growthFeeSplit
	tradeEventHooks = append(tradeEventHooks, growthObserveTrade)
	registerTimer(func(c *Ctx) {
		if c.St.Growth == nil {
			return
		}
		env := c.growthEnv()
		c.St.Growth.OnClock(env, c.St.Growth.Volume)
		if c.St.FeatureLevel < growth.LevelBoardsAfterFunding {
			// From the level the recompute runs after the markets'
			// timer (growth_boards.go).
			c.St.Growth.OnClockBoards(env)
		}
	})
	invariantChecks = append(invariantChecks, func(st *State) error {
		if st.Growth == nil {
			return nil
		}
		return st.Growth.CheckInvariants(st.Ledger)
	})
}

// growthEnv hands the programme the ledger, the log time, the genesis
// seed and the entry as its Host (the seq space, the event queue, signup
// times and ledger equity).
func (c *Ctx) growthEnv() *growth.Env {
	if !c.genvSet {
		var seed uint64
		if g := c.St.Genesis; g != nil {
			seed = g.Seed
		}
		c.genv = growth.Env{Ledger: c.St.Ledger, NowMs: c.Now(), Seed: seed, Host: (*growthHost)(c)}
		c.genvSet = true
	}
	// Read each time: a raise earlier in the same entry counts at once.
	c.genv.Level = c.St.FeatureLevel
	return &c.genv
}

// growthHost is an entry's Ctx as growth.Host (pointer-shaped: no
// allocation to put it in the interface).
type growthHost Ctx

func (h *growthHost) NextSeq() uint64 { return h.St.NextSeq() }
func (h *growthHost) Emit(kind, accountID string, seq uint64, data any) {
	(*Ctx)(h).Emit(Event{Seq: seq, Kind: kind, Account: accountID, Data: data})
}
func (h *growthHost) CreatedMs(id string) (int64, bool) { return AccountCreatedMs(h.St, id) }
func (h *growthHost) Equity(id string) int64            { return AccountEquityMsat(h.St, id) }

// ReadHost is a state read as growth.Host, for renderings outside apply
// (it takes no seq and emits nothing).
type ReadHost struct{ St *State }

// NextSeq panics: a read never allocates a seq.
func (ReadHost) NextSeq() uint64                     { panic("growth: a read took a seq") }
func (ReadHost) Emit(string, string, uint64, any)    {}
func (h ReadHost) CreatedMs(id string) (int64, bool) { return AccountCreatedMs(h.St, id) }
func (h ReadHost) Equity(id string) int64            { return AccountEquityMsat(h.St, id) }

// AccountCreatedMs is an account's signup time (false: no such account).
func AccountCreatedMs(st *State, accountID string) (int64, bool) {
	a, ok := st.Access.Accounts[accountID]
	if !ok {
		return 0, false
	}
	return a.CreatedTsMs, true
}

// AccountEquityMsat is an account's ledger equity: free, reserved and the
// margin of every position (unrealised PnL is not counted).
func AccountEquityMsat(st *State, accountID string) int64 {
	eq := st.Ledger.Balance(ledger.Free(accountID)) + st.Ledger.Balance(ledger.Reserved(accountID))
	if a, ok := st.Trade.Accounts[accountID]; ok {
		for mkt := range a.Positions { // a sum: order does not matter
			eq += st.Ledger.Balance(ledger.Margin(accountID, mkt))
		}
	}
	return eq
}

// growthFeeSplit splits a referred account's fee (trade.Env.FeeSplit).
func growthFeeSplit(c *Ctx, f *trade.Fill) *trade.Referral {
	g := c.St.Growth
	if g == nil {
		return nil // below LevelDomains: fills as before the programmes
	}
	return g.FeeSplit(c.growthEnv(), f)
}

// growthObserveTrade feeds the leaderboards from what trading announces:
// fills, funding flows and liquidations, each with the equity change it
// made.
func growthObserveTrade(c *Ctx, accountID string, data any) {
	g := c.St.Growth
	if g == nil {
		return
	}
	switch v := data.(type) {
	case trade.FillEvent:
		// The fill itself, not its view (FillView's fields are the same
		// numbers): nothing is rendered for the leaderboards.
		f := v.Fill
		g.Observe(c.growthEnv(), growth.Event{AccountID: accountID,
			PnlMsat: f.RealizedPnlMsat + f.DeficitMsat - f.FeeMsat,
			Volume:  f.Closed + f.Opened,
			Trade:   true, Close: f.Closed > 0, Win: f.RealizedPnlMsat > 0})
	case trade.FundingFlowView:
		g.Observe(c.growthEnv(), growth.Event{AccountID: accountID, PnlMsat: int64(v.PaidMsat)})
	case trade.LiquidationView:
		realized := int64(v.RealizedPnlMsat)
		g.Observe(c.growthEnv(), growth.Event{AccountID: accountID,
			PnlMsat: realized + int64(v.DeficitMsat) - int64(v.PenaltyMsat),
			Volume:  int64(v.ClosedContracts), Trade: true, Close: true, Win: realized > 0})
	}
}

// ReferralCodePayload is the code to create (the HTTP layer draws one
// when the client gave none).
type ReferralCodePayload struct {
	Code string `cbor:"1,keyasint"`
}

func applyReferralCode(c *Ctx) (int, any, *wire.Refusal) {
	var p ReferralCodePayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	out, ref := c.St.Growth.CreateCode(c.growthEnv(), c.Cmd.Account, p.Code)
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusCreated, out, nil
}

// ReferralBindPayload is the code to bind.
type ReferralBindPayload struct {
	Code string `cbor:"1,keyasint"`
}

func applyReferralBind(c *Ctx) (int, any, *wire.Refusal) {
	var p ReferralBindPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	out, ref := c.St.Growth.Bind(c.growthEnv(), c.Cmd.Account, p.Code)
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusOK, out, nil
}

func applyReferralClaim(c *Ctx) (int, any, *wire.Refusal) {
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	out, ref := c.St.Growth.Claim(c.growthEnv(), c.Cmd.Account)
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusCreated, out, nil
}

func applyLeaderboardSettings(c *Ctx) (int, any, *wire.Refusal) {
	var p growth.SettingsRequest
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, 0); ref != nil {
		return 0, nil, ref
	}
	if ref := c.St.Growth.Settings(c.growthEnv(), c.Cmd.Account, p); ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusOK, c.St.Growth.Own(c.Cmd.Account, c.Now(), AccountEquityMsat(c.St, c.Cmd.Account)), nil
}

// applyPromoterApply enrols a promoter; a testnet (or local) cluster
// approves at once, prod leaves the application pending.
func applyPromoterApply(c *Ctx) (int, any, *wire.Refusal) {
	var p growth.Application
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	auto := c.St.Genesis == nil || c.St.Genesis.Deployment != "prod"
	out, ref := c.St.Growth.Apply(c.growthEnv(), c.Cmd.Account, p, auto)
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusCreated, out, nil
}

// PromoterReviewPayload is an operator's decision on an application.
type PromoterReviewPayload struct {
	AccountID string `cbor:"1,keyasint"`
	Decision  string `cbor:"2,keyasint"`
}

func applyPromoterReview(c *Ctx) (int, any, *wire.Refusal) {
	if c.St.FeatureLevel < growth.LevelPromoterReview {
		// What a build without the command answers (dispatch).
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "unknown command type %d", c.Cmd.Type)
	}
	var p PromoterReviewPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	out, ref := c.St.Growth.Review(p.AccountID, p.Decision)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusOK, out, nil
}

func applyPromoterCode(c *Ctx) (int, any, *wire.Refusal) {
	var p growth.NewPromoterCode
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	out, ref := c.St.Growth.CreatePromoterCode(c.growthEnv(), c.Cmd.Account, p)
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusCreated, out, nil
}

func applyPromoterClaim(c *Ctx) (int, any, *wire.Refusal) {
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	out, ref := c.St.Growth.PromoterClaim(c.growthEnv(), c.Cmd.Account)
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusCreated, out, nil
}
