package access

import (
	"sort"
)

// MaxLiveKeys is the live-key cap per account (SPEC section 8): the 21st
// mint is refused with session_limit.
const MaxLiveKeys = 20

// MaxKeysPerAccount bounds the keys an account keeps listed, revoked ones
// included; past it the oldest revoked keys are forgotten.
const MaxKeysPerAccount = 200

// Account is one trader account.
type Account struct {
	ID          string `cbor:"1,keyasint"`
	UserID      string `cbor:"2,keyasint"`
	RailAddress string `cbor:"3,keyasint"`
	CreatedTsMs int64  `cbor:"4,keyasint"`
	// KeyIDs in creation order.
	KeyIDs []string `cbor:"5,keyasint"`
	// AutoSweepThresholdMsat is null until the account sets one.
	AutoSweepThresholdMsat *int64 `cbor:"6,keyasint,omitempty"`
	// FaucetGrantsTsMs are the times of the faucet grants of the last hour.
	FaucetGrantsTsMs []int64 `cbor:"7,keyasint,omitempty"`
}

// Key is one API key (a session). Only the hash of its value is kept.
type Key struct {
	ID             string `cbor:"1,keyasint"`
	AccountID      string `cbor:"2,keyasint"`
	HashHex        string `cbor:"3,keyasint"`
	Label          string `cbor:"4,keyasint"`
	Scopes         Scope  `cbor:"5,keyasint"`
	CreatedTsMs    int64  `cbor:"6,keyasint"`
	LastSeenTsMs   int64  `cbor:"7,keyasint,omitempty"`
	RevokedTsMs    int64  `cbor:"8,keyasint,omitempty"`
	RevokedBy      string `cbor:"9,keyasint,omitempty"`
	RevokeReason   string `cbor:"10,keyasint,omitempty"`
	UAClass        string `cbor:"11,keyasint,omitempty"`
	IPCountryFirst string `cbor:"12,keyasint,omitempty"`
}

// Live reports whether the key still works.
func (k *Key) Live() bool { return k.RevokedTsMs == 0 }

// State is the access part of the replicated state.
type State struct {
	Accounts  map[string]*Account `cbor:"1,keyasint"`
	Keys      map[string]*Key     `cbor:"2,keyasint"`
	KeyByHash map[string]string   `cbor:"3,keyasint"` // hash hex -> key id
	Faucet    FaucetParams        `cbor:"4,keyasint"`
	// SignupsPerHour caps signups cluster-wide per rolling hour (0 = the
	// default); SignupTsMs are the times of the signups of the last hour,
	// oldest first, at most SignupsPerHour of them.
	SignupsPerHour int     `cbor:"5,keyasint,omitempty"`
	SignupTsMs     []int64 `cbor:"6,keyasint,omitempty"`
}

// FaucetParams size the testnet faucet. Fixed at genesis.
type FaucetParams struct {
	GrantMsat     int64 `cbor:"1,keyasint"`
	GrantsPerHour int   `cbor:"2,keyasint"`
}

// Faucet defaults: 1,000,000 sats (0.01 test BTC) a grant, three grants per
// rolling hour per account — enough to trade at size, too little to farm.
const (
	DefaultFaucetGrantMsat     = 1_000_000 * 1000
	DefaultFaucetGrantsPerHour = 3
	faucetWindowMs             = 60 * 60 * 1000
)

// DefaultSignupsPerHour is the cluster-wide signup cap per rolling hour:
// 3,000, about one a second sustained, far above organic testnet signups
// (and the per-address budget lets a few hundred addresses reach it), yet
// a flood of forged addresses grows State by at most 72,000 accounts a
// day, each a few hundred bytes with its bounded histories empty.
const DefaultSignupsPerHour = 3000

// SignupWindowMs is the signup cap's rolling window.
const SignupWindowMs = 60 * 60 * 1000

// NewState returns an empty access state.
func NewState() *State {
	return &State{
		Accounts:  map[string]*Account{},
		Keys:      map[string]*Key{},
		KeyByHash: map[string]string{},
		Faucet:    FaucetParams{GrantMsat: DefaultFaucetGrantMsat, GrantsPerHour: DefaultFaucetGrantsPerHour},
	}
}

// FillNil repairs nil maps after decoding an older snapshot.
func (s *State) FillNil() {
	if s.Accounts == nil {
		s.Accounts = map[string]*Account{}
	}
	if s.Keys == nil {
		s.Keys = map[string]*Key{}
	}
	if s.KeyByHash == nil {
		s.KeyByHash = map[string]string{}
	}
}

// KeyByHashHex finds a key by the hex SHA-256 of its value.
func (s *State) KeyByHashHex(h string) *Key {
	id, ok := s.KeyByHash[h]
	if !ok {
		return nil
	}
	return s.Keys[id]
}

// AccountKeys returns the account's keys in creation order.
func (s *State) AccountKeys(accountID string) []*Key {
	a := s.Accounts[accountID]
	if a == nil {
		return nil
	}
	out := make([]*Key, 0, len(a.KeyIDs))
	for _, id := range a.KeyIDs {
		if k := s.Keys[id]; k != nil {
			out = append(out, k)
		}
	}
	return out
}

// LiveKeys counts an account's live keys.
func (s *State) LiveKeys(accountID string) int {
	n := 0
	for _, k := range s.AccountKeys(accountID) {
		if k.Live() {
			n++
		}
	}
	return n
}

// FaucetGrantsLeft is how many grants the account may still take in the
// rolling hour ending at nowMs.
func (s *State) FaucetGrantsLeft(accountID string, nowMs int64) int {
	a := s.Accounts[accountID]
	if a == nil {
		return 0
	}
	used := 0
	for _, ts := range a.FaucetGrantsTsMs {
		if ts > nowMs-faucetWindowMs {
			used++
		}
	}
	if left := s.Faucet.GrantsPerHour - used; left > 0 {
		return left
	}
	return 0
}

// AccountIDs returns all account ids, sorted.
func (s *State) AccountIDs() []string {
	ids := make([]string, 0, len(s.Accounts))
	for id := range s.Accounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
