package fsm

import (
	"encoding/json"
	"net/http"

	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Result is the state machine's answer to one command: the HTTP status and
// JSON body the client receives. Successful answers to idempotent commands
// are stored, so a retry gets these exact bytes back.
type Result struct {
	Status int    `cbor:"1,keyasint"`
	Body   []byte `cbor:"2,keyasint"`
	// Code is the refusal code, empty on success.
	Code string `cbor:"3,keyasint,omitempty"`
	// Replay is true when the answer came from the idempotency store.
	Replay bool `cbor:"4,keyasint,omitempty"`
	// Index is the log index the command was applied at.
	Index uint64 `cbor:"5,keyasint,omitempty"`
	// Group holds one answer per command of a group entry (CmdGroup), in
	// order; the group's own Status and Body are empty. Never stored.
	Group []*Result `cbor:"-"`
}

// OK reports whether the command was accepted.
func (r *Result) OK() bool { return r != nil && r.Code == "" && r.Status < 400 }

// Decode unmarshals the JSON body into v.
func (r *Result) Decode(v any) error { return json.Unmarshal(r.Body, v) }

func refusalResult(ref *wire.Refusal) *Result {
	body, _ := json.Marshal(wire.ErrorBody{Error: ref.Msg, Code: ref.Code})
	if len(ref.Extra) > 0 {
		m := make(map[string]any, len(ref.Extra)+2)
		for k, v := range ref.Extra {
			m[k] = v
		}
		m["error"], m["code"] = ref.Msg, ref.Code
		body, _ = json.Marshal(m) // encoding/json sorts map keys: the same bytes on every replica
	}
	st := ref.Status
	if st == 0 {
		st = http.StatusBadRequest
	}
	return &Result{Status: st, Body: body, Code: ref.Code}
}

func okResult(status int, v any) (*Result, error) { return okResultIn(new(Result), status, v) }

// okResultIn is okResult writing into res, a zero Result.
func okResultIn(res *Result, status int, v any) (*Result, error) {
	if c, ok := v.(*trade.Created); ok {
		if body, ok := appendCreated(nil, c); ok {
			res.Status, res.Body = status, body
			return res, nil
		}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	res.Status, res.Body = status, body
	return res, nil
}

// appendCreated writes an order's answer, every order's, without
// reflection: json.Marshal's bytes exactly when both strings are plain
// (wire.PlainJSON); ok is false otherwise, and the caller marshals.
func appendCreated(b []byte, c *trade.Created) ([]byte, bool) {
	if !wire.PlainJSON(c.OrderID) || !wire.PlainJSON(c.Status) {
		return nil, false
	}
	if b == nil {
		b = make([]byte, 0, len(`{"orderId":"","status":""}`)+len(c.OrderID)+len(c.Status))
	}
	b = append(b, `{"orderId":"`...)
	b = append(b, c.OrderID...)
	b = append(b, `","status":"`...)
	b = append(b, c.Status...)
	return append(b, `"}`...), true
}
