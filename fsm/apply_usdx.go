package fsm

import (
	"net/http"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/market"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/fsm/wire"
)

// USDx and sUSDx: command types 100-119 (fsm/usdx owns the rules).
const (
	CmdUSDxQuote          CmdType = 100 // a trader asks for a mint or redeem quote
	CmdUSDxMint           CmdType = 101 // a trader mints on a quote (idempotency key = quote id)
	CmdUSDxRedeem         CmdType = 102 // a trader redeems USDx for sats
	CmdUSDxStake          CmdType = 103 // USDx into the staking pool for sUSDx
	CmdUSDxUnstake        CmdType = 104 // sUSDx into its cooldown
	CmdUSDxWithdraw       CmdType = 105 // USDx out to a token address (requested)
	CmdUSDxWithdrawalPaid CmdType = 106 // the token rail saw the custody transfer land (leader driver)
	CmdUSDxFreeze         CmdType = 107 // operator: freeze or unfreeze a token address (requested)
	CmdUSDxFreezeApplied  CmdType = 108 // the custody worker applied a freeze log entry (leader driver)
	CmdUSDxAttest         CmdType = 109 // the issuer's attestation, compared with the ledger
	CmdUSDxHalt           CmdType = 110 // operator: halt or resume mints
	CmdUSDxParams         CmdType = 111 // operator: change USDx parameters
	CmdUSDxDeposited      CmdType = 112 // the token rail saw USDx arrive at a deposit address (leader driver)
)

func init() {
	registerDomain(CmdUSDxQuote, applyUSDxQuote)
	registerDomain(CmdUSDxMint, applyUSDxMint)
	registerDomain(CmdUSDxRedeem, applyUSDxRedeem)
	registerDomain(CmdUSDxStake, applyUSDxStake)
	registerDomain(CmdUSDxUnstake, applyUSDxUnstake)
	registerDomain(CmdUSDxWithdraw, applyUSDxWithdraw)
	registerDomain(CmdUSDxWithdrawalPaid, applyUSDxWithdrawalPaid)
	registerDomain(CmdUSDxFreeze, applyUSDxFreeze)
	registerDomain(CmdUSDxFreezeApplied, applyUSDxFreezeApplied)
	registerDomain(CmdUSDxAttest, applyUSDxAttest)
	registerDomain(CmdUSDxHalt, applyUSDxHalt)
	registerDomain(CmdUSDxParams, applyUSDxParams)
	registerDomain(CmdUSDxDeposited, applyUSDxDeposited)
	fillHooks = append(fillHooks, func(s *State) {
		if s.USDx != nil {
			s.USDx.FillNil()
		}
	})
	// Registered after the trading book's hooks (file order): the hedge's
	// funding is settled before the waterfall reads it, and a print's
	// trading work is done before queued redemptions are paid.
	fundingHooks = append(fundingHooks, func(c *Ctx, ev market.FundingEvent) {
		if c.St.USDx != nil {
			c.St.USDx.OnFunding(c.usdxEnv(), ev)
		}
	})
	printHooks = append(printHooks, func(c *Ctx, marketID string) {
		if c.St.USDx != nil {
			c.St.USDx.OnPrint(c.usdxEnv(), marketID)
		}
	})
	registerTimer(func(c *Ctx) {
		if c.St.USDx != nil {
			c.St.USDx.OnTime(c.usdxEnv())
		}
	})
	invariantChecks = append(invariantChecks, func(st *State) error {
		if st.USDx == nil {
			return nil
		}
		return st.USDx.CheckInvariants(st.Ledger, st.Trade)
	})
}

// usdxEnv hands USDx the trading book and its environment.
func (c *Ctx) usdxEnv() *usdx.Env {
	return &usdx.Env{Trade: c.St.Trade, T: c.tradeEnv()}
}

// USDxQuotePayload asks for a quote; QuoteID is drawn by the proposing node.
type USDxQuotePayload struct {
	QuoteID string `cbor:"1,keyasint"`
	Side    string `cbor:"2,keyasint"`
	Usdx    int64  `cbor:"3,keyasint"`
}

func applyUSDxQuote(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxQuotePayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	v, ref := c.St.USDx.NewQuote(c.usdxEnv(), c.Cmd.Account, p.QuoteID, p.Side, p.Usdx)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusCreated, v, nil
}

