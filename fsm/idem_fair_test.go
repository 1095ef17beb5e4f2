package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/perpd/perpd/fsm/access"
	"github.com/perpd/perpd/fsm/ledger"
	"github.com/perpd/perpd/fsm/wire"
)

// idemFlood is the review's scenario of 2026-11-27 at a feature level: a
// victim's faucet answer, then one attacker account storing large answers
// (leaderboard settings, about 1.2 KB each) until the store is past its
// byte bound many times over.
type idemFlood struct {
	t  *testing.T
	r  *replica
	ts int64
}

func newIdemFlood(t *testing.T, level uint32) *idemFlood {
	f := &idemFlood{t: t, r: &replica{t: t, m: NewMachine(Options{}), next: 1}, ts: 1_700_000_000_000}
	wantOK(t, f.at(mustCommand(t, CmdGenesis, 0, GenesisPayload{FeatureLevel: level, Seed: 7, Deployment: "testnet"})))
	for _, name := range []string{"victim", "attacker"} {
		sum := sha256.Sum256([]byte("key_" + name))
		wantOK(t, f.at(mustCommand(t, CmdSignup, 0, access.NewAccount{AccountID: "acc_" + name, KeyID: "key_" + name, KeyHashHex: hex.EncodeToString(sum[:])})))
	}
	return f
}

func (f *idemFlood) at(c *Command) *Result { f.ts++; c.TsMs = f.ts; return f.r.apply(c) }

func (f *idemFlood) faucet() *Result {
	c := mustCommand(f.t, CmdFaucet, 0, nil)
	c.Account, c.KeyID = "acc_victim", "key_victim"
	c.IdemKey, c.ReqHash = "acct:acc_victim:faucet-1", []byte("POST /v1/faucet {}")
	return f.at(c)
}

func (f *idemFlood) attack(i int) *Result {
	c := mustCommand(f.t, CmdLeaderboardSettings, 0, struct{}{})
	c.Account, c.KeyID = "acc_attacker", "key_attacker"
	c.IdemKey, c.ReqHash = fmt.Sprintf("acct:acc_attacker:%d", i), []byte{1}
	return f.at(c)
}

func (f *idemFlood) victimBalance() (b int64) {
	f.r.m.Read(func(st *State, _ uint64) { b = st.Ledger.Balance(ledger.Free("acc_victim")) })
	return b
}

// floodPastBound stores attacker answers until the store has dropped
// (or tombstoned) answers for as many writes again as it took to fill it.
func (f *idemFlood) floodPastBound() int {
	n := 0
	for full := false; ; n++ {
		wantOK(f.t, f.attack(n))
		var bytesHeld int64
		f.r.m.Read(func(st *State, _ uint64) { bytesHeld = st.Idem.Bytes })
		if !full && bytesHeld > IdemMaxBytes-4096 {
			full = true
			n *= 2 // as many writes again
			continue
		}
		if full && n > 0 && n%2 == 0 && n > 2*60_000 {
			return n
		}
	}
}

// TestIdemFloodByOneAccountSparesOthers: from LevelIdemFair, an account
// flooding the store gives room from its own answers; the victim's retry
// is still replayed, and the attacker's own retry of a dropped answer is
// refused, not applied a second time. Below the level the flood evicted
// the victim's answer and its retry was credited twice.
func TestIdemFloodByOneAccountSparesOthers(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	for _, level := range []uint32{LevelIdemFair - 1, LevelIdemFair} {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) {
			f := newIdemFlood(t, level)
			wantOK(t, f.faucet())
			granted := f.victimBalance()
			f.floodPastBound()
			retry := f.faucet()
			wantOK(t, retry)
			if level < LevelIdemFair {
				if retry.Replay || f.victimBalance() != 2*granted {
					t.Fatalf("below the level the flood evicted the victim (replay %v, balance %d)", retry.Replay, f.victimBalance())
				}
				return
			}
			if !retry.Replay || f.victimBalance() != granted {
				t.Fatalf("the victim's retry: replay %v, balance %d, want replayed and %d", retry.Replay, f.victimBalance(), granted)
			}
			before := f.r.hash()
			f.ts-- // the same time: a refusal must change nothing, and time would
			res := f.attack(0)
			wantRefused(t, res, http.StatusConflict, wire.CodeConflict)
			if f.r.hash() != before {
				t.Fatal("the refused retry of a dropped answer changed the state")
			}
			// The same key with another request is still a reuse.
			c := mustCommand(t, CmdLeaderboardSettings, 0, struct{}{})
			c.Account, c.KeyID, c.IdemKey, c.ReqHash = "acc_attacker", "key_attacker", "acct:acc_attacker:0", []byte{2}
			wantRefused(t, f.at(c), http.StatusConflict, wire.CodeIdempotencyReused)
			f.r.m.Read(func(st *State, _ uint64) {
				if st.Idem.Bytes > IdemMaxBytes || len(st.Idem.Records) > IdemMaxRecords {
					t.Fatalf("store holds %d bytes, %d records", st.Idem.Bytes, len(st.Idem.Records))
				}
				checkFairIndex(t, st.Idem)
			})
		})
	}
}

