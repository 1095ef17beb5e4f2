package fsm

import (
	"container/heap"
	"fmt"
	"net/http"
	"strings"

	"github.com/perpd/perpd/fsm/wire"
)

// LevelIdemFair is the feature level from which the idempotency store,
// when it is full, takes room from the tenant (account) that holds the
// most bytes rather than from whoever stored the oldest answer, and keeps
// a tombstone of each answer it drops before its retention ends, so that
// a retry is refused instead of applied a second time.
//
// Before it, one account could flush every other account's answers
// within a minute of writes (an adversarial review of 2026-11-27: 53,653
// leaderboard-settings writes evicted another account's faucet answer,
// whose retry then credited it twice). Now an account whose answers are
// smaller than the largest tenant's keeps them for the whole retention,
// and an answer that had to go still stops its retry.
const LevelIdemFair uint32 = 4

// idemTenant is one tenant's share of the store: its keys oldest first,
// the tombstoned ones (keys[:live]) before the live ones, because the
// store always tombstones a tenant's oldest live answer.
type idemTenant struct {
	name  string
	keys  []string
	live  int
	bytes int64 // recordBytes of its records, tombstones included
	at    int   // position in the heap
}

// tenantHeap orders tenants by bytes held, largest first, ties by name:
// a total order, so the top is the same on every replica whatever the
// heap's layout (restored replicas rebuild it in another order).
type tenantHeap []*idemTenant

