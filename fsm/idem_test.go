package fsm

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

func TestIdemRetryReturnsTheStoredAnswer(t *testing.T) {
	r := newReplica(t)
	first := r.apply(noopAt(1000, "acct1:K", []byte("h1")))
	wantOK(t, first)
	if first.Replay || first.Index != 1 {
		t.Fatalf("first answer: replay %v index %d", first.Replay, first.Index)
	}
	r.apply(tickAt(2000))
	retry := r.apply(noopAt(3000, "acct1:K", []byte("h1")))
	if !retry.Replay {
		t.Fatal("a retry must be answered from the store")
	}
	if retry.Index != first.Index {
		t.Fatalf("a retry must report the original index %d, got %d", first.Index, retry.Index)
	}
	if retry.Status != first.Status || !bytes.Equal(retry.Body, first.Body) {
		t.Fatalf("retry answered %d %s, first answer was %d %s", retry.Status, retry.Body, first.Status, first.Body)
	}
	// The stored body is the first answer, not a fresh one at the retry's time.
	if nowOf(t, retry) != 1000 {
		t.Fatalf("retry body says nowMs %d, want the original 1000", nowOf(t, retry))
	}
	// The retry moved time like any entry, but stored nothing new.
	var recs, order int
	r.m.Read(func(st *State, _ uint64) { recs, order = len(st.Idem.Records), len(st.Idem.Order) })
	if recs != 1 || order != 1 {
		t.Fatalf("records %d order %d after a retry, want 1 and 1", recs, order)
	}
}

func TestIdemKeyReusedWithAnotherRequestIsRefused(t *testing.T) {
	r := newReplica(t)
	wantOK(t, r.apply(noopAt(1000, "K", []byte("h1"))))
	before := r.hash()
	res := r.apply(noopAt(1000, "K", []byte("h2")))
	wantRefused(t, res, http.StatusConflict, wire.CodeIdempotencyReused)
	if r.hash() != before {
		t.Fatal("a reuse refusal changed the state")
	}
	// The original request is still answered from the store.
	if !r.apply(noopAt(1000, "K", []byte("h1"))).Replay {
		t.Fatal("the original answer must survive a refused reuse")
	}
	// A missing hash is a different request too.
	wantRefused(t, r.apply(noopAt(1000, "K", nil)), http.StatusConflict, wire.CodeIdempotencyReused)
}

func TestIdemRefusalsAreNotStored(t *testing.T) {
	r := newReplica(t)
	bad := mustCommand(t, CmdNodeMeta, 1000, NodeMeta{ID: "n1"}) // no raft address
	bad.IdemKey, bad.ReqHash = "K", []byte("h1")
	wantRefused(t, r.apply(bad), http.StatusBadRequest, wire.CodeValidation)
	var stored bool
	r.m.Read(func(st *State, _ uint64) { _, stored = st.Idem.Records["K"] })
	if stored {
		t.Fatal("a refused command must not be stored")
	}
	// Judged afresh: the same key with another body is not a reuse.
	good := mustCommand(t, CmdNodeMeta, 1000, NodeMeta{ID: "n1", Raft: "127.0.0.1:1"})
	good.IdemKey, good.ReqHash = "K", []byte("h2")
	res := r.apply(good)
	wantOK(t, res)
	if res.Replay {
		t.Fatal("the retry after a refusal must be applied, not replayed")
	}
}

func TestIdemEmptyKeyIsNeverStored(t *testing.T) {
	r := newReplica(t)
	for i := range 5 {
		wantOK(t, r.apply(noopAt(int64(1000+i), "", nil)))
	}
	r.m.Read(func(st *State, _ uint64) {
		if len(st.Idem.Records) != 0 || len(st.Idem.Order) != 0 {
			t.Fatalf("keyless commands stored: %d records", len(st.Idem.Records))
		}
	})
}

