package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/ledger"
)

// BuildPoR's snapshots are the same bytes as before its walks went onto
// every core and its sort onto integer keys (the golden hash was taken at
// 5324fa2, the serial walks and the entry sort), build after build of a
// state that changes between them: 18,000 traders with positions in two
// markets (so the ledger and position walks split into chunks), the mid
// moving, balances moving, accounts joining, keys rotated and revoked, a
// ledger account no account owns, and a restore from a snapshot. Each
// build is taken at feature levels 6, 7 and 8 (the running sum's and the
// exact sum's paths, the drift without and with the positions at the
// mark) on one core and on several.
func TestBuildPoRBytesAcrossChangingState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a world of 18,000 traders")
	}
	const n = 18_000
	w := newBenchWorld(t, n, btcBTC)
	entries := make([][]byte, 0, n+n/10)
	for i := range n {
		side := "buy"
		if !riskLong(i) {
			side = "sell"
		}
		entries = append(entries, w.orderCmd(i, levered(mktOrder(fmt.Sprintf("p%d", i), "BTC-PERP", side, 100+int64(i%7)), riskLowLev)))
		if i%10 == 0 {
			entries = append(entries, w.orderCmd(i, levered(mktOrder(fmt.Sprintf("e%d", i), "ETH-PERP", side, 50), riskLowLev)))
		}
	}
	w.runEntries(entries, 256)

	all := sha256.New()
	build := func(step string) {
		t.Helper()
		w.m.Read(func(st *State, _ uint64) {
			level := st.FeatureLevel
			defer func() { st.FeatureLevel = level }()
			for _, lv := range []uint32{6, 7, 8} {
				st.FeatureLevel = lv
				sum, snap := porHashOnCores(t, st, 1, 2, 5)
				all.Write(sum[:])
				t.Logf("%s, level %d: %d sats leaves, status %s, %d problems, sha256 %x", step, lv, snap.Msat.LeafCount(), snap.Status, len(snap.Problems), sum[:8])
			}
		})
	}

	build("opened")
	w.print("BTCUSD", benchBTCMidQ8*103/100)
	w.print("ETHUSD", benchETHMidQ8*97/100)
	build("mid moved")
	entries = entries[:0]
	for i := 0; i < n; i += 3 {
		entries = append(entries, w.orderCmd(i, mktOrder(fmt.Sprintf("q%d", i), "BTC-PERP", "sell", 30)))
	}
	w.runEntries(entries, 256)
	build("balances moved")
	w.addAccounts(n, 700, btcBTC/3)
	build("accounts joined")
	w.m.Read(func(st *State, _ uint64) {
		for i := 0; i < n; i += 11 {
			acct, key := benchAcct(i)
			minter := st.Access.Keys[key]
			sum := sha256.Sum256([]byte("rotated-" + acct))
			k, ref := st.Access.Mint(minter, access.NewKey{KeyID: "rot_" + acct, KeyHashHex: hex.EncodeToString(sum[:]), Label: "rotated"}, st.NowMs)
			if ref != nil {
				t.Fatal(ref)
			}
			if i%2 == 0 { // the usual rotation: the old key revoked
				if _, ref := st.Access.Revoke(k, key, false, st.NowMs); ref != nil {
					t.Fatal(ref)
				}
			}
		}
		for i := 1; i < n; i += 13 { // every key of the account revoked
			_, key := benchAcct(i)
			k := st.Access.Keys[key]
			k.RevokedTsMs = st.NowMs
		}
		if err := st.Ledger.Credit(ledger.Free("ghost"), 5_000); err != nil {
			t.Fatal(err)
		}
	})
	build("keys rotated")
	snap, err := w.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	w.m = NewMachine(Options{})
	if err := w.m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	w.print("BTCUSD", benchBTCMidQ8*99/100)
	build("restored")

	const golden = "d75a4926bd19b27b343f16013f99ec4ddc03c0520cacfef53ab4175d03a35612"
	if got := hex.EncodeToString(all.Sum(nil)); got != golden {
		t.Fatalf("the builds' sha256 %s, the serial build's was %s", got, golden)
	}
}
