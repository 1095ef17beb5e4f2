package access

import (
	"net/http"

	"github.com/perpd/perpd/fsm/wire"
)

// NewAccount is what signup carries: ids and the key hash are drawn by the
// proposing node.
type NewAccount struct {
	AccountID   string `cbor:"1,keyasint"`
	UserID      string `cbor:"2,keyasint"`
	RailAddress string `cbor:"3,keyasint"`
	KeyID       string `cbor:"4,keyasint"`
	KeyHashHex  string `cbor:"5,keyasint"`
	UAClass     string `cbor:"6,keyasint,omitempty"`
}

// Signup creates an account and its full-scope master key, unless the
// cluster-wide cap of signups per rolling hour is reached.
func (s *State) Signup(p NewAccount, nowMs int64) *wire.Refusal {
	if p.AccountID == "" || p.KeyID == "" || len(p.KeyHashHex) != 64 {
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "signup needs account id, key id and key hash")
	}
	recent := s.recentSignups(nowMs)
	if reopensMs, full := s.SignupsReopenMs(nowMs); full {
		return wire.Refuse(http.StatusTooManyRequests, wire.CodeRateLimited,
			"signups are capped at %d per rolling hour across the venue; the next opens at %d ms (in %d s)",
			s.signupCap(), reopensMs, (reopensMs-nowMs+999)/1000)
	}
	if _, dup := s.Accounts[p.AccountID]; dup {
		return wire.Refuse(http.StatusConflict, wire.CodeConflict, "account id already exists")
	}
	if ref := s.checkNewKey(p.KeyID, p.KeyHashHex); ref != nil {
		return ref
	}
	// Appended in place: the expired prefix is dropped by reslicing, and
	// append copies only the window when it outgrows the array, so a
	// signup costs O(1) amortised however many the window holds (a copy
	// of the window every signup cost O(window): 37 GB of copies for
	// 100,000 signups in one hour under a raised cap).
	s.SignupTsMs = append(recent, nowMs)
	s.Accounts[p.AccountID] = &Account{ID: p.AccountID, UserID: p.UserID, RailAddress: p.RailAddress, CreatedTsMs: nowMs}
	s.addKey(&Key{ID: p.KeyID, AccountID: p.AccountID, HashHex: p.KeyHashHex, Label: "master",
		Scopes: ScopeAll, CreatedTsMs: nowMs, UAClass: p.UAClass})
	return nil
}

// SignupsReopenMs reports whether the signup cap is reached at nowMs and,
// if so, when the oldest signup of the window leaves it.
func (s *State) SignupsReopenMs(nowMs int64) (int64, bool) {
	recent := s.recentSignups(nowMs)
	if limit := s.signupCap(); len(recent) >= limit {
		return recent[len(recent)-limit] + SignupWindowMs, true
	}
	return 0, false
}

func (s *State) signupCap() int {
	if s.SignupsPerHour > 0 {
		return s.SignupsPerHour
	}
	return DefaultSignupsPerHour
}

// recentSignups is the tail of SignupTsMs inside the window ending at
// nowMs: a signup at exactly nowMs-SignupWindowMs has left it.
func (s *State) recentSignups(nowMs int64) []int64 {
	i := 0
	for i < len(s.SignupTsMs) && s.SignupTsMs[i] <= nowMs-SignupWindowMs {
		i++
	}
	return s.SignupTsMs[i:]
}

func (s *State) checkNewKey(keyID, hashHex string) *wire.Refusal {
	if _, dup := s.Keys[keyID]; dup {
		return wire.Refuse(http.StatusConflict, wire.CodeConflict, "key id already exists")
	}
	if _, dup := s.KeyByHash[hashHex]; dup {
		return wire.Refuse(http.StatusConflict, wire.CodeConflict, "key already exists")
	}
	return nil
}

func (s *State) addKey(k *Key) {
	s.Keys[k.ID] = k
	s.KeyByHash[k.HashHex] = k.ID
	a := s.Accounts[k.AccountID]
	a.KeyIDs = append(a.KeyIDs, k.ID)
	s.forgetOldRevoked(a)
}

// forgetOldRevoked keeps the listed keys bounded by dropping the oldest
// revoked ones (live keys are capped separately).
func (s *State) forgetOldRevoked(a *Account) {
	for len(a.KeyIDs) > MaxKeysPerAccount {
		for i, id := range a.KeyIDs {
			if k := s.Keys[id]; k != nil && !k.Live() {
				delete(s.KeyByHash, k.HashHex)
				delete(s.Keys, id)
				a.KeyIDs = append(a.KeyIDs[:i:i], a.KeyIDs[i+1:]...)
				break
			}
		}
	}
}