// checkFairIndex compares the store's incremental index with one built
// from scratch (as a restored replica builds it), and its byte count with
// a recount.
func checkFairIndex(t *testing.T, s *IdemStore) {
	t.Helper()
	if s.fair == nil {
		t.Fatal("the fair index was never built")
	}
	fresh := &IdemStore{Records: s.Records, Order: s.Order}
	saved := map[*IdemRecord]uint64{}
	for _, rec := range s.Records {
		saved[rec] = rec.pos
	}
	got, want := s.fair, fresh.fairIndexed()
	for rec, pos := range saved {
		if rec.pos-want.base != pos-got.base {
			t.Fatalf("a record's place in Order: incremental %d, rebuilt %d", pos-got.base, rec.pos-want.base)
		}
	}
	if got.holes != want.holes || len(got.tenants) != len(want.tenants) || got.heap[0].name != want.heap[0].name {
		t.Fatalf("holes %d/%d, tenants %d/%d, top %q/%q", got.holes, want.holes, len(got.tenants), len(want.tenants), got.heap[0].name, want.heap[0].name)
	}
	for name, tw := range want.tenants {
		tg := got.tenants[name]
		if tg == nil || tg.bytes != tw.bytes || tg.live != tw.live || !reflect.DeepEqual(tg.keys, tw.keys) {
			t.Fatalf("tenant %q: incremental %+v, rebuilt %+v", name, tg, tw)
		}
	}
	b := s.Bytes
	fresh.recount()
	if fresh.Bytes != b {
		t.Fatalf("store counts %d bytes, a recount %d", b, fresh.Bytes)
	}
}

// TestIdemFairRecordBoundTakesFromTheLargestTenant: past the record bound
// the largest tenant's oldest record goes, from the middle of Order (a
// hole), never another tenant's; holes are compacted away.
func TestIdemFairRecordBoundTakesFromTheLargestTenant(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	s := newIdemStore()
	ok := &Result{Status: 200, Body: []byte("{}")}
	s.storeFair("acct:v:1", "v", []byte{1}, ok, 1, 1)
	for i := range IdemMaxRecords - 1 {
		s.storeFair(fmt.Sprintf("acct:a:%d", i), "a", []byte{1}, ok, 2, uint64(i+2))
	}
	if len(s.Records) != IdemMaxRecords || s.fair.holes != 0 {
		t.Fatalf("%d records, %d holes", len(s.Records), s.fair.holes)
	}
	// More than half of Order becomes holes on the way, so it is
	// compacted at least once.
	const third = IdemMaxRecords + 20_000
	compacted := false
	for i := range third {
		s.storeFair(fmt.Sprintf("acct:a:x%d", i), "a", []byte{1}, ok, 3, uint64(IdemMaxRecords+i+1))
		compacted = compacted || len(s.Order) < IdemMaxRecords+i
	}
	if !compacted {
		t.Fatal("Order was never compacted")
	}
	if len(s.Records) != IdemMaxRecords {
		t.Fatalf("%d records, bound %d", len(s.Records), IdemMaxRecords)
	}
	if _, kept := s.Records["acct:v:1"]; !kept || s.Order[0] != "acct:v:1" {
		t.Fatalf("the small tenant's record went (order starts %q)", s.Order[0])
	}
	if _, kept := s.Records["acct:a:0"]; kept {
		t.Fatal("the largest tenant's oldest record stayed")
	}
	if len(s.Order) > 2*IdemMaxRecords || s.fair.holes > len(s.Order)/2+1 {
		t.Fatalf("order %d entries, %d holes: not compacted", len(s.Order), s.fair.holes)
	}
	checkFairIndex(t, s)
	// Expiry walks over holes and keeps every tenant in step.
	s.prune(2 + IdemRetentionMs)
	if len(s.Records) != IdemMaxRecords-1 || s.Records["acct:v:1"] != nil {
		t.Fatalf("%d records after the first two cohorts expired, want the %d newest of the third", len(s.Records), IdemMaxRecords-1)
	}
	checkFairIndex(t, s)
	s.prune(3 + IdemRetentionMs)
	if len(s.Records) != 0 || len(s.Order) != 0 || s.Bytes != 0 || len(s.fair.tenants) != 0 || s.fair.holes != 0 {
		t.Fatalf("after all expired: %d records, %d order, %d bytes, %d tenants, %d holes",
			len(s.Records), len(s.Order), s.Bytes, len(s.fair.tenants), s.fair.holes)
	}
}