// USDxMintPayload mints on a quote. FreshQuoteID, drawn by the proposing
// node, names the fresh quote of a requote.
type USDxMintPayload struct {
	QuoteID      string `cbor:"1,keyasint"`
	FreshQuoteID string `cbor:"2,keyasint"`
}

// applyUSDxMint mints. A requote is an answer, not a refusal: 409
// usdx_requote with the fresh quote, which the state keeps (and the
// idempotency store keeps the answer, so a retry sees the same quote).
func applyUSDxMint(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxMintPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	out, ref := c.St.USDx.Mint(c.usdxEnv(), c.Cmd.Account, p.QuoteID, p.FreshQuoteID)
	if ref != nil {
		return 0, nil, ref
	}
	if out.Requote != nil {
		return http.StatusConflict, out.Requote, nil
	}
	c.St.Access.Touch(c.Cmd.KeyID, c.Now())
	return http.StatusCreated, out.Saga, nil
}

// USDxAmountPayload is a redemption, stake or unstake: ID names a
// redemption (drawn by the node, or the client's idempotency key).
type USDxAmountPayload struct {
	ID     string `cbor:"1,keyasint,omitempty"`
	Amount int64  `cbor:"2,keyasint"`
}

func applyUSDxRedeem(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxAmountPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	v, ref := c.St.USDx.Redeem(c.usdxEnv(), c.Cmd.Account, p.ID, p.Amount)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusCreated, v, nil
}

func applyUSDxStake(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxAmountPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	v, ref := c.St.USDx.Stake(c.usdxEnv(), c.Cmd.Account, p.ID, p.Amount)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusCreated, v, nil
}

func applyUSDxUnstake(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxAmountPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeTrade); ref != nil {
		return 0, nil, ref
	}
	v, ref := c.St.USDx.Unstake(c.usdxEnv(), c.Cmd.Account, p.ID, p.Amount)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusCreated, v, nil
}

// USDxWithdrawPayload withdraws USDx; ID is the client's idempotency key.
type USDxWithdrawPayload struct {
	ID           string `cbor:"1,keyasint"`
	Usdx         int64  `cbor:"2,keyasint"`
	SparkAddress string `cbor:"3,keyasint"`
}

func applyUSDxWithdraw(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxWithdrawPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeWithdraw); ref != nil {
		return 0, nil, ref
	}
	v, ref := c.St.USDx.Withdraw(c.usdxEnv(), c.Cmd.Account, p.ID, p.Usdx, p.SparkAddress)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusCreated, v, nil
}

// USDxWithdrawalPaidPayload is the token rail's report of a custody
// transfer.
type USDxWithdrawalPaidPayload struct {
	WithdrawalID string `cbor:"1,keyasint"`
	IssuerRef    string `cbor:"2,keyasint"`
}

func applyUSDxWithdrawalPaid(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxWithdrawalPaidPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if ref := c.St.USDx.Paid(c.usdxEnv(), p.WithdrawalID, p.IssuerRef); ref != nil {
		return 0, nil, ref
	}
	return http.StatusOK, struct{}{}, nil
}

// USDxDepositedPayload is the token rail's report of tokens arriving at
// an account's deposit address.
type USDxDepositedPayload struct {
	AccountID string `cbor:"1,keyasint"`
	Usdx      int64  `cbor:"2,keyasint"`
	IssuerRef string `cbor:"3,keyasint"`
}

func applyUSDxDeposited(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxDepositedPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if _, ok := c.St.Access.Accounts[p.AccountID]; !ok {
		return 0, nil, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "account %q not found", p.AccountID)
	}
	if ref := c.St.USDx.Deposit(c.usdxEnv(), p.AccountID, p.Usdx, p.IssuerRef); ref != nil {
		return 0, nil, ref
	}
	return http.StatusOK, struct{}{}, nil
}

// USDxFreezePayload is an operator's freeze or unfreeze.
type USDxFreezePayload struct {
	OpID         string `cbor:"1,keyasint,omitempty"`
	SparkAddress string `cbor:"2,keyasint"`
	Action       string `cbor:"3,keyasint"`
	Reason       string `cbor:"4,keyasint,omitempty"`
}

