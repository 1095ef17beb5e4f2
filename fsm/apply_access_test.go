package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/wire"
)

// sameTime applies cmd stamped with the world's current time, so the log
// clock does not move and the state hash shows only what the command did.
func (w *railWorld) sameTime(cmd *Command) *Result {
	w.t.Helper()
	cmd.TsMs = w.ts
	return w.apply(cmd)
}

// A refused faucet changes nothing, not even the key's last use.
func TestRefusedFaucetChangesNothing(t *testing.T) {
	w := newRailWorld(t)
	acct, key := w.account(0)
	for range access.DefaultFaucetGrantsPerHour {
		wantOK(t, w.at(w.cmd(CmdFaucet, acct, key, "", nil)))
	}
	wantOK(t, w.at(tickAt(0))) // the key was last seen before this time
	before := w.hash()
	wantRefused(t, w.sameTime(w.cmd(CmdFaucet, acct, key, "", nil)), http.StatusTooManyRequests, wire.CodeRateLimited)
	if w.hash() != before {
		t.Fatal("a refused faucet grant changed the state")
	}
}

func (w *railWorld) signup(i int) *Command {
	id := fmt.Sprintf("cap_%d", i)
	sum := sha256.Sum256([]byte(id))
	return w.cmd(CmdSignup, "", "", "", access.NewAccount{AccountID: id, KeyID: "k" + id, KeyHashHex: hex.EncodeToString(sum[:])})
}

// The signup cap is per rolling hour, cluster-wide, set at genesis: exactly
// the cap succeeds, one more is refused without changing anything and says
// when signups reopen, and they reopen when the oldest leaves the window.
func TestSignupCapPerRollingHour(t *testing.T) {
	const capPerHour = 3
	w := newRailWorld(t)
	wantOK(t, w.at(w.cmd(CmdGenesis, "", "", "", GenesisPayload{FeatureLevel: FeatureLevel, Seed: 1, Deployment: "testnet", SignupsPerHour: capPerHour})))
	first := w.ts + 1
	for i := range capPerHour {
		wantOK(t, w.at(w.signup(i)))
	}
	before := w.hash()
	res := w.sameTime(w.signup(capPerHour))
	wantRefused(t, res, http.StatusTooManyRequests, wire.CodeRateLimited)
	reopens := first + access.SignupWindowMs
	if !strings.Contains(string(res.Body), fmt.Sprintf("opens at %d ms", reopens)) {
		t.Fatalf("refusal does not say when signups reopen: %s", res.Body)
	}
	if w.hash() != before {
		t.Fatal("a refused signup changed the state")
	}
	w.ts = reopens - 2 // the next command is stamped 1 ms before the oldest leaves
	wantRefused(t, w.at(w.signup(capPerHour)), http.StatusTooManyRequests, wire.CodeRateLimited)
	wantOK(t, w.at(w.signup(capPerHour)))
	wantRefused(t, w.sameTime(w.signup(capPerHour+1)), http.StatusTooManyRequests, wire.CodeRateLimited)
	w.m.Read(func(st *State, _ uint64) {
		if len(st.Access.SignupTsMs) != capPerHour {
			t.Fatalf("signup window holds %d times, want %d", len(st.Access.SignupTsMs), capPerHour)
		}
	})
}

// A revocation is an account event with a fresh seq naming the revoked
// keys; revoking nothing emits nothing.
func TestRevokeEmitsSessionRevoked(t *testing.T) {
	w := newRailWorld(t)
	acct, master := w.account(0)
	for i := range 2 {
		sum := sha256.Sum256([]byte(fmt.Sprint("d", i)))
		wantOK(t, w.at(w.cmd(CmdMintKey, acct, master, "", access.NewKey{KeyID: fmt.Sprint("d", i), KeyHashHex: hex.EncodeToString(sum[:])})))
	}
	var seq0 uint64
	w.m.Read(func(st *State, _ uint64) { seq0 = st.Seq })
	res, evs := w.applyEvents(w.cmd(CmdRevokeKeys, acct, master, "", RevokePayload{AllButCurrent: true}))
	wantOK(t, res)
	if len(evs) != 1 || evs[0].Kind != EventSessionRevoked || evs[0].Account != acct || evs[0].Seq != seq0+1 ||
		fmt.Sprint(evs[0].Data.(SessionRevokedView).KeyIDs) != "[d0 d1]" {
		t.Fatalf("events %+v", evs)
	}
	res, evs = w.applyEvents(w.cmd(CmdRevokeKeys, acct, master, "", RevokePayload{KeyID: "d0"}))
	wantOK(t, res)
	if len(evs) != 0 {
		t.Fatalf("revoking a revoked key emitted %+v", evs)
	}
}