// Actor checks that the acting key is live, belongs to the account and
// holds the scope. Every keyed command re-checks at apply time, so a key
// revoked earlier in the log can never act, whichever node it called.
func (s *State) Actor(accountID, keyID string, need Scope) (*Key, *wire.Refusal) {
	k := s.Keys[keyID]
	if k == nil || !k.Live() || k.AccountID != accountID {
		return nil, wire.Refuse(http.StatusUnauthorized, wire.CodeUnauthorized, "API key is not valid")
	}
	if !k.Scopes.Has(need) {
		return nil, wire.Refuse(http.StatusForbidden, wire.CodeInsufficientScope, "this key lacks the %q scope", need.String())
	}
	return k, nil
}

// AccountIDOf returns the id of the account whose id is b, the state's
// own string, without allocating; ok is false when there is none (or s is
// nil). Decoding a command uses it so that the command shares the id.
func (s *State) AccountIDOf(b []byte) (id string, ok bool) {
	if s == nil {
		return "", false
	}
	if a, found := s.Accounts[string(b)]; found && a.ID == string(b) {
		return a.ID, true
	}
	return "", false
}

// KeyIDOf is AccountIDOf for a key id.
func (s *State) KeyIDOf(b []byte) (id string, ok bool) {
	if s == nil {
		return "", false
	}
	if k, found := s.Keys[string(b)]; found && k.ID == string(b) {
		return k.ID, true
	}
	return "", false
}

// Touch records a key's use.
func (s *State) Touch(keyID string, nowMs int64) {
	if k := s.Keys[keyID]; k != nil {
		k.Touch(nowMs)
	}
}

// Touch records the use of a key the caller already holds (Actor's), so
// that the keys map is not probed again.
func (k *Key) Touch(nowMs int64) {
	if nowMs > k.LastSeenTsMs {
		k.LastSeenTsMs = nowMs
	}
}

// NewKey is what a session mint carries.
type NewKey struct {
	KeyID      string `cbor:"1,keyasint"`
	KeyHashHex string `cbor:"2,keyasint"`
	Label      string `cbor:"3,keyasint"`
	// Scopes requested; nil means "the minter's own".
	Scopes  *Scope `cbor:"4,keyasint,omitempty"`
	UAClass string `cbor:"5,keyasint,omitempty"`
}

// Mint creates a delegate key whose scopes are the requested ones
// intersected with the minter's, so a key never mints a more capable key.
func (s *State) Mint(minter *Key, p NewKey, nowMs int64) (*Key, *wire.Refusal) {
	if p.KeyID == "" || len(p.KeyHashHex) != 64 {
		return nil, wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "mint needs key id and key hash")
	}
	if ref := s.checkNewKey(p.KeyID, p.KeyHashHex); ref != nil {
		return nil, ref
	}
	if s.LiveKeys(minter.AccountID) >= MaxLiveKeys {
		return nil, wire.Refuse(http.StatusForbidden, wire.CodeSessionLimit, "this account already has %d live keys; revoke one first", MaxLiveKeys)
	}
	scopes := minter.Scopes
	if p.Scopes != nil {
		scopes = *p.Scopes & minter.Scopes
	}
	k := &Key{ID: p.KeyID, AccountID: minter.AccountID, HashHex: p.KeyHashHex, Label: p.Label,
		Scopes: scopes, CreatedTsMs: nowMs, UAClass: p.UAClass}
	s.addKey(k)
	return k, nil
}

// Revoke revokes one key of the caller's account, or every live key but
// the caller's. It returns the revoked ids in creation order.
func (s *State) Revoke(caller *Key, keyID string, allButCurrent bool, nowMs int64) ([]string, *wire.Refusal) {
	var targets []*Key
	if allButCurrent {
		for _, k := range s.AccountKeys(caller.AccountID) {
			if k.Live() && k.ID != caller.ID {
				targets = append(targets, k)
			}
		}
	} else {
		k := s.Keys[keyID]
		if k == nil || k.AccountID != caller.AccountID {
			return nil, wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "no key %q on this account", keyID)
		}
		if k.Live() {
			targets = append(targets, k)
		}
	}
	reason := "revoked"
	if allButCurrent {
		reason = "all_but_current"
	}
	ids := []string{}
	for _, k := range targets {
		k.RevokedTsMs, k.RevokedBy, k.RevokeReason = nowMs, caller.ID, reason
		ids = append(ids, k.ID)
	}
	return ids, nil
}

// TakeFaucetGrant records a grant if the hourly limit allows one.
func (s *State) TakeFaucetGrant(accountID string, nowMs int64) *wire.Refusal {
	a := s.Accounts[accountID]
	if a == nil {
		return wire.Refuse(http.StatusNotFound, wire.CodeNotFound, "no such account")
	}
	if s.FaucetGrantsLeft(accountID, nowMs) == 0 {
		return wire.Refuse(http.StatusTooManyRequests, wire.CodeRateLimited,
			"faucet limit reached: %d grants per rolling hour", s.Faucet.GrantsPerHour)
	}
	kept := a.FaucetGrantsTsMs[:0]
	for _, ts := range a.FaucetGrantsTsMs {
		if ts > nowMs-faucetWindowMs {
			kept = append(kept, ts)
		}
	}
	a.FaucetGrantsTsMs = append(kept, nowMs)
	return nil
}