func applyUSDxFreeze(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxFreezePayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	v, ref := c.St.USDx.RequestFreeze(c.usdxEnv(), p.OpID, p.SparkAddress, p.Action, p.Reason)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusCreated, v, nil
}

// USDxFreezeAppliedPayload is the custody worker's report. ImpactedMicro
// < 0: not known.
type USDxFreezeAppliedPayload struct {
	Seq           uint64 `cbor:"1,keyasint"`
	IssuerRef     string `cbor:"2,keyasint,omitempty"`
	ImpactedMicro int64  `cbor:"3,keyasint"`
}

func applyUSDxFreezeApplied(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxFreezeAppliedPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	v, ref := c.St.USDx.ApplyFreeze(c.usdxEnv(), p.Seq, p.IssuerRef, p.ImpactedMicro)
	if ref != nil {
		return 0, nil, ref
	}
	return http.StatusOK, v, nil
}

// USDxAttestPayload is the issuer's report.
type USDxAttestPayload struct {
	AsOfTsMs      int64 `cbor:"1,keyasint"`
	IssuerSupply  int64 `cbor:"2,keyasint"`
	IssuerIssued  int64 `cbor:"3,keyasint"`
	IssuerBurned  int64 `cbor:"4,keyasint"`
	IssuerCustody int64 `cbor:"5,keyasint"`
}

func applyUSDxAttest(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxAttestPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if p.IssuerSupply < 0 || p.IssuerIssued < 0 || p.IssuerBurned < 0 || p.IssuerCustody < 0 {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "attestation figures are non-negative")
	}
	v := c.St.USDx.Attest(c.usdxEnv(), usdx.Attestation{AsOfTsMs: p.AsOfTsMs, IssuerSupply: p.IssuerSupply,
		IssuerIssued: p.IssuerIssued, IssuerBurned: p.IssuerBurned, IssuerCustody: p.IssuerCustody})
	return http.StatusOK, v, nil
}

// USDxHaltPayload halts (Halt true, with Reason) or resumes mints.
type USDxHaltPayload struct {
	Halt   bool   `cbor:"1,keyasint"`
	Reason string `cbor:"2,keyasint,omitempty"`
}

// USDxHaltResult is the mint halt after the command.
type USDxHaltResult struct {
	MintsHalted       bool    `json:"mintsHalted"`
	MintsHaltedReason *string `json:"mintsHaltedReason"`
}

func applyUSDxHalt(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxHaltPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if ref := c.St.USDx.SetHalt(c.usdxEnv(), p.Halt, p.Reason); ref != nil {
		return 0, nil, ref
	}
	out := USDxHaltResult{MintsHalted: c.St.USDx.Halt != nil}
	if h := c.St.USDx.Halt; h != nil {
		out.MintsHaltedReason = &h.Reason
	}
	return http.StatusOK, out, nil
}

// USDxParamsPayload changes parameters; nil fields stay.
type USDxParamsPayload struct {
	BaseFeeQ9          *int64            `cbor:"1,keyasint,omitempty"`
	ReserveTargetQ9    *int64            `cbor:"2,keyasint,omitempty"`
	ReserveFloorQ9     *int64            `cbor:"3,keyasint,omitempty"`
	DynFeeCurve        []usdx.CurvePoint `cbor:"4,keyasint,omitempty"`
	HardCap            *int64            `cbor:"5,keyasint,omitempty"`
	QuoteTTLMs         *int64            `cbor:"6,keyasint,omitempty"`
	MintVelocityQ9PerH *int64            `cbor:"7,keyasint,omitempty"`
	MintVelocityFloor  *int64            `cbor:"8,keyasint,omitempty"`
	RequoteToleranceQ9 *int64            `cbor:"9,keyasint,omitempty"`
	UnstakeCooldownMs  *int64            `cbor:"10,keyasint,omitempty"`
	MaxSkewQ9          *int64            `cbor:"11,keyasint,omitempty"`
	SkewFloor          *int64            `cbor:"12,keyasint,omitempty"`
	OrganicMultipleQ9  *int64            `cbor:"13,keyasint,omitempty"`
	OrganicFloor       *int64            `cbor:"14,keyasint,omitempty"`
	Features           *usdx.Features    `cbor:"15,keyasint,omitempty"`
	TokenIdentifier    *string           `cbor:"16,keyasint,omitempty"`
}

