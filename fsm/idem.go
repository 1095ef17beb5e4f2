package fsm

import (
	"bytes"
	"net/http"
	"slices"

	"github.com/perpd/perpd/fsm/wire"
)

// IdemRetentionMs is how long a stored answer is kept: 24 hours of FSM time.
const IdemRetentionMs = 24 * 60 * 60 * 1000

// The store is bounded whatever the request rate, by count and by bytes
// (key, request hash and answer body, plus a fixed per-record allowance):
// past either bound records are dropped early: below LevelIdemFair the
// oldest, and a retry re-applies (the domain rules keep that safe for
// most money commands, docs/decisions.md says why for each); from it the
// largest tenant's, as tombstones that refuse a retry (idem_fair.go).
// 64 MiB keeps the store a bounded share of every snapshot and of every
// follower's memory.
const (
	IdemMaxRecords = 500_000
	IdemMaxBytes   = 64 << 20
	// idemRecordOverheadBytes stands for the fixed fields (status, expiry,
	// index) and their encoding, so many tiny answers are bounded too.
	idemRecordOverheadBytes = 32
)

// IdemRecord is one stored answer.
//
// Every stored answer keeps one, so it is packed: Status is an int32 (an
// HTTP status) beside Evicted, 96 bytes instead of 104, which the
// allocator rounded up to 112. Fields are encoded by their keys, in key
// order, whatever order they are declared in.
type IdemRecord struct {
	ReqHash []byte `cbor:"1,keyasint"`
	Status  int32  `cbor:"2,keyasint"`
	// Evicted marks a tombstone (LevelIdemFair): the answer was dropped
	// before its retention ended, the key and request hash stay so that a
	// retry is refused rather than applied again.
	Evicted     bool   `cbor:"7,keyasint,omitempty"`
	Body        []byte `cbor:"3,keyasint"`
	ExpiresAtMs int64  `cbor:"4,keyasint"`
	Index       uint64 `cbor:"5,keyasint"`
	// Tenant is the account that stored it ("" for a public route), from
	// LevelIdemFair; older records count against their key's account.
	Tenant string `cbor:"6,keyasint,omitempty"`

	pos uint64 // where it sits in Order (fairIndex); derived
}

// IdemStore keeps successful answers by scoped idempotency key. Order holds
// the keys in insertion order, which is also expiry order because the log
// clock never runs backwards, so pruning is a pop from the front.
type IdemStore struct {
	Records map[string]*IdemRecord `cbor:"1,keyasint"`
	Order   []string               `cbor:"2,keyasint"`
	// Bytes is the sum of recordBytes over Records.
	Bytes int64 `cbor:"3,keyasint,omitempty"`

	// fair is derived from Records and Order when LevelIdemFair first
	// needs it (nil after a restore, and always below that level).
	fair *fairIndex
}

func recordBytes(key string, r *IdemRecord) int64 {
	return int64(len(key)+len(r.ReqHash)+len(r.Body)) + idemRecordOverheadBytes
}

// recount recomputes Bytes, for snapshots written before it was kept.
func (s *IdemStore) recount() {
	s.Bytes = 0
	for k, r := range s.Records {
		s.Bytes += recordBytes(k, r)
	}
}

func newIdemStore() *IdemStore { return &IdemStore{Records: map[string]*IdemRecord{}} }

// lookup returns the stored answer for key, a reuse refusal when the body
// differs, or nil when the key is new.
func (s *IdemStore) lookup(key string, reqHash []byte) (*Result, *wire.Refusal) {
	rec, ok := s.Records[key]
	if !ok {
		return nil, nil
	}
	if !bytes.Equal(rec.ReqHash, reqHash) {
		return nil, wire.Refuse(http.StatusConflict, wire.CodeIdempotencyReused,
			"idempotency-key was already used with a different request")
	}
	if rec.Evicted {
		return nil, evictedRefusal(rec)
	}
	return &Result{Status: int(rec.Status), Body: rec.Body, Replay: true, Index: rec.Index}, nil
}

func (s *IdemStore) store(key string, reqHash []byte, r *Result, nowMs int64, index uint64) {
	rec := &IdemRecord{ReqHash: reqHash, Status: int32(r.Status), Body: r.Body, ExpiresAtMs: nowMs + IdemRetentionMs, Index: index}
	s.Records[key] = rec
	s.Bytes += recordBytes(key, rec)
	s.Order = appendKey(s.Order, key)
	// The newest record always stays, even alone past the byte bound.
	for len(s.Order) > IdemMaxRecords || (s.Bytes > IdemMaxBytes && len(s.Order) > 1) {
		s.drop()
	}
}

// appendKey is append for the store's key lists, which grow by one key
// per stored answer up to hundreds of thousands: past a few hundred keys
// append grows a slice by a quarter, copying the whole list every few
// thousand answers; doubling copies it a quarter as often. Only the
// capacity differs, never the keys.
func appendKey(keys []string, key string) []string {
	if len(keys) == cap(keys) && len(keys) >= 256 {
		keys = slices.Grow(keys, len(keys))
	}
	return append(keys, key)
}

// prune drops records whose retention has passed.
func (s *IdemStore) prune(nowMs int64) {
	for len(s.Order) > 0 {
		rec := s.Records[s.Order[0]]
		if rec != nil && rec.ExpiresAtMs > nowMs {
			return
		}
		s.drop()
	}
}

// drop removes the oldest entry of Order and its record (a hole has
// none), keeping the fair index, when built, in step.
func (s *IdemStore) drop() {
	k := s.Order[0]
	if f := s.fair; f != nil {
		f.base++
		if k == "" {
			f.holes--
		} else if rec := s.Records[k]; rec != nil {
			// The oldest entry is its tenant's oldest too: every older
			// record of the tenant is gone or a hole already.
			s.forget(f, f.tenants[tenantOfRecord(k, rec)], k, rec)
		}
	} else if rec := s.Records[k]; rec != nil {
		s.Bytes -= recordBytes(k, rec)
		delete(s.Records, k)
	}
	s.Order[0] = ""
	s.Order = s.Order[1:]
	// Re-slice lazily: copy down when the dead prefix dominates, so the
	// backing array does not grow without bound.
	if cap(s.Order) > 1024 && len(s.Order) < cap(s.Order)/4 {
		s.Order = append([]string(nil), s.Order...)
	}
}