func TestIdemRecordKeptFor24hOfFSMTime(t *testing.T) {
	r := newReplica(t)
	const t0 = 1_700_000_000_000
	first := r.apply(noopAt(t0, "K", []byte("h1")))
	r.advanceTo(t0 + IdemRetentionMs - 1)
	if res := r.apply(noopAt(0, "K", []byte("h1"))); !res.Replay || res.Index != first.Index {
		t.Fatalf("one millisecond before expiry the answer must still be stored: %+v", res)
	}
	r.advanceTo(t0 + IdemRetentionMs)
	r.m.Read(func(st *State, _ uint64) {
		if _, ok := st.Idem.Records["K"]; ok || len(st.Idem.Order) != 0 {
			t.Fatal("record kept past its 24h retention")
		}
	})
	// The key is free again: another body is applied, not refused as a reuse.
	res := r.apply(noopAt(0, "K", []byte("h2")))
	wantOK(t, res)
	if res.Replay {
		t.Fatal("an expired key must be applied afresh")
	}
}

func TestIdemPruneDropsOnlyExpiredRecords(t *testing.T) {
	r := newReplica(t)
	const t0 = 10_000_000
	for i := range 10 {
		wantOK(t, r.apply(noopAt(t0+int64(i)*1000, fmt.Sprintf("k%d", i), []byte{1})))
	}
	// Records k0..k3 were stored at t0..t0+3000: they expire at t0+24h+3000.
	r.advanceTo(t0 + IdemRetentionMs + 3000)
	r.m.Read(func(st *State, _ uint64) {
		if len(st.Idem.Records) != 6 || len(st.Idem.Order) != 6 || st.Idem.Order[0] != "k4" {
			t.Fatalf("records %d order %v, want k4..k9", len(st.Idem.Records), st.Idem.Order)
		}
	})
}

// The bound is checked on the store itself: filling two million real
// records would cost hundreds of megabytes per test run. The dead keys in
// Order are fine stand-ins, since drop deletes by key.
func TestIdemStoreIsBounded(t *testing.T) {
	s := newIdemStore()
	s.Order = make([]string, IdemMaxRecords)
	s.Order[0] = "oldest"
	s.Records["oldest"] = &IdemRecord{ReqHash: []byte{1}, ExpiresAtMs: IdemRetentionMs}
	s.Order[1] = "second"
	s.Records["second"] = &IdemRecord{ReqHash: []byte{1}, ExpiresAtMs: IdemRetentionMs}

	s.store("newest", []byte{1}, &Result{Status: 200, Body: []byte("{}")}, 5, 9)
	if len(s.Order) != IdemMaxRecords {
		t.Fatalf("order holds %d keys, bound is %d", len(s.Order), IdemMaxRecords)
	}
	if _, ok := s.Records["oldest"]; ok {
		t.Fatal("the oldest record must be dropped when the bound is passed")
	}
	if _, ok := s.Records["second"]; !ok {
		t.Fatal("only one record should be dropped per new record")
	}
	if s.Order[len(s.Order)-1] != "newest" || s.Records["newest"] == nil {
		t.Fatal("the new record must be kept")
	}
	if res, ref := s.lookup("newest", []byte{1}); ref != nil || res == nil || res.Index != 9 {
		t.Fatalf("lookup of the new record: %+v %v", res, ref)
	}
}

func TestIdemOrderDoesNotGrowWithoutBound(t *testing.T) {
	s := newIdemStore()
	for i := range 20_000 {
		s.store(fmt.Sprintf("k%d", i), nil, &Result{Status: 200}, int64(i), uint64(i+1))
	}
	// Expire all but the last ten.
	s.prune(19_989 + IdemRetentionMs)
	if len(s.Order) != 10 || len(s.Records) != 10 {
		t.Fatalf("kept %d keys, %d records; want 10", len(s.Order), len(s.Records))
	}
	if cap(s.Order) > 1024 {
		t.Fatalf("order keeps a backing array of %d for 10 keys", cap(s.Order))
	}
	for i, k := range s.Order {
		if want := fmt.Sprintf("k%d", 19_990+i); k != want {
			t.Fatalf("order[%d] = %q, want %q", i, k, want)
		}
	}
}

