package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/wire"
)

// mintDelegate mints keyID on acct with scopes through the minter key.
func (w *railWorld) mintDelegate(acct, minter, keyID string, scopes access.Scope) *Result {
	w.t.Helper()
	sum := sha256.Sum256([]byte(keyID))
	return w.at(w.cmd(CmdMintKey, acct, minter, "", access.NewKey{KeyID: keyID, KeyHashHex: hex.EncodeToString(sum[:]), Scopes: &scopes}))
}

// TestDelegateCannotRevokeAMoreCapableKey: the access review's case. A
// read+admin-sessions delegate revoked the master key (by id, and with
// allButCurrent), after which no key of the account could ever withdraw:
// a delegate cannot mint withdraw and there is no recovery. From
// LevelKeysContained a key revokes only keys whose scopes are all its own
// (403 insufficient_scope by id, changing nothing; allButCurrent leaves
// the others live), and the master still revokes everything.
func TestDelegateCannotRevokeAMoreCapableKey(t *testing.T) {
	for _, level := range []uint32{access.LevelKeysContained - 1, access.LevelKeysContained} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newRailWorldAt(t, level)
			acct, master := w.account(0)
			wantOK(t, w.mintDelegate(acct, master, "ops", access.ScopeRead|access.ScopeAdminSessions))
			wantOK(t, w.mintDelegate(acct, master, "bot", access.ScopeRead|access.ScopeTrade))
			wantOK(t, w.mintDelegate(acct, "ops", "viewer", access.ScopeRead))
			live := func(id string) bool {
				var ok bool
				w.m.Read(func(st *State, _ uint64) { ok = st.Access.Keys[id].Live() })
				return ok
			}
			byID := w.sameTime(w.cmd(CmdRevokeKeys, acct, "ops", "", RevokePayload{KeyID: master}))
			if level < access.LevelKeysContained {
				wantOK(t, byID)
				if live(master) {
					t.Fatal("below the level the delegate revoked the master")
				}
				return
			}
			before := w.hash()
			wantRefused(t, byID, http.StatusForbidden, wire.CodeInsufficientScope)
			if w.hash() != before || !live(master) {
				t.Fatal("a refused revoke changed the state")
			}
			// allButCurrent takes only what the delegate contains.
			res := w.at(w.cmd(CmdRevokeKeys, acct, "ops", "", RevokePayload{AllButCurrent: true}))
			wantOK(t, res)
			if got := string(res.Body); got != `{"revoked":["viewer"]}` {
				t.Fatalf("delegate's allButCurrent revoked %s", got)
			}
			if !live(master) || !live("bot") || live("viewer") {
				t.Fatal("allButCurrent went past the delegate's scopes")
			}
			wantRefused(t, w.sameTime(w.cmd(CmdRevokeKeys, acct, "ops", "", RevokePayload{KeyID: "bot"})), http.StatusForbidden, wire.CodeInsufficientScope)
			// The master holds every scope: it revokes everything.
			res = w.at(w.cmd(CmdRevokeKeys, acct, master, "", RevokePayload{AllButCurrent: true}))
			wantOK(t, res)
			if got := string(res.Body); got != `{"revoked":["ops","bot"]}` {
				t.Fatalf("master's allButCurrent revoked %s", got)
			}
			// A delegate revokes itself.
			wantOK(t, w.mintDelegate(acct, master, "ops2", access.ScopeRead|access.ScopeAdminSessions))
			wantOK(t, w.at(w.cmd(CmdRevokeKeys, acct, "ops2", "", RevokePayload{KeyID: "ops2"})))
			if live("ops2") {
				t.Fatal("a delegate could not revoke itself")
			}
		})
	}
}

// TestMintWithNoScopeLeftIsRefused: a mint asking only for scopes the
// minter lacks made a key that could do nothing and took a live-key slot
// (an explicit empty list is already refused by the HTTP layer). From
// LevelKeysContained it is refused with 400, changing nothing.
func TestMintWithNoScopeLeftIsRefused(t *testing.T) {
	for _, level := range []uint32{access.LevelKeysContained - 1, access.LevelKeysContained} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newRailWorldAt(t, level)
			acct, master := w.account(0)
			wantOK(t, w.mintDelegate(acct, master, "ops", access.ScopeRead|access.ScopeAdminSessions))
			sum := sha256.Sum256([]byte("w"))
			want := access.ScopeWithdraw
			cmd := w.cmd(CmdMintKey, acct, "ops", "", access.NewKey{KeyID: "w", KeyHashHex: hex.EncodeToString(sum[:]), Scopes: &want})
			if level < access.LevelKeysContained {
				res := w.at(cmd)
				wantOK(t, res)
				if got := string(res.Body); got != `{"keyId":"w","scopes":[]}` {
					t.Fatalf("below the level: %s", got)
				}
				return
			}
			before := w.hash()
			wantRefused(t, w.sameTime(cmd), http.StatusBadRequest, wire.CodeValidation)
			if w.hash() != before {
				t.Fatal("a refused mint changed the state")
			}
			// A partial overlap still mints the intersection.
			both := access.ScopeRead | access.ScopeWithdraw
			res := w.at(w.cmd(CmdMintKey, acct, "ops", "", access.NewKey{KeyID: "r", KeyHashHex: hex.EncodeToString(sum[:]), Scopes: &both}))
			wantOK(t, res)
			if got := string(res.Body); got != `{"keyId":"r","scopes":["read"]}` {
				t.Fatalf("intersection: %s", got)
			}
		})
	}
}