// TestIdemFairSurvivesRestore: a replica restored from a snapshot taken
// mid-flood (tombstones and holes in the store) answers and evicts exactly
// as the live one does afterwards.
func TestIdemFairSurvivesRestore(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	f := newIdemFlood(t, LevelIdemFair)
	wantOK(t, f.faucet())
	n := f.floodPastBound()
	snap, err := f.r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	other := &replica{t: t, m: NewMachine(Options{}), next: f.r.next}
	if err := other.m.RestoreAt(snap, f.r.next-1); err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		c := mustCommand(t, CmdLeaderboardSettings, 0, struct{}{})
		c.Account, c.KeyID = "acc_attacker", "key_attacker"
		c.IdemKey, c.ReqHash = fmt.Sprintf("acct:acc_attacker:%d", n+i), []byte{1}
		f.ts++
		c.TsMs = f.ts
		a, b := f.r.apply(c), other.apply(c)
		if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) {
			t.Fatalf("entry %d: live %d %s, restored %d %s", i, a.Status, a.Body, b.Status, b.Body)
		}
	}
	if f.r.hash() != other.hash() {
		t.Fatal("the restored replica's state hash differs after the same entries")
	}
	other.m.Read(func(st *State, _ uint64) { checkFairIndex(t, st.Idem) })
}

// TestIdemFairAfterTheRaise: answers stored below LevelIdemFair carry no
// tenant; after the raise they count against the account their key names,
// so the flood that follows still takes from the attacker alone.
func TestIdemFairAfterTheRaise(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained (its own Machine): beside the other heavy tests
	f := newIdemFlood(t, LevelIdemFair-1)
	wantOK(t, f.at(mustCommand(t, CmdNodeMeta, 0, NodeMeta{ID: "n1", Raft: "n1:7000"})))
	wantOK(t, f.faucet())
	granted := f.victimBalance()
	for i := range 20_000 {
		wantOK(t, f.attack(1_000_000+i))
	}
	f.r.m.Read(func(st *State, _ uint64) {
		if rec := st.Idem.Records["acct:acc_victim:faucet-1"]; rec == nil || rec.Tenant != "" {
			t.Fatalf("below the level: %+v", rec)
		}
	})
	wantOK(t, f.at(mustCommand(t, CmdSetFeatureLevel, 0, FeatureLevelPayload{Level: LevelIdemFair, Nodes: []AdvertisedLevel{{"n1", LevelIdemFair}}})))
	f.floodPastBound()
	if retry := f.faucet(); !retry.Replay || f.victimBalance() != granted {
		t.Fatalf("the victim's answer from before the raise: replay %v, balance %d", retry.Replay, f.victimBalance())
	}
	f.r.m.Read(func(st *State, _ uint64) {
		checkFairIndex(t, st.Idem)
		if rec := st.Idem.Records["acct:acc_attacker:1000000"]; rec == nil || !rec.Evicted {
			t.Fatalf("the attacker's answer from before the raise: %+v", rec)
		}
	})
}
