package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/usdx"
)

func (w *tradeWorld) porSnap(r *replica) (snap *por.Snapshot, hist []por.HistoryEntry) {
	r.m.Read(func(st *State, _ uint64) { snap, hist = st.PoR.Latest, st.PoR.History })
	return snap, hist
}

// accountSums adds, for every account, all its ledger balances ("acct:ID:"
// prefix: free, reserved, every margin) and its open withdrawals: the
// figure the decisions say a leaf holds, computed without por.
func accountSums(st *State) map[string]int64 {
	out := map[string]int64{}
	for id := range st.Access.Accounts {
		out[id] = st.Ledger.SumPrefix("acct:" + id + ":")
	}
	for _, seq := range st.Funds.Open {
		w := st.Funds.Withdrawals[seq]
		out[w.AccountID] += w.AmountMsat + w.FeeMsat
	}
	return out
}

func TestPoRTreesCoverEveryAccountAndReplicasAgree(t *testing.T) {
	w := newUSDxWorld(t)
	w.mirror = newMarketReplica(t)
	w.syncMirror()
	minter, mk := w.account(5 * btcBTC)
	_, _ = w.account(2 * btcBTC)
	empty, _ := w.account(0)
	trader, tk := w.account(10 * btcBTC)
	wantOK(t, w.order(trader, tk, levered(mktOrder("o1", "BTC-PERP", "buy", 200_000), 10)))
	created(t, w.order(trader, tk, levered(limitOrder("o2", "BTC-PERP", "buy", 50_000, usdQ8(90_000)), 5)), "resting")
	w.mintN(minter, mk, 1000)
	wantOK(t, w.cmd(minter, mk, CmdUSDxStake, USDxAmountPayload{Amount: 300}, ""))
	before := w.ts
	w.walkTo((w.ts/por.CadenceMs + 1) * por.CadenceMs)
	wantOK(t, w.print("BTCUSD", usdQ8(100_100)))

	snap, hist := w.porSnap(w.replica)
	if snap == nil || snap.TsMs <= before || snap.TsMs/por.CadenceMs != w.now()/por.CadenceMs {
		t.Fatalf("no tree for this minute: %+v (now %d)", snap, w.now())
	}
	if !snap.Consolidated || snap.Status != por.StatusClean || len(snap.Problems) != 0 {
		t.Fatalf("status %s consolidated %v problems %v", snap.Status, snap.Consolidated, snap.Problems)
	}
	var sums map[string]int64
	var st0 struct {
		credited, paid, venue int64
		supply, outside       int64
		holder                usdx.Holder
		staked, shares        int64
	}
	w.m.Read(func(st *State, _ uint64) {
		sums = accountSums(st)
		st0.credited, st0.paid = st.Ledger.CreditedMsat, st.Ledger.PaidMsat
		st0.venue = st.Ledger.SumPrefix("venue:") - st.Ledger.Balance(usdx.YieldEscrow) - st.Ledger.Balance(ledger.PendingWithdrawals)
		st0.supply, st0.outside = st.USDx.Supply, st.USDx.Outside
		st0.holder = st.USDx.Holder(minter)
		st0.staked, st0.shares = st.USDx.Staked, st.USDx.SusdxSupply
	})
	var total int64
	for id, v := range sums {
		total += v
		i := snap.Msat.Index(id)
		if i < 0 || snap.Msat.Amounts[i] != v {
			t.Fatalf("%s: leaf %d, balances %d", id, i, v)
		}
	}
	if snap.Msat.LeafCount() != 4 || snap.Msat.Total != total || total == 0 {
		t.Fatalf("sats tree: %d leaves, total %d, accounts sum to %d", snap.Msat.LeafCount(), snap.Msat.Total, total)
	}
	if i := snap.Msat.Index(empty); snap.Msat.Amounts[i] != 0 {
		t.Fatal("the empty account's leaf is not 0")
	}
	if snap.ReservesMsat != st0.credited-st0.paid || snap.DriftMsat != snap.ReservesMsat-snap.LiabilitiesMsat || snap.DriftMsat != st0.venue {
		t.Fatalf("reserves %d liabilities %d drift %d; venue's own %d", snap.ReservesMsat, snap.LiabilitiesMsat, snap.DriftMsat, st0.venue)
	}
	// The USDx tree: the minter holds 700 and 300 staked (the pool is
	// all theirs), in micro-USDx.
	ui := snap.Usdx.Index(minter)
	want := (st0.holder.Usdx+st0.holder.Pending+st0.holder.Withdrawing)*por.MicroPerUsdx + st0.holder.Susdx*st0.staked*por.MicroPerUsdx/st0.shares
	if ui < 0 || snap.Usdx.Amounts[ui] != want || want != 1000*por.MicroPerUsdx || snap.Usdx.Total != (st0.supply-st0.outside)*por.MicroPerUsdx {
		t.Fatalf("USDx leaf %d (want %d), total %d, supply %d", snap.Usdx.Amounts[ui], want, snap.Usdx.Total, st0.supply)
	}
	if !snap.Vault.Verified || !snap.Vault.HasNet || snap.Vault.NetPctQ9 != 0 || snap.Vault.QuantumQ9 != 1_000_000 {
		t.Fatalf("vault %+v", snap.Vault)
	}
	// The account's tag is recomputable by the holder of its key.
	keySum := sha256.Sum256([]byte(mk))
	if tag := por.AccountTag(keySum[:], por.AssetMsat, minter, snap.TsMs); snap.Msat.Tags[snap.Msat.Index(minter)] != tag {
		t.Fatal("the tag is not the HMAC under the key's hash")
	}
	if strings.Contains(hex.EncodeToString(snap.Msat.Tags[0][:]), "acc_") {
		t.Fatal("tag leaks")
	}
	// Every leaf's proof verifies against the stored root.
	for _, tr := range []*por.TreeState{snap.Msat, snap.Usdx} {
		full, err := por.Build(tr.Salt, tr.Leaves())
		if err != nil || full.Root().Hash != tr.RootHash || int64(full.Root().Sum) != tr.Total {
			t.Fatalf("rebuilt tree differs: %v", err)
		}
		for i := range tr.Accounts {
			d, err := por.NewProofDoc(por.AssetMsat, full, tr.Salt, tr.Tags[i], i, tr.TsMs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Verify(hex.EncodeToString(tr.RootHash[:])); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The mirror built the same trees at the same entry.
	msnap, mhist := w.porSnap(w.mirror)
	if msnap.Msat.RootHash != snap.Msat.RootHash || msnap.Usdx.RootHash != snap.Usdx.RootHash || len(mhist) != len(hist) {
		t.Fatal("the mirror's roots differ")
	}
	if w.hash() != w.mirror.hash() {
		t.Fatal("state hashes differ")
	}
	// One tree per minute: a second entry in the same minute builds none.
	n := len(hist)
	wantOK(t, w.print("BTCUSD", usdQ8(100_200)))
	if _, h2 := w.porSnap(w.replica); len(h2) != n {
		t.Fatalf("a second tree in the same minute (%d -> %d)", n, len(h2))
	}
	w.walkTo(w.ts + por.CadenceMs)
	wantOK(t, w.print("BTCUSD", usdQ8(100_200)))
	if _, h2 := w.porSnap(w.replica); len(h2) != n+1 {
		t.Fatalf("no tree in the next minute (%d -> %d)", n, len(h2))
	}
}

// A drift shows as drift: when the house book pays a winner more than the
// venue earned, reserves no longer cover what traders are owed, and the
// status pages.
func TestPoRShortfallPages(t *testing.T) {
	w := newTradeWorld(t)
	trader, tk := w.account(10 * btcBTC)
	_, _ = w.account(1 * btcBTC)
	wantOK(t, w.order(trader, tk, levered(mktOrder("o1", "BTC-PERP", "buy", 1_000_000), 10)))
	w.walkTo((w.ts/por.CadenceMs + 1) * por.CadenceMs)
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	snap, _ := w.porSnap(w.replica)
	if snap.Status != por.StatusClean || snap.DriftMsat <= 0 {
		t.Fatalf("before: %s drift %d", snap.Status, snap.DriftMsat)
	}
	for p := int64(101_000); p <= 120_000; p += 1000 {
		wantOK(t, w.print("BTCUSD", usdQ8(p)))
	}
	wantOK(t, w.order(trader, tk, mktOrder("o2", "BTC-PERP", "sell", 1_000_000)))
	w.walkTo((w.ts/por.CadenceMs + 1) * por.CadenceMs)
	wantOK(t, w.print("BTCUSD", usdQ8(120_000)))
	snap, _ = w.porSnap(w.replica)
	var house int64
	w.m.Read(func(st *State, _ uint64) { house = st.Ledger.Balance(ledger.House) })
	if house >= 0 || snap.DriftMsat >= 0 || snap.Status != por.StatusPage || !snap.Consolidated {
		t.Fatalf("after a winner: house %d drift %d status %s", house, snap.DriftMsat, snap.Status)
	}
	if snap.ReservesMsat-snap.LiabilitiesMsat != snap.DriftMsat {
		t.Fatal("drift is not reserves - liabilities")
	}
}
