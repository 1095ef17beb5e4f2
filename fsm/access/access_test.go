package access

import (
	"fmt"
	"runtime"
	"testing"
)

func hash(i int) string { return fmt.Sprintf("%064x", i) }

func newAccount(t *testing.T, s *State, id string) *Key {
	t.Helper()
	if ref := s.Signup(NewAccount{AccountID: id, KeyID: "k_" + id, KeyHashHex: hash(len(s.Keys) + 1000)}, 1); ref != nil {
		t.Fatal(ref)
	}
	return s.Keys["k_"+id]
}

func TestScopesParseAndName(t *testing.T) {
	if ParseScope("trade") != ScopeTrade || ParseScope("admin-sessions") != ScopeAdminSessions || ParseScope("root") != 0 {
		t.Fatal("parse")
	}
	if got := (ScopeRead | ScopeWithdraw).Names(); len(got) != 2 || got[0] != "read" || got[1] != "withdraw" {
		t.Fatalf("names %v", got)
	}
	if ScopeTrade.Has(ScopeRead) || !ScopeAll.Has(ScopeTrade|ScopeRead) || !ScopeRead.Has(0) {
		t.Fatal("has")
	}
}

func TestSignupRefusesDuplicatesAndBadInput(t *testing.T) {
	s := NewState()
	newAccount(t, s, "a")
	for name, p := range map[string]NewAccount{
		"dup account": {AccountID: "a", KeyID: "k2", KeyHashHex: hash(1)},
		"dup key id":  {AccountID: "b", KeyID: "k_a", KeyHashHex: hash(2)},
		"dup hash":    {AccountID: "c", KeyID: "k3", KeyHashHex: s.Keys["k_a"].HashHex},
		"short hash":  {AccountID: "d", KeyID: "k4", KeyHashHex: "ab"},
	} {
		before := len(s.Accounts)
		if ref := s.Signup(p, 2); ref == nil {
			t.Errorf("%s accepted", name)
		}
		if len(s.Accounts) != before {
			t.Errorf("%s changed state", name)
		}
	}
}

func TestMintIntersectsAndCaps(t *testing.T) {
	s := NewState()
	master := newAccount(t, s, "a")
	readOnly := ScopeRead
	k, ref := s.Mint(master, NewKey{KeyID: "r", KeyHashHex: hash(1), Scopes: &readOnly}, 2)
	if ref != nil || k.Scopes != ScopeRead {
		t.Fatalf("mint %v %v", k, ref)
	}
	wide := ScopeAll
	k2, _ := s.Mint(k, NewKey{KeyID: "r2", KeyHashHex: hash(2), Scopes: &wide}, 3)
	if k2.Scopes != ScopeRead {
		t.Fatalf("a read key minted %v", k2.Scopes)
	}
	for i := 3; s.LiveKeys("a") < MaxLiveKeys; i++ {
		if _, ref := s.Mint(master, NewKey{KeyID: fmt.Sprint(i), KeyHashHex: hash(i)}, 4); ref != nil {
			t.Fatal(ref)
		}
	}
	if _, ref := s.Mint(master, NewKey{KeyID: "over", KeyHashHex: hash(999)}, 5); ref == nil || ref.Code != "session_limit" {
		t.Fatalf("21st key: %v", ref)
	}
	if _, ok := s.Keys["over"]; ok {
		t.Fatal("refused mint left a key")
	}
}

func TestRevokeAllButCurrentAndActor(t *testing.T) {
	s := NewState()
	master := newAccount(t, s, "a")
	other := newAccount(t, s, "b")
	for i := 0; i < 3; i++ {
		s.Mint(master, NewKey{KeyID: fmt.Sprint("m", i), KeyHashHex: hash(10 + i)}, 2)
	}
	ids, ref := s.Revoke(master, "", true, 5)
	if ref != nil || len(ids) != 3 {
		t.Fatalf("revoked %v %v", ids, ref)
	}
	if _, ref := s.Actor("a", "m0", 0); ref == nil || ref.Code != "unauthorized" {
		t.Fatal("a revoked key still acts")
	}
	if _, ref := s.Actor("a", master.ID, ScopeRead); ref != nil {
		t.Fatal("the caller's key was revoked too")
	}
	if _, ref := s.Revoke(master, other.ID, false, 6); ref == nil || ref.Code != "not_found" {
		t.Fatal("revoking another account's key must look like an unknown key")
	}
	if _, ref := s.Actor("b", master.ID, 0); ref == nil {
		t.Fatal("a key acted for another account")
	}
}

