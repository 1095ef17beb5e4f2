package fsm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/internal/porverify"
)

// mintKey mints a delegate key of acct under minter; the key's value is
// value (its SHA-256 is recorded) and its id id. scopes nil copies the
// minter's.
func (w *tradeWorld) mintKey(acct, minter, id, value string, scopes *access.Scope) {
	w.t.Helper()
	c := mustCommand(w.t, CmdMintKey, 0, access.NewKey{KeyID: id, KeyHashHex: keyHash(value), Label: "t", Scopes: scopes})
	c.Account, c.KeyID = acct, minter
	wantOK(w.t, w.at(c))
}

func (w *tradeWorld) revokeKey(acct, caller, id string) {
	w.t.Helper()
	c := mustCommand(w.t, CmdRevokeKeys, 0, RevokePayload{KeyID: id})
	c.Account, c.KeyID = acct, caller
	wantOK(w.t, w.at(c))
}

// nextPoRTree walks log time to the next tree and returns its sats tree.
func (w *tradeWorld) nextPoRTree() *por.TreeState {
	w.t.Helper()
	w.walkToNextPoR()
	wantOK(w.t, w.print("BTCUSD", usdQ8(100_000)))
	snap, _ := w.porSnap(w.replica)
	return snap.Msat
}

// porProofJSON is account's proof in tr, as GET /v1/por/proof serves it.
func porProofJSON(t *testing.T, tr *por.TreeState, account string) ([]byte, porverify.Published) {
	t.Helper()
	i := tr.Index(account)
	full, err := por.BuildWidth(tr.Salt, tr.Leaves(), tr.Width())
	if err != nil || i < 0 {
		t.Fatalf("%s at %d: %v", account, i, err)
	}
	d, err := por.NewProofDoc(por.AssetMsat, full, tr.Salt, tr.Tags[i], i, tr.TsMs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b, porverify.Published{RootHash: hex.EncodeToString(tr.RootHash[:]), TotalMsat: tr.Total, LeafCount: tr.LeafCount(),
		RootSaltHex: hex.EncodeToString(tr.Salt[:]), TsMs: tr.TsMs}
}

// tagOf is acct's tag in tr.
func tagOf(tr *por.TreeState, acct string) []byte {
	t := tr.Tags[tr.Index(acct)]
	return t[:]
}

// TestPoRTagAfterRotateAndRevoke: an account mints a trade-only bot key,
// then a full key, and revokes its signup key (say it leaked). Below
// LevelPoRTagLiveKey the tag stays keyed by the revoked signup key, byte
// for byte as before (replay): its holder recognises the leaf in every
// tree. From the level the tag is keyed by the oldest live key with the
// read scope: the bot key (older, but it cannot read the proof) and the
// leaked key do not compute it, the new key's holder verifies the proof
// with internal/porverify, and PoRTagKeyID names the key at both levels.
func TestPoRTagAfterRotateAndRevoke(t *testing.T) {
	for _, level := range []uint32{LevelPoRTagLiveKey - 1, LevelPoRTagLiveKey} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, old := w.account(2 * btcBTC)
			w.account(btcBTC) // a second leaf
			bot := access.ScopeTrade
			w.mintKey(acct, old, "k_bot", "v_bot", &bot)
			w.mintKey(acct, old, "k_new", "v_new", nil)
			w.revokeKey(acct, "k_new", old)

			for n := 0; n < 2; n++ { // two trees: the choice holds, minute after minute
				tr := w.nextPoRTree()
				body, pub := porProofJSON(t, tr, acct)
				var st0 *State
				w.m.Read(func(st *State, _ uint64) { st0 = st })
				gotID := PoRTagKeyID(st0, acct, por.AssetMsat, tr.TsMs, tr.Tags[tr.Index(acct)])
				if level < LevelPoRTagLiveKey {
					// The old derivation, unchanged.
					if !bytes.Equal(tagOf(tr, acct), porverify.Tag(old, por.AssetMsat, acct, tr.TsMs)) || gotID != old {
						t.Fatalf("below the level the tag moved off the signup key (named %q)", gotID)
					}
					if _, err := porverify.Check(body, pub, old, acct); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if _, err := porverify.Check(body, pub, old, acct); err == nil {
					t.Fatal("the revoked key's holder still computes the account's tag")
				}
				if _, err := porverify.Check(body, pub, "v_bot", acct); err == nil {
					t.Fatal("a key without the read scope keys the tag")
				}
				bal, err := porverify.Check(body, pub, "v_new", acct)
				if err != nil || bal != 2*btcBTC {
					t.Fatalf("the new key's holder: balance %d, %v", bal, err)
				}
				if gotID != "k_new" {
					t.Fatalf("PoRTagKeyID names %q, want k_new", gotID)
				}
			}
		})
	}
}

