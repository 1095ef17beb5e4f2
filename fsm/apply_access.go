package fsm

import (
	"fmt"
	"net/http"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/funds"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

func init() {
	register(CmdSignup, applySignup)
	register(CmdMintKey, applyMintKey)
	register(CmdRevokeKeys, applyRevokeKeys)
	register(CmdFaucet, applyFaucet)
	register(CmdTouchKeys, applyTouchKeys)
	genesisHooks = append(genesisHooks, func(c *Ctx, p *GenesisPayload) {
		if p.SignupsPerHour > 0 {
			c.St.Access.SignupsPerHour = p.SignupsPerHour
		}
	})
}

// SignupResult is the stored answer to a signup. The HTTP layer adds the
// key value to the first response only; it never enters the log.
type SignupResult struct {
	APIKey      string `json:"apiKey,omitempty"`
	AccountID   string `json:"accountId"`
	RailAddress string `json:"railAddress"`
}

func applySignup(c *Ctx) (int, any, *wire.Refusal) {
	var p access.NewAccount
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if g := c.St.Genesis; g != nil && g.Deployment == "prod" {
		return 0, nil, wire.Refuse(http.StatusForbidden, wire.CodeFeatureUnavailable, "self-serve signup is testnet only")
	}
	if ref := c.St.Access.Signup(p, c.Now()); ref != nil {
		return 0, nil, ref
	}
	return http.StatusCreated, SignupResult{AccountID: p.AccountID, RailAddress: p.RailAddress}, nil
}

// MintResult is the stored answer to a session mint; the HTTP layer adds
// apiKey to the first response only.
type MintResult struct {
	APIKey string   `json:"apiKey,omitempty"`
	KeyID  string   `json:"keyId"`
	Scopes []string `json:"scopes" enum:"read,trade,withdraw,admin-sessions"`
}

func applyMintKey(c *Ctx) (int, any, *wire.Refusal) {
	var p access.NewKey
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	minter, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeAdminSessions)
	if ref != nil {
		return 0, nil, ref
	}
	k, ref := c.St.Access.Mint(minter, p, c.Now())
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(minter.ID, c.Now())
	return http.StatusCreated, MintResult{KeyID: k.ID, Scopes: k.Scopes.Names()}, nil
}

// RevokePayload names the key to revoke, or all but the caller's.
type RevokePayload struct {
	KeyID         string `cbor:"1,keyasint,omitempty"`
	AllButCurrent bool   `cbor:"2,keyasint,omitempty"`
}

// RevokeResult is the answer to a revoke.
type RevokeResult struct {
	Revoked []string `json:"revoked"`
}

func applyRevokeKeys(c *Ctx) (int, any, *wire.Refusal) {
	var p RevokePayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if p.KeyID == "" && !p.AllButCurrent {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "give keyId or allButCurrent")
	}
	caller, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, access.ScopeAdminSessions)
	if ref != nil {
		return 0, nil, ref
	}
	ids, ref := c.St.Access.Revoke(caller, p.KeyID, p.AllButCurrent, c.Now())
	if ref != nil {
		return 0, nil, ref
	}
	c.St.Access.Touch(caller.ID, c.Now())
	c.emitSessionRevoked(c.Cmd.Account, ids)
	return http.StatusOK, RevokeResult{Revoked: ids}, nil
}

// EventSessionRevoked is the account event of a revocation: the WebSocket
// layer ends the account channels of the named keys when it sees it.
const EventSessionRevoked = "session_revoked"

// SessionRevokedView is the data of a session_revoked event.
type SessionRevokedView struct {
	KeyIDs []string `json:"keyIds"`
}

// emitSessionRevoked announces keys revoked on account, under a fresh seq
// like every change a client can see; revoking nothing announces nothing.
func (c *Ctx) emitSessionRevoked(account string, keyIDs []string) {
	if len(keyIDs) == 0 {
		return
	}
	c.Emit(Event{Seq: c.St.NextSeq(), Kind: EventSessionRevoked, Account: account,
		Data: SessionRevokedView{KeyIDs: append([]string(nil), keyIDs...)}})
}