func TestRevokedKeysListStaysBounded(t *testing.T) {
	s := NewState()
	master := newAccount(t, s, "a")
	for i := 0; i < MaxKeysPerAccount+50; i++ {
		k, ref := s.Mint(master, NewKey{KeyID: fmt.Sprint("k", i), KeyHashHex: hash(100 + i)}, int64(i))
		if ref != nil {
			t.Fatal(ref)
		}
		s.Revoke(master, k.ID, false, int64(i))
	}
	if n := len(s.Accounts["a"].KeyIDs); n > MaxKeysPerAccount {
		t.Fatalf("%d keys listed, bound %d", n, MaxKeysPerAccount)
	}
	if len(s.Keys) != len(s.KeyByHash) {
		t.Fatal("forgotten keys left hashes behind")
	}
	if _, ref := s.Actor("a", master.ID, ScopeAll); ref != nil {
		t.Fatal("the live master key was forgotten")
	}
}

func TestFaucetRollingHour(t *testing.T) {
	s := NewState()
	newAccount(t, s, "a")
	const hour = 3_600_000
	for i := 0; i < DefaultFaucetGrantsPerHour; i++ {
		if ref := s.TakeFaucetGrant("a", int64(1000+i)); ref != nil {
			t.Fatal(ref)
		}
	}
	if ref := s.TakeFaucetGrant("a", 2000); ref == nil || ref.Code != "rate_limited" {
		t.Fatal("grant past the hourly limit")
	}
	if left := s.FaucetGrantsLeft("a", 1000+hour-1); left != 0 {
		t.Fatalf("the first grant is still in the window: %d left", left)
	}
	if left := s.FaucetGrantsLeft("a", 1000+hour); left != 1 {
		t.Fatalf("exactly an hour later the first grant leaves the window: %d left", left)
	}
	if ref := s.TakeFaucetGrant("nobody", 1); ref == nil || ref.Code != "not_found" {
		t.Fatal("unknown account")
	}
}

// TestSignupCostDoesNotGrowWithTheWindow: under a raised cap (the bench
// deployment) an hour can hold a hundred thousand signups; each signup
// once copied the whole window, so 20,000 of them allocated about 1.6 GB.
// The window must also still expire and count exactly.
func TestSignupCostDoesNotGrowWithTheWindow(t *testing.T) {
	s := NewState()
	s.SignupsPerHour = 1 << 30
	const n = 20_000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		id := fmt.Sprintf("a%d", i)
		if ref := s.Signup(NewAccount{AccountID: id, KeyID: "k_" + id, KeyHashHex: hash(i)}, int64(1+i/10)); ref != nil {
			t.Fatal(ref)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 4<<10 {
		t.Fatalf("a signup allocates %d bytes on average with up to %d in the window, want a few hundred", per, n)
	}
	if got := len(s.recentSignups(2_000)); got != n {
		t.Fatalf("%d signups in the window, want %d", got, n)
	}
	// An hour after the 1,000th signup's time, the first 10,000 have left.
	if got := len(s.recentSignups(1_000 + SignupWindowMs)); got != n-10_000 {
		t.Fatalf("%d signups in the window an hour on, want %d", got, n-10_000)
	}
	if ref := s.Signup(NewAccount{AccountID: "late", KeyID: "k_late", KeyHashHex: hash(n)}, 1_000+SignupWindowMs); ref != nil {
		t.Fatal(ref)
	}
	if len(s.SignupTsMs) != n-10_000+1 || s.SignupTsMs[0] != 1_001 || s.SignupTsMs[len(s.SignupTsMs)-1] != 1_000+SignupWindowMs {
		t.Fatalf("window after a late signup: %d entries from %d", len(s.SignupTsMs), s.SignupTsMs[0])
	}
}
