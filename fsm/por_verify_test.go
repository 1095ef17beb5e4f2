package fsm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"testing"

	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/internal/porverify"
)

// TestPoRIndependentVerifierOnARealTree: a tree built by the state
// machine over 39 accounts (zero, one msat, ordinary and very large
// balances; an open position and a resting order) is checked by
// internal/porverify, which shares no code with fsm/por: the root rebuilt
// from every account's own figure and its key's tag is the published one,
// and every account's proof, as JSON, leads from its own balance to the
// published root and total. A replica restored from a snapshot keeps the
// root and serves the same proofs.
func TestPoRIndependentVerifierOnARealTree(t *testing.T) {
	w := newTradeWorld(t)
	keys := map[string]string{}
	amounts := []int64{0, 1, 1000, 0, 7 * btcBTC, 1_000_000 * btcBTC, 3, 0, 20_000_000 * btcBTC, 123_456_789}
	for i := 0; i < 38; i++ {
		acct, key := w.account(amounts[i%len(amounts)])
		keys[acct] = key
	}
	trader, tk := w.account(10 * btcBTC)
	keys[trader] = tk
	wantOK(t, w.order(trader, tk, levered(mktOrder("o1", "BTC-PERP", "buy", 200_000), 10)))
	created(t, w.order(trader, tk, levered(limitOrder("o2", "BTC-PERP", "buy", 50_000, usdQ8(90_000)), 5)), "resting")
	w.walkToNextPoR()
	wantOK(t, w.print("BTCUSD", usdQ8(100_100)))

	snap, _ := w.porSnap(w.replica)
	tr := snap.Msat
	if !snap.Consolidated || tr.LeafCount() != len(keys) {
		t.Fatalf("consolidated %v problems %v, %d leaves for %d accounts", snap.Consolidated, snap.Problems, tr.LeafCount(), len(keys))
	}
	var sums map[string]int64
	w.m.Read(func(st *State, _ uint64) { sums = accountSums(st) })
	pub := porverify.Published{RootHash: hex.EncodeToString(tr.RootHash[:]), TotalMsat: tr.Total, LeafCount: tr.LeafCount(),
		RootSaltHex: hex.EncodeToString(tr.Salt[:]), TsMs: tr.TsMs}

	// The root rebuilt from what each account holds, leaves in tag order.
	type lf struct {
		tag []byte
		bal int64
	}
	var lfs []lf
	for acct, key := range keys {
		lfs = append(lfs, lf{porverify.Tag(key, por.AssetMsat, acct, tr.TsMs), sums[acct]})
	}
	sort.Slice(lfs, func(i, j int) bool { return bytes.Compare(lfs[i].tag, lfs[j].tag) < 0 })
	var tags [][]byte
	var bals []int64
	for _, l := range lfs {
		tags, bals = append(tags, l.tag), append(bals, l.bal)
	}
	if root, total := porverify.Root(tr.Salt[:], tags, bals); root != pub.RootHash || total.Int64() != tr.Total {
		t.Fatalf("independent root %s / %s, published %s / %d", root, total, pub.RootHash, tr.Total)
	}

	proofs := func(ts *por.TreeState) map[string][]byte {
		full, err := por.BuildWidth(ts.Salt, ts.Leaves(), ts.Width())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for i, acct := range ts.Accounts {
			d, err := por.NewProofDoc(por.AssetMsat, full, ts.Salt, ts.Tags[i], i, ts.TsMs)
			if err != nil {
				t.Fatal(err)
			}
			if out[acct], err = json.Marshal(d); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	served := proofs(tr)
	var total int64
	zero, large := 0, 0
	for acct, key := range keys {
		bal, err := porverify.Check(served[acct], pub, key, acct)
		if err != nil {
			t.Fatalf("%s: %v", acct, err)
		}
		if bal != sums[acct] {
			t.Fatalf("%s: leaf %d, the account holds %d", acct, bal, sums[acct])
		}
		if bal == 0 {
			zero++
		}
		if bal >= 1_000_000*btcBTC {
			large++
		}
		total += bal
		// Another account's key does not claim the leaf.
		if _, err := porverify.Check(served[acct], pub, keys[trader], acct); acct != trader && err == nil {
			t.Fatalf("%s's leaf verifies under another account's key", acct)
		}
	}
	// The verifier can fail: one msat more on a leaf is refused.
	var doc map[string]any
	_ = json.Unmarshal(served[trader], &doc)
	doc["leaf"].(map[string]any)["balanceMsat"] = strconv.FormatInt(sums[trader]+1, 10)
	if b, _ := json.Marshal(doc); b != nil {
		if _, err := porverify.Check(b, pub, tk, trader); err == nil {
			t.Fatal("a doctored balance verified")
		}
	}
	if total != tr.Total || zero < 8 || large < 7 {
		t.Fatalf("leaves add to %d, total %d; %d zero, %d large", total, tr.Total, zero, large)
	}

	// A restored replica keeps the tree and serves the same proofs.
	data, err := w.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	other := &replica{t: t, m: NewMachine(Options{}), next: w.next}
	if err := other.m.RestoreAt(data, w.next-1); err != nil {
		t.Fatal(err)
	}
	var rsnap *por.Snapshot
	other.m.Read(func(st *State, _ uint64) { rsnap = st.PoR.Latest })
	if rsnap.Msat.RootHash != tr.RootHash || rsnap.Msat.Width() != tr.Width() || rsnap.Usdx.RootHash != snap.Usdx.RootHash {
		t.Fatal("the restored replica's roots differ")
	}
	for acct, b := range proofs(rsnap.Msat) {
		if !bytes.Equal(b, served[acct]) {
			t.Fatalf("%s: the restored replica serves a different proof", acct)
		}
	}
	if w.hash() != other.hash() {
		t.Fatal("state hashes differ after restore")
	}
}