// FaucetResult is the answer to a faucet grant.
type FaucetResult struct {
	CreditedMsat            wire.Int `json:"creditedMsat" unit:"msat"`
	GrantsRemainingThisHour int      `json:"grantsRemainingThisHour"`
}

// LevelFaucetBounded is the feature level (fsm.FeatureLevel) from which a
// genesis refuses a faucet grant above MaxFaucetGrantMsat, and a faucet
// call whose grant the ledger could not credit is refused before the
// grant is taken. Below it an oversized grant (an operator's typo in
// --faucet-grant-sats) made the first faucet call halt every replica
// (found by a review on 2026-11-27).
const LevelFaucetBounded uint32 = 6

// MaxFaucetGrantMsat bounds one faucet grant from LevelFaucetBounded:
// one bitcoin of test money.
const MaxFaucetGrantMsat int64 = 100_000_000_000

// applyFaucet grants test sats through the same settlement as a paid
// invoice, so the grant is an ordinary deposit record.
func applyFaucet(c *Ctx) (int, any, *wire.Refusal) {
	k, ref := c.St.Access.Actor(c.Cmd.Account, c.Cmd.KeyID, 0)
	if ref != nil {
		return 0, nil, ref
	}
	if g := c.St.Genesis; g != nil && g.Deployment == "prod" {
		return 0, nil, wire.Refuse(http.StatusForbidden, wire.CodeFeatureUnavailable, "the faucet is testnet only")
	}
	acct := c.Cmd.Account
	if c.St.FeatureLevel >= LevelFaucetBounded {
		amount := c.St.Access.Faucet.GrantMsat
		if err := c.St.Ledger.CanCredit(ledger.Free(acct), amount); err != nil || amount > funds.MaxMoneyMsat {
			return 0, nil, wire.Refuse(http.StatusServiceUnavailable, wire.CodeFeatureUnavailable,
				"the faucet cannot grant %d msat now", amount)
		}
	}
	if ref := c.St.Access.TakeFaucetGrant(acct, c.Now()); ref != nil {
		return 0, nil, ref
	}
	// Only now, past every refusal: a refused faucet changes nothing.
	c.St.Access.Touch(k.ID, c.Now())
	amount := c.St.Access.Faucet.GrantMsat
	seq := c.St.NextSeq()
	d, ref := settleDeposit(c, funds.Settlement{AccountID: acct, AmountMsat: amount,
		RailRef: fmt.Sprintf("faucet:%d", seq), Path: funds.PathFaucet}, seq)
	if ref != nil {
		panic("faucet settlement refused after the grant was taken: " + ref.Msg)
	}
	return http.StatusCreated, FaucetResult{CreditedMsat: wire.Int(d.AmountMsat - d.FeeMsat),
		GrantsRemainingThisHour: c.St.Access.FaucetGrantsLeft(acct, c.Now())}, nil
}

// TouchPayload carries keys' last-use times observed by a node's readers.
type TouchPayload struct {
	KeyIDs []string `cbor:"1,keyasint"`
	TsMs   []int64  `cbor:"2,keyasint"`
}

// applyTouchKeys records last use; times beyond the log clock are clamped
// so a node's fast clock cannot push a key's last use into the future.
func applyTouchKeys(c *Ctx) (int, any, *wire.Refusal) {
	var p TouchPayload
	if ref := c.Decode(&p); ref != nil {
		return 0, nil, ref
	}
	if len(p.KeyIDs) != len(p.TsMs) {
		return 0, nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "touch ids and times differ in length")
	}
	for i, id := range p.KeyIDs {
		ts := p.TsMs[i]
		if ts > c.Now() {
			ts = c.Now()
		}
		c.St.Access.Touch(id, ts)
	}
	return http.StatusOK, struct{}{}, nil
}
