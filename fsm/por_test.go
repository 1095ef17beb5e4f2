package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/trade"
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
	w.walkToNextPoR()
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
	// The drift is the venue's own less what the open positions are
	// worth at the mark (LevelPoRDriftAtMark).
	if snap.ReservesMsat != st0.credited-st0.paid || snap.DriftMsat != snap.ReservesMsat-snap.LiabilitiesMsat-snap.PositionsAtMarkMsat ||
		snap.DriftMsat+snap.PositionsAtMarkMsat != st0.venue || snap.PositionsAtMarkMsat == 0 {
		t.Fatalf("reserves %d liabilities %d drift %d, positions at the mark %d; venue's own %d", snap.ReservesMsat, snap.LiabilitiesMsat, snap.DriftMsat, snap.PositionsAtMarkMsat, st0.venue)
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
		full, err := por.BuildWidth(tr.Salt, tr.Leaves(), tr.Width())
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
	w.walkToNextPoR()
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
	w.walkToNextPoR()
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
	snap, _ := w.porSnap(w.replica)
	if snap.Status != por.StatusClean || snap.DriftMsat <= 0 {
		t.Fatalf("before: %s drift %d", snap.Status, snap.DriftMsat)
	}
	for p := int64(101_000); p <= 120_000; p += 1000 {
		wantOK(t, w.print("BTCUSD", usdQ8(p)))
	}
	wantOK(t, w.order(trader, tk, mktOrder("o2", "BTC-PERP", "sell", 1_000_000)))
	w.walkToNextPoR()
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

// porState is a state of n accounts, each with a key, a free balance and
// every third a margin, built without the log (for BuildPoR alone).
func porState(tb testing.TB, n int) *State {
	st := NewState()
	st.NowMs = 10 * por.CadenceMs
	st.Access.SignupsPerHour = n + 1
	for i := 0; i < n; i++ {
		id := "acc_" + strconv.Itoa(i)
		sum := sha256.Sum256([]byte("key-" + id))
		if ref := st.Access.Signup(access.NewAccount{AccountID: id, KeyID: "key_" + id, KeyHashHex: hex.EncodeToString(sum[:])}, st.NowMs); ref != nil {
			tb.Fatal(ref)
		}
		if err := st.Ledger.Credit(ledger.Free(id), int64(i%1000+1)*1000); err != nil {
			tb.Fatal(err)
		}
		if i%3 == 0 {
			if err := st.Ledger.Transfer(ledger.Free(id), ledger.Margin(id, "BTC-PERP"), 500); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return st
}

// Money the trees cannot attribute breaks the consolidation, and the
// status pages, with the drift still shown.
func TestPoRConsolidationCatchesUnaccountedMoney(t *testing.T) {
	st := porState(t, 5)
	snap := BuildPoR(st)
	if !snap.Consolidated || snap.Status != por.StatusClean || snap.DriftMsat != 0 || snap.Msat.LeafCount() != 5 {
		t.Fatalf("clean state: %+v", snap)
	}
	// A balance under an account id nobody has.
	if err := st.Ledger.Credit(ledger.Free("ghost"), 7000); err != nil {
		t.Fatal(err)
	}
	snap = BuildPoR(st)
	if snap.Consolidated || snap.Status != por.StatusPage || len(snap.Problems) == 0 || strings.Contains(strings.Join(snap.Problems, ";"), "ghost") {
		t.Fatalf("ghost money: %v %s %q", snap.Consolidated, snap.Status, snap.Problems)
	}
	if snap.DriftMsat != 7000 {
		t.Fatalf("drift %d: the ghost's money is reserves no leaf claims", snap.DriftMsat)
	}
	// Pending withdrawals no open withdrawal explains.
	st = porState(t, 5)
	if err := st.Ledger.Transfer(ledger.Free("acc_1"), ledger.PendingWithdrawals, 100); err != nil {
		t.Fatal(err)
	}
	if snap = BuildPoR(st); snap.Consolidated || !strings.Contains(strings.Join(snap.Problems, ";"), "pending withdrawals") {
		t.Fatalf("pending: %q", snap.Problems)
	}
}

func TestPoRStatusRule(t *testing.T) {
	for _, c := range []struct {
		drift, liab int64
		ok          bool
		want        string
	}{
		{0, 1_000_000, true, por.StatusClean},
		{5, 1_000_000, true, por.StatusClean},
		{-1_000, 1_000_000, true, por.StatusWarn}, // 0.1% exactly
		{-1_001, 1_000_000, true, por.StatusPage},
		{-1, 0, true, por.StatusPage},
		{10, 1_000_000, false, por.StatusPage},
		{-1 << 40, 1 << 62, true, por.StatusWarn}, // no overflow in the band
	} {
		if got := por.StatusOf(c.drift, c.liab, c.ok); got != c.want {
			t.Errorf("StatusOf(%d, %d, %v) = %s, want %s", c.drift, c.liab, c.ok, got, c.want)
		}
	}
}

// BenchmarkBuildPoR100k is the timer's whole work at 100,000 accounts:
// walk the ledger, tag every account, sort by tag, hash the tree.
func BenchmarkBuildPoR100k(b *testing.B) {
	st := porState(b, 100_000)
	runtime.GC()
	b.ResetTimer()
	var snap *por.Snapshot
	for range b.N {
		snap = BuildPoR(st)
	}
	b.StopTimer()
	if !snap.Consolidated {
		b.Fatal(snap.Problems)
	}
	enc, err := Marshal(snap)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(enc)), "snapshot-bytes")
}

// Referral rewards the venue owes (accrued, still vesting) are the
// referrer's: they count in its leaf, and the payable is not mistaken for
// the venue's own money. (Before, the payable counted as the venue's, so
// the trees left out a debt and the drift overstated the surplus.)
func TestPoRCountsReferralRewardsOwed(t *testing.T) {
	w := newTradeWorld(t)
	referrer, rk := w.account(2 * btcBTC)
	referee, ek := w.account(5 * btcBTC)
	wantOK(t, w.order(referrer, rk, mktOrder("own-1", "BTC-PERP", "buy", 200))) // the referrer's own volume
	wantOK(t, w.createCode(referrer, rk, "PORCODE1"))
	wantOK(t, w.bind(referee, ek, "PORCODE1"))
	wantOK(t, w.order(referee, ek, levered(mktOrder("r-1", "BTC-PERP", "buy", 100_000), 10)))
	w.walkToNextPoR()
	wantOK(t, w.print("BTCUSD", usdQ8(100_000)))

	var owed, payable int64
	var sums map[string]int64
	w.m.Read(func(st *State, _ uint64) {
		owed = st.Growth.OwedByAccount()[referrer]
		payable = st.Ledger.Balance(growth.ReferralPayable)
		sums = accountSums(st)
	})
	if owed <= 0 || owed != payable {
		t.Fatalf("referrer owed %d, payable holds %d", owed, payable)
	}
	var snap *por.Snapshot
	w.m.Read(func(st *State, _ uint64) { snap = st.PoR.Latest })
	if snap == nil || !snap.Consolidated || len(snap.Problems) != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	i := snap.Msat.Index(referrer)
	if i < 0 || snap.Msat.Amounts[i] != sums[referrer]+owed {
		t.Fatalf("referrer's leaf %d, its balances %d + rewards owed %d", snap.Msat.Amounts[i], sums[referrer], owed)
	}
}

// From LevelPoRDriftAtMark the drift counts open positions at the mark: a
// winner the house book could not pay shows as a shortfall while the
// position is open, not only once it closes. Below it the same book
// showed clean until the close (a review's case, 2026-11-27).
func TestPoRDriftCountsOpenPositionsAtTheMark(t *testing.T) {
	for _, level := range []uint32{LevelPoRDriftAtMark - 1, LevelPoRDriftAtMark} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			trader, tk := w.account(10 * btcBTC)
			loser, lk := w.account(1 * btcBTC)
			wantOK(t, w.order(trader, tk, levered(mktOrder("o1", "BTC-PERP", "buy", 1_000_000), 10)))
			// A small short whose loss is counted only down to its margin.
			wantOK(t, w.order(loser, lk, levered(mktOrder("s1", "BTC-PERP", "sell", 10_000), 50)))
			w.walkToNextPoR()
			wantOK(t, w.print("BTCUSD", usdQ8(100_000)))
			for p := int64(101_000); p <= 120_000; p += 1000 {
				wantOK(t, w.print("BTCUSD", usdQ8(p)))
			}
			w.walkToNextPoR()
			wantOK(t, w.print("BTCUSD", usdQ8(120_000)))
			open, _ := w.porSnap(w.replica)
			if level < LevelPoRDriftAtMark {
				if open.Status != por.StatusClean || open.PositionsAtMarkMsat != 0 {
					t.Fatalf("below the level: %s drift %d at mark %d", open.Status, open.DriftMsat, open.PositionsAtMarkMsat)
				}
				return
			}
			var want int64
			w.m.Read(func(st *State, _ uint64) {
				for _, id := range []string{trader, loser} {
					pos := st.Trade.Accounts[id].Positions["BTC-PERP"]
					if pos == nil {
						continue
					}
					m := st.Market.MarketsByID["BTC-PERP"]
					pnl, err := trade.PnLMsat(&m.Params, pos.Side, pos.Contracts, pos.EntryQ8, usdQ8(120_000))
					if err != nil {
						t.Fatal(err)
					}
					want += max(pnl, -pos.MarginMsat)
				}
			})
			if open.PositionsAtMarkMsat != want || want <= 0 {
				t.Fatalf("positions at the mark %d, want %d", open.PositionsAtMarkMsat, want)
			}
			if open.DriftMsat != open.ReservesMsat-open.LiabilitiesMsat-want || open.Status != por.StatusPage || !open.Consolidated {
				t.Fatalf("while open: %s drift %d", open.Status, open.DriftMsat)
			}
			// Closing at the same price moves no money in or out: the
			// drift stays a shortfall, a little smaller by what the close
			// paid the venue (fee and spread).
			wantOK(t, w.order(trader, tk, mktOrder("o2", "BTC-PERP", "sell", 1_000_000)))
			w.walkToNextPoR()
			wantOK(t, w.print("BTCUSD", usdQ8(120_000)))
			closed, _ := w.porSnap(w.replica)
			if closed.Status != por.StatusPage || closed.DriftMsat < open.DriftMsat || closed.DriftMsat-open.DriftMsat > want/50 {
				t.Fatalf("after the close: %s drift %d (open: %d, positions %d)", closed.Status, closed.DriftMsat, open.DriftMsat, want)
			}
		})
	}
}

// walkToNextPoR walks to the next minute's boundary, where a Proof of
// Reserves snapshot is due, and from LevelPoRBesideApply on past its
// publication, por.PublishDelayMs later: the snapshot is of the state at
// the boundary either way.
func (w *tradeWorld) walkToNextPoR() {
	w.t.Helper()
	w.walkTo((w.ts/por.CadenceMs + 1) * por.CadenceMs)
	var level uint32
	w.m.Read(func(st *State, _ uint64) { level = st.FeatureLevel })
	if level >= LevelPoRBesideApply {
		w.walkTo(w.ts + por.PublishDelayMs)
	}
}