// TestPoRTagSurvivesTheKeyCap: an account with a trade-only bot key and
// a full key revokes its signup key, then mints and revokes more than
// access.MaxKeysPerAccount session keys, so its oldest revoked records
// are forgotten. Below the level the tag key silently moved from the
// signup key to the next oldest record, the bot key, which cannot even
// read the proof. From it the tag stays with the oldest live read key
// before and after (live keys are never forgotten).
func TestPoRTagSurvivesTheKeyCap(t *testing.T) {
	for _, level := range []uint32{LevelPoRTagLiveKey - 1, LevelPoRTagLiveKey} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			w := newTradeWorldAt(t, level)
			acct, master := w.account(btcBTC)
			w.account(btcBTC)
			bot := access.ScopeTrade
			w.mintKey(acct, master, "k_bot", "v_bot", &bot)
			w.mintKey(acct, master, "k_new", "v_new", nil)
			w.revokeKey(acct, "k_new", master)
			want := "v_new"
			if level < LevelPoRTagLiveKey {
				want = master
			}
			before := w.nextPoRTree()
			if !bytes.Equal(tagOf(before, acct), porverify.Tag(want, por.AssetMsat, acct, before.TsMs)) {
				t.Fatalf("before the churn the tag is not %s's", want)
			}
			for i := 0; i < access.MaxKeysPerAccount; i++ {
				id := fmt.Sprintf("k_churn_%d", i)
				w.mintKey(acct, "k_new", id, "v_"+id, nil)
				w.revokeKey(acct, "k_new", id)
			}
			if level < LevelPoRTagLiveKey {
				want = "v_bot" // the signup key's record is gone (what the review found)
			}
			tr := w.nextPoRTree()
			if !bytes.Equal(tagOf(tr, acct), porverify.Tag(want, por.AssetMsat, acct, tr.TsMs)) {
				t.Fatalf("after the churn the tag is not %s's", want)
			}
		})
	}
}

// TestPoRTagKeyIsTheFirstLiveReadKeyInCreationOrder: the tag key is the
// first live key in the account's creation order (its KeyIDs, not the
// ids' sort order nor a map walk) that holds the read scope. With no
// live read key left (only a withdraw-and-trade key) the tag falls back,
// from LevelPoRTagNoRevokedKey, to the seed's tag, which none of the
// account's keys computes (before it, to the oldest key on record: the
// revoked signup key's holder recognised the leaf again).
func TestPoRTagKeyIsTheFirstLiveReadKeyInCreationOrder(t *testing.T) {
	w := newTradeWorldAt(t, LevelPoRTagNoRevokedKey)
	acct, master := w.account(btcBTC)
	w.account(btcBTC)
	withdraw := access.ScopeWithdraw | access.ScopeTrade
	read := access.ScopeRead
	w.mintKey(acct, master, "k_z_nobody", "v_nobody", &withdraw)
	w.mintKey(acct, master, "k_y_reader", "v_reader", &read)
	w.mintKey(acct, master, "k_a_later", "v_later", nil)
	w.revokeKey(acct, master, master)
	tr := w.nextPoRTree()
	if !bytes.Equal(tagOf(tr, acct), porverify.Tag("v_reader", por.AssetMsat, acct, tr.TsMs)) {
		t.Fatal("the tag is not keyed by the first live read key in creation order")
	}
	w.revokeKey(acct, "k_a_later", "k_y_reader")
	w.revokeKey(acct, "k_a_later", "k_a_later")
	tr = w.nextPoRTree()
	for _, v := range []string{master, "v_nobody", "v_reader", "v_later"} {
		if bytes.Equal(tagOf(tr, acct), porverify.Tag(v, por.AssetMsat, acct, tr.TsMs)) {
			t.Fatalf("the key %s computes the tag of an account without a live read key", v)
		}
	}
	var st0 *State
	w.m.Read(func(st *State, _ uint64) { st0 = st })
	if id := PoRTagKeyID(st0, acct, por.AssetMsat, tr.TsMs, tr.Tags[tr.Index(acct)]); id != "" {
		t.Fatalf("PoRTagKeyID names %q for the seed's tag", id)
	}
}
