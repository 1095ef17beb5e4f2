package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"runtime"
	"strconv"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/usdx"
)

// porParallelState is a state large enough that BuildPoR's tags and both
// trees are computed on several cores: 20,000 accounts (some with a
// revoked first key, some with a second key), 12,000 USDx holders (one
// whose balance overflows), and one account whose leaf would be negative,
// so the problems the parallel chunks report are in the snapshot too.
func porParallelState(t *testing.T) *State {
	st := porState(t, 20_000)
	st.FeatureLevel = FeatureLevel
	for i := 0; i < 20_000; i += 7 {
		id := "acc_" + strconv.Itoa(i)
		sum := sha256.Sum256([]byte("second-" + id))
		k := &access.Key{ID: "key2_" + id, AccountID: id, HashHex: hex.EncodeToString(sum[:]), Scopes: access.ScopeAll}
		st.Access.Keys[k.ID] = k
		a := st.Access.Accounts[id]
		a.KeyIDs = append(a.KeyIDs, k.ID)
		if i%2 == 0 {
			st.Access.Keys["key_"+id].RevokedTsMs = st.NowMs
		}
	}
	st.USDx = usdx.NewState()
	u := st.USDx
	for i := range 12_000 {
		id := "acc_" + strconv.Itoa(i*3%20_000)
		u.Holders[id] = &usdx.Holder{Usdx: int64(i%500 + 1), Pending: int64(i % 3), Susdx: int64(i % 11), Withdrawing: int64(i % 2)}
		u.Supply += int64(i%500+1) + int64(i%3) + int64(i%2)
		u.SusdxSupply += int64(i % 11)
	}
	u.Staked = u.SusdxSupply * 2
	u.Holders["acc_19999"] = &usdx.Holder{Usdx: math.MaxInt64 / 4} // overflows in micro-USDx: left out, a problem
	st.Ledger.Balances[ledger.Free("acc_5")] = -1                  // a leaf that would be negative
	return st
}

// BuildPoR's snapshot is the same bytes on one core as on several, and
// the same as the serial build's before the trees went parallel (the
// golden hash was taken at 1a8c0db): replicas with different core counts
// must store the same trees.
func TestBuildPoRIsTheSameOnAnyNumberOfCores(t *testing.T) {
	st := porParallelState(t)
	const golden = "fb4734f4721c9021186a88c133fe6fbf97fd4ee486c9cdc84e8bbf6eb6ea7d31"
	sum, snap := porHashOnCores(t, st, 1, 2, 4, 7)
	got := hex.EncodeToString(sum[:])
	t.Logf("%d problems, sha256 %s", len(snap.Problems), got)
	if len(snap.Problems) == 0 || snap.Usdx.LeafCount() == 0 {
		t.Fatalf("the state does not exercise the problem and USDx paths: %q, %d USDx leaves", snap.Problems, snap.Usdx.LeafCount())
	}
	if got != golden {
		t.Fatalf("snapshot sha256 %s, the serial build's was %s", got, golden)
	}
}

// porHashOnCores builds st's snapshot with GOMAXPROCS at each of procs and
// returns the sha256 of its encoding and the first build, failing t when
// two core counts give different bytes.
func porHashOnCores(t *testing.T, st *State, procs ...int) ([32]byte, *por.Snapshot) {
	t.Helper()
	var first [32]byte
	var firstSnap *por.Snapshot
	for i, p := range procs {
		prev := runtime.GOMAXPROCS(p)
		snap := BuildPoR(st)
		runtime.GOMAXPROCS(prev)
		enc, err := Marshal(snap)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(enc)
		if i == 0 {
			first, firstSnap = sum, snap
		} else if sum != first {
			t.Fatalf("GOMAXPROCS %d: snapshot sha256 %x, with GOMAXPROCS %d %x", p, sum, procs[0], first)
		}
	}
	return first, firstSnap
}