// Large answers are bounded by bytes before the count bound is reached:
// the oldest go first, the accounting matches the records, and it survives
// a snapshot round trip.
func TestIdemStoreIsBoundedByBytes(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: beside the other heavy tests
	s := newIdemStore()
	body := bytes.Repeat([]byte("x"), 64<<10)
	per := recordBytes("k00000", &IdemRecord{ReqHash: []byte{1}, Body: body})
	n := int(IdemMaxBytes/per) + 10
	for i := range n {
		s.store(fmt.Sprintf("k%05d", i), []byte{1}, &Result{Status: 200, Body: body}, 0, uint64(i+1))
	}
	if s.Bytes > IdemMaxBytes {
		t.Fatalf("store holds %d bytes, bound %d", s.Bytes, IdemMaxBytes)
	}
	if want := int(IdemMaxBytes / per); len(s.Records) != want || len(s.Order) != want {
		t.Fatalf("kept %d records (%d keys), want the newest %d", len(s.Records), len(s.Order), want)
	}
	if _, ok := s.Records["k00000"]; ok {
		t.Fatal("the oldest record must go first")
	}
	if _, ok := s.Records[fmt.Sprintf("k%05d", n-1)]; !ok {
		t.Fatal("the newest record must stay")
	}
	got := s.Bytes
	s.recount()
	if s.Bytes != got {
		t.Fatalf("kept count %d bytes, records hold %d", got, s.Bytes)
	}
	// A single answer larger than the bound is still kept (alone).
	huge := bytes.Repeat([]byte("y"), IdemMaxBytes+1)
	s.store("huge", []byte{1}, &Result{Status: 200, Body: huge}, 0, 1)
	if len(s.Records) != 1 || s.Records["huge"] == nil {
		t.Fatalf("kept %d records after one huge answer", len(s.Records))
	}
}

func TestIdemBytesFollowPruneAndSnapshot(t *testing.T) {
	r := newReplica(t)
	const t0 = 10_000_000
	for i := range 5 {
		wantOK(t, r.apply(noopAt(t0+int64(i)*1000, fmt.Sprintf("k%d", i), []byte{1})))
	}
	r.advanceTo(t0 + IdemRetentionMs + 2000) // k0..k2 expire
	var b int64
	r.m.Read(func(st *State, _ uint64) {
		b = st.Idem.Bytes
		st2 := *st.Idem
		st2.recount()
		if len(st.Idem.Records) != 2 || st2.Bytes != b || b == 0 {
			t.Fatalf("%d records, %d bytes kept, %d counted", len(st.Idem.Records), b, st2.Bytes)
		}
	})
	snap := mustSnapshot(t, r.m)
	dst := newReplica(t)
	if err := dst.m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	dst.m.Read(func(st *State, _ uint64) {
		if st.Idem.Bytes != b {
			t.Fatalf("restored store counts %d bytes, want %d", st.Idem.Bytes, b)
		}
	})
}

// TestAppendKeyKeepsKeysAndDoublesLongLists: the store's key lists hold
// exactly what append would, and past 256 keys each growth at least
// doubles the room (append's quarter would copy a 500,000-key list every
// 125,000 answers).
func TestAppendKeyKeepsKeysAndDoublesLongLists(t *testing.T) {
	var got, want []string
	for i := range 5000 {
		k := fmt.Sprintf("k%d", i)
		before := cap(got)
		got, want = appendKey(got, k), append(want, k)
		if cap(got) != before && before >= 256 && cap(got) < 2*before {
			t.Fatalf("at %d keys the list grew from %d to %d, less than double", len(got), before, cap(got))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatal("appendKey's list differs from append's")
	}
}
