package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/perpd/perpd/cluster"
	"github.com/perpd/perpd/fsm/wire"

	"github.com/perpd/perpd/fsm"
	"github.com/perpd/perpd/fsm/usdx"
	"github.com/perpd/perpd/httpapi"
	"github.com/perpd/perpd/node"
	"github.com/perpd/perpd/node/tokenrail"
)

func init() { wirings = append(wirings, wireUSDx) }

// Admin routes of USDx (perpd admin usdx ...).
const (
	USDxHaltPath     = "/admin/usdx/halt"
	USDxResumePath   = "/admin/usdx/resume"
	USDxFreezePath   = "/admin/usdx/freeze"
	USDxUnfreezePath = "/admin/usdx/unfreeze"
	USDxAttestPath   = "/admin/usdx/attest"
	USDxParamsPath   = "/admin/usdx/params"
	USDxDepositPath  = "/admin/usdx/deposit"
)

// wireUSDx connects USDx: on testnet and local deployments the simulated
// token rail (deposit addresses, custody transfers, freezes) with its
// leader driver; a prod deployment has no token rail wired, so its
// token-rail routes answer 503 token_rail_unavailable. The operator's
// commands are wired everywhere.
func wireUSDx(p *Parts) error {
	if p.Node.Config().Deployment != "prod" {
		tr := tokenrail.NewSim()
		p.HTTPOptions = append(p.HTTPOptions, httpapi.WithTokenRail(tr))
		p.Node.AddLeaderDriver(node.TokenRailDriver(tr))
		// The simulated outside world: someone sends tokens to an
		// account's deposit address. Leader-only, like an invoice payment.
		p.Admin.HandleLeader("POST "+USDxDepositPath, func(w http.ResponseWriter, r *http.Request) {
			var req USDxDepositRequest
			if !decodeStrict(w, r, &req) {
				return
			}
			cmd, err := fsm.NewCommand(fsm.CmdUSDxDeposited, fsm.USDxDepositedPayload{AccountID: req.AccountID,
				Usdx: int64(req.Usdx), IssuerRef: tr.SimulateDeposit(req.AccountID, int64(req.Usdx))})
			if err != nil {
				cluster.WriteJSON(w, http.StatusInternalServerError, wire.ErrorBody{Error: err.Error(), Code: wire.CodeUnavailable})
				return
			}
			cmd.IdemKey, cmd.ReqHash = "rail:usdx-deposit:"+usdxNonce(16), cmd.Payload
			res, err := p.Node.Propose(r.Context(), cmd)
			if err != nil {
				cluster.WriteJSON(w, http.StatusServiceUnavailable, wire.ErrorBody{Error: err.Error(), Code: wire.CodeUnavailable})
				return
			}
			cluster.WriteJSON(w, res.Status, json.RawMessage(res.Body))
		})
	}
	a := &marketAdmin{n: p.Node}
	p.Admin.Handle("POST "+USDxHaltPath, func(w http.ResponseWriter, r *http.Request) {
		var req USDxHaltRequest
		if decodeStrict(w, r, &req) {
			a.propose(w, r, fsm.CmdUSDxHalt, fsm.USDxHaltPayload{Halt: true, Reason: req.Reason})
		}
	})
	p.Admin.Handle("POST "+USDxResumePath, func(w http.ResponseWriter, r *http.Request) {
		var req struct{}
		if decodeStrict(w, r, &req) {
			a.propose(w, r, fsm.CmdUSDxHalt, fsm.USDxHaltPayload{Halt: false})
		}
	})
	freeze := func(action string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req USDxFreezeRequest
			if decodeStrict(w, r, &req) {
				a.propose(w, r, fsm.CmdUSDxFreeze, fsm.USDxFreezePayload{OpID: req.OpID, SparkAddress: req.SparkAddress, Action: action, Reason: req.Reason})
			}
		}
	}
	p.Admin.Handle("POST "+USDxFreezePath, freeze(usdx.ActionFreeze))
	p.Admin.Handle("POST "+USDxUnfreezePath, freeze(usdx.ActionUnfreeze))
	p.Admin.Handle("POST "+USDxAttestPath, func(w http.ResponseWriter, r *http.Request) {
		var req USDxAttestRequest
		if decodeStrict(w, r, &req) {
			a.propose(w, r, fsm.CmdUSDxAttest, fsm.USDxAttestPayload{AsOfTsMs: int64(req.AsOfTsMs), IssuerSupply: int64(req.IssuerSupply),
				IssuerIssued: int64(req.IssuerIssued), IssuerBurned: int64(req.IssuerBurned), IssuerCustody: int64(req.IssuerCustody)})
		}
	})
	p.Admin.Handle("POST "+USDxParamsPath, func(w http.ResponseWriter, r *http.Request) {
		var req USDxParamsRequest
		if decodeStrict(w, r, &req) {
			a.propose(w, r, fsm.CmdUSDxParams, req.payload())
		}
	})
	return nil
}

