package fsm

import (
	"bytes"
	"net/http"

	"github.com/perpd/perpd/fsm/wire"
)

// IdemRetentionMs is how long a stored answer is kept: 24 hours of FSM time.
const IdemRetentionMs = 24 * 60 * 60 * 1000

// IdemMaxRecords bounds the store whatever the request rate: past it the
// oldest records are dropped early (a retry after that re-applies, which the
// domain rules still keep safe for money, e.g. withdrawals dedupe by railRef).
const IdemMaxRecords = 2_000_000

// IdemRecord is one stored answer.
type IdemRecord struct {
	ReqHash     []byte `cbor:"1,keyasint"`
	Status      int    `cbor:"2,keyasint"`
	Body        []byte `cbor:"3,keyasint"`
	ExpiresAtMs int64  `cbor:"4,keyasint"`
	Index       uint64 `cbor:"5,keyasint"`
}

// IdemStore keeps successful answers by scoped idempotency key. Order holds
// the keys in insertion order, which is also expiry order because the log
// clock never runs backwards, so pruning is a pop from the front.
type IdemStore struct {
	Records map[string]*IdemRecord `cbor:"1,keyasint"`
	Order   []string               `cbor:"2,keyasint"`
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
	return &Result{Status: rec.Status, Body: rec.Body, Replay: true, Index: rec.Index}, nil
}

func (s *IdemStore) store(key string, reqHash []byte, r *Result, nowMs int64, index uint64) {
	s.Records[key] = &IdemRecord{ReqHash: reqHash, Status: r.Status, Body: r.Body, ExpiresAtMs: nowMs + IdemRetentionMs, Index: index}
	s.Order = append(s.Order, key)
	for len(s.Order) > IdemMaxRecords {
		s.drop()
	}
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

func (s *IdemStore) drop() {
	delete(s.Records, s.Order[0])
	s.Order[0] = ""
	s.Order = s.Order[1:]
	// Re-slice lazily: copy down when the dead prefix dominates, so the
	// backing array does not grow without bound.
	if cap(s.Order) > 1024 && len(s.Order) < cap(s.Order)/4 {
		s.Order = append([]string(nil), s.Order...)
	}
}