func (h tenantHeap) Len() int { return len(h) }
func (h tenantHeap) Less(i, j int) bool {
	if h[i].bytes != h[j].bytes {
		return h[i].bytes > h[j].bytes
	}
	return h[i].name < h[j].name
}
func (h tenantHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *tenantHeap) Push(x any) {
	t := x.(*idemTenant)
	t.at = len(*h)
	*h = append(*h, t)
}
func (h *tenantHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

// fairIndex is what the store derives, never encodes: the tenants and
// their heap, and (with each record's pos) where each record sits in
// Order, at Order[pos-base], so that a record taken out of the middle
// leaves a hole ("") rather than a stale key a later record of the same
// key could be mistaken for.
type fairIndex struct {
	tenants map[string]*idemTenant
	heap    tenantHeap
	base    uint64 // position of Order[0]
	holes   int    // "" entries in Order
}

// tenantOfRecord is who a record counts against: its Tenant, or, for a
// record stored before LevelIdemFair, the account its key is scoped to
// ("" for public routes and unscoped keys).
func tenantOfRecord(key string, rec *IdemRecord) string {
	if rec.Tenant != "" {
		return rec.Tenant
	}
	if rest, ok := strings.CutPrefix(key, "acct:"); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

// fairIndexed builds the index from Records and Order on first use after
// a restore or the raise: a pure function of the encoded store, so every
// replica derives the same one.
func (s *IdemStore) fairIndexed() *fairIndex {
	if s.fair != nil {
		return s.fair
	}
	f := &fairIndex{tenants: map[string]*idemTenant{}}
	for i, k := range s.Order {
		rec := s.Records[k]
		if k == "" || rec == nil {
			f.holes++
			continue
		}
		rec.pos = uint64(i)
		t := f.tenant(tenantOfRecord(k, rec))
		if rec.Evicted {
			if t.live != len(t.keys) {
				panic(fmt.Sprintf("fsm: idempotency tenant %q has a tombstone after a live answer", t.name))
			}
			t.live++
		}
		t.keys = append(t.keys, k)
		t.bytes += recordBytes(k, rec)
	}
	heap.Init(&f.heap)
	s.fair = f
	return f
}

// tenant returns name's share, added to the heap when new.
func (f *fairIndex) tenant(name string) *idemTenant {
	t := f.tenants[name]
	if t == nil {
		t = &idemTenant{name: name}
		f.tenants[name] = t
		heap.Push(&f.heap, t)
	}
	return t
}

// resized restores the heap after t's bytes changed, and forgets a tenant
// with no records left.
func (f *fairIndex) resized(t *idemTenant) {
	if len(t.keys) == 0 {
		heap.Remove(&f.heap, t.at)
		delete(f.tenants, t.name)
		return
	}
	heap.Fix(&f.heap, t.at)
}

// storeFair is store from LevelIdemFair: the record counts against
// tenant, and past a bound the largest tenant gives room (evictFair).
func (s *IdemStore) storeFair(key, tenant string, reqHash []byte, r *Result, nowMs int64, index uint64) {
	f := s.fairIndexed()
	rec := &IdemRecord{ReqHash: reqHash, Status: int32(r.Status), Body: r.Body, ExpiresAtMs: nowMs + IdemRetentionMs, Index: index, Tenant: tenant}
	b := recordBytes(key, rec)
	s.Records[key] = rec
	s.Bytes += b
	rec.pos = f.base + uint64(len(s.Order))
	s.Order = appendKey(s.Order, key)
	// The same function as the rebuild after a restore, so a live and a
	// restored replica always agree on whose record it is.
	t := f.tenant(tenantOfRecord(key, rec))
	t.keys = appendKey(t.keys, key)
	t.bytes += b
	f.resized(t)
	for (len(s.Records) > IdemMaxRecords || s.Bytes > IdemMaxBytes) && s.evictFair(key) {
	}
}

// evictFair makes room once, at the expense of the tenant holding the most
// bytes: past the byte bound its oldest live answer becomes a tombstone
// (the answer goes, the key and request hash stay until the retention
// ends); past the record bound, or when it has no answer left to drop, its
// oldest record goes entirely. It never touches newest, the record being
// stored, and reports whether it freed anything.
func (s *IdemStore) evictFair(newest string) bool {
	f := s.fair
	t := f.heap[0]
	if len(s.Records) <= IdemMaxRecords && t.live < len(t.keys) {
		k := t.keys[t.live]
		if rec := s.Records[k]; k != newest && len(rec.Body) > 0 {
			s.Bytes -= int64(len(rec.Body))
			t.bytes -= int64(len(rec.Body))
			rec.Body, rec.Evicted = nil, true
			t.live++
			f.resized(t)
			return true
		}
	}
	k := t.keys[0]
	if k == newest {
		// The largest tenant holds only the record being stored: the
		// oldest record of all gives way instead.
		for len(s.Order) > 0 && s.Order[0] == "" {
			s.drop()
		}
		if len(s.Order) == 0 || s.Order[0] == newest {
			return false
		}
		s.drop()
		return true
	}
	rec := s.Records[k]
	i := rec.pos - f.base
	if s.Order[i] != k {
		panic(fmt.Sprintf("fsm: idempotency order holds %q where %q should be", s.Order[i], k))
	}
	s.Order[i] = ""
	f.holes++
	s.forget(f, t, k, rec)
	s.compactOrder(f)
	return true
}

// forget removes k, the oldest record of t, from the records and the index
// (not from Order: the caller pops it or leaves a hole).
func (s *IdemStore) forget(f *fairIndex, t *idemTenant, k string, rec *IdemRecord) {
	if t.keys[0] != k {
		panic(fmt.Sprintf("fsm: idempotency record %q is not its tenant's oldest (%q)", k, t.keys[0]))
	}
	b := recordBytes(k, rec)
	s.Bytes -= b
	t.bytes -= b
	t.keys[0] = ""
	t.keys = t.keys[1:]
	if t.live > 0 {
		t.live--
	}
	if cap(t.keys) > 64 && len(t.keys) < cap(t.keys)/4 {
		t.keys = append([]string(nil), t.keys...)
	}
	delete(s.Records, k)
	f.resized(t)
}

// compactOrder rewrites Order without its holes once they are the larger
// part of it, so holes cost amortised O(1) and Order stays within twice the
// records. It depends only on Order, so every replica compacts at the
// same entry and encodes the same Order.
func (s *IdemStore) compactOrder(f *fairIndex) {
	if f.holes <= 1024 || f.holes <= len(s.Order)/2 {
		return
	}
	out := make([]string, 0, len(s.Order)-f.holes)
	for _, k := range s.Order {
		if k != "" {
			s.Records[k].pos = f.base + uint64(len(out))
			out = append(out, k)
		}
	}
	s.Order, f.holes = out, 0
}

// evictedRefusal answers a retry whose answer the store dropped early: the
// request was applied, and applying it again could move money twice.
func evictedRefusal(rec *IdemRecord) *wire.Refusal {
	return wire.Refuse(http.StatusConflict, wire.CodeConflict,
		"this idempotency-key's request was applied (log index %d), but its stored answer was dropped early to keep the store bounded; "+
			"it is not applied again: read the current state instead of retrying", rec.Index)
}