// USDxDepositRequest is the body of POST /admin/usdx/deposit (simulated
// token rail only).
type USDxDepositRequest struct {
	AccountID string   `json:"accountId"`
	Usdx      adminInt `json:"usdx"`
}

func usdxNonce(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// USDxHaltRequest is the body of POST /admin/usdx/halt.
type USDxHaltRequest struct {
	Reason string `json:"reason"`
}

// USDxFreezeRequest is the body of POST /admin/usdx/freeze and /unfreeze.
type USDxFreezeRequest struct {
	SparkAddress string `json:"sparkAddress"`
	Reason       string `json:"reason,omitempty"`
	OpID         string `json:"opId,omitempty"`
}

// USDxAttestRequest is the body of POST /admin/usdx/attest: the issuer's
// figures, compared with the ledger.
type USDxAttestRequest struct {
	AsOfTsMs      adminInt `json:"asOfTsMs"`
	IssuerSupply  adminInt `json:"issuerSupply"`
	IssuerIssued  adminInt `json:"issuerIssued"`
	IssuerBurned  adminInt `json:"issuerBurned"`
	IssuerCustody adminInt `json:"issuerCustody"`
}

// USDxParamsRequest is the body of POST /admin/usdx/params; absent fields
// stay.
type USDxParamsRequest struct {
	BaseFeeQ9          *adminInt `json:"baseFeeQ9"`
	ReserveTargetQ9    *adminInt `json:"reserveTargetQ9"`
	ReserveFloorQ9     *adminInt `json:"reserveFloorQ9"`
	HardCap            *adminInt `json:"hardCap"`
	QuoteTTLMs         *adminInt `json:"quoteTtlMs"`
	MintVelocityQ9PerH *adminInt `json:"mintVelocityQ9PerH"`
	MintVelocityFloor  *adminInt `json:"mintVelocityFloor"`
	RequoteToleranceQ9 *adminInt `json:"requoteToleranceQ9"`
	UnstakeCooldownMs  *adminInt `json:"unstakeCooldownMs"`
	MaxSkewQ9          *adminInt `json:"maxSkewQ9"`
	SkewFloor          *adminInt `json:"skewFloor"`
	OrganicMultipleQ9  *adminInt `json:"organicMultipleQ9"`
	OrganicFloor       *adminInt `json:"organicFloor"`
	DynFeeCurve        []struct {
		XQ9 adminInt `json:"xQ9"`
		YQ9 adminInt `json:"yQ9"`
	} `json:"dynFeeCurve"`
	Features        *usdx.Features `json:"features"`
	TokenIdentifier *string        `json:"tokenIdentifier"`
}

func (r USDxParamsRequest) payload() fsm.USDxParamsPayload {
	p := fsm.USDxParamsPayload{BaseFeeQ9: r.BaseFeeQ9.ptr(), ReserveTargetQ9: r.ReserveTargetQ9.ptr(), ReserveFloorQ9: r.ReserveFloorQ9.ptr(),
		HardCap: r.HardCap.ptr(), QuoteTTLMs: r.QuoteTTLMs.ptr(), MintVelocityQ9PerH: r.MintVelocityQ9PerH.ptr(),
		MintVelocityFloor: r.MintVelocityFloor.ptr(), RequoteToleranceQ9: r.RequoteToleranceQ9.ptr(),
		UnstakeCooldownMs: r.UnstakeCooldownMs.ptr(), MaxSkewQ9: r.MaxSkewQ9.ptr(), SkewFloor: r.SkewFloor.ptr(),
		OrganicMultipleQ9: r.OrganicMultipleQ9.ptr(), OrganicFloor: r.OrganicFloor.ptr(), Features: r.Features,
		TokenIdentifier: r.TokenIdentifier}
	for _, c := range r.DynFeeCurve {
		p.DynFeeCurve = append(p.DynFeeCurve, usdx.CurvePoint{XQ9: int64(c.XQ9), YQ9: int64(c.YQ9)})
	}
	return p
}