func applyUSDxParams(c *Ctx) (int, any, *wire.Refusal) {
	var p USDxParamsPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	next := c.St.USDx.Params
	next.DynFeeCurve = append([]usdx.CurvePoint(nil), next.DynFeeCurve...)
	set := func(dst *int64, v *int64, lo, hi int64, name string) *wire.Refusal {
		if v == nil {
			return nil
		}
		if *v < lo || *v > hi {
			return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "%s %d outside [%d, %d]", name, *v, lo, hi)
		}
		*dst = *v
		return nil
	}
	const big = int64(1) << 50
	for _, f := range []struct {
		dst    *int64
		v      *int64
		lo, hi int64
		name   string
	}{
		{&next.BaseFeeQ9, p.BaseFeeQ9, 0, usdx.Q9 / 10, "baseFeeQ9"},
		{&next.ReserveTargetQ9, p.ReserveTargetQ9, 0, usdx.Q9, "reserveTargetQ9"},
		{&next.ReserveFloorQ9, p.ReserveFloorQ9, 0, usdx.Q9, "reserveFloorQ9"},
		{&next.HardCap, p.HardCap, 0, big, "hardCap"},
		{&next.QuoteTTLMs, p.QuoteTTLMs, 1000, 3_600_000, "quoteTtlMs"},
		{&next.MintVelocityQ9PerH, p.MintVelocityQ9PerH, 0, 100 * usdx.Q9, "mintVelocityQ9PerH"},
		{&next.MintVelocityFloor, p.MintVelocityFloor, 0, big, "mintVelocityFloor"},
		{&next.RequoteToleranceQ9, p.RequoteToleranceQ9, 0, usdx.Q9 / 10, "requoteToleranceQ9"},
		{&next.UnstakeCooldownMs, p.UnstakeCooldownMs, 0, 90 * 86_400_000, "unstakeCooldownMs"},
		{&next.MaxSkewQ9, p.MaxSkewQ9, 0, usdx.Q9, "maxSkewQ9"},
		{&next.SkewFloor, p.SkewFloor, 0, big, "skewFloor"},
		{&next.OrganicMultipleQ9, p.OrganicMultipleQ9, 0, 1000 * usdx.Q9, "organicMultipleQ9"},
		{&next.OrganicFloor, p.OrganicFloor, 0, big, "organicFloor"},
	} {
		if ref := set(f.dst, f.v, f.lo, f.hi, f.name); ref != nil {
			return 0, nil, ref
		}
	}
	if next.ReserveFloorQ9 > next.ReserveTargetQ9 {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "reserveFloorQ9 above reserveTargetQ9")
	}
	if p.DynFeeCurve != nil {
		if len(p.DynFeeCurve) > 16 {
			return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "at most 16 curve points")
		}
		for i, pt := range p.DynFeeCurve {
			if pt.XQ9 < 0 || pt.XQ9 > 10*usdx.Q9 || pt.YQ9 < 0 || pt.YQ9 > usdx.Q9/10 || (i > 0 && pt.XQ9 <= p.DynFeeCurve[i-1].XQ9) {
				return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "curve points need strictly increasing xQ9 in [0, 1e10] and yQ9 in [0, 1e8]")
			}
		}
		next.DynFeeCurve = p.DynFeeCurve
	}
	if p.Features != nil {
		next.Features = *p.Features
	}
	if p.TokenIdentifier != nil {
		if len(*p.TokenIdentifier) > 128 {
			return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "tokenIdentifier is at most 128 characters")
		}
		next.TokenIdentifier = *p.TokenIdentifier
	}
	c.St.USDx.Params = next
	return http.StatusOK, c.St.USDx.Public(c.usdxEnv()).Params, nil
}

// USDxReadEnv is the environment USDx's views read through (the public
// state needs the hedge market and the hedge position); reads only. nowMs
// is the reader's estimate of log time (node.LogNowMs), so a node cut off
// from the leader shows the oracle ageing rather than frozen fresh; the
// state's own time when it is later.
func USDxReadEnv(st *State, nowMs int64) *usdx.Env {
	c := &Ctx{St: st}
	e := c.usdxEnv()
	e.T.NowMs = max(st.NowMs, nowMs)
	return e
}
