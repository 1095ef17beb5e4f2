package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Type is the kind of an event, as in Jepsen.
type Type string

// Event types. An invocation is completed by exactly one of ok (it took
// effect, and the value is what it returned), fail (it certainly did not
// take effect) or info (it may or may not have taken effect).
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// NemesisProcess is the process id of fault injections.
const NemesisProcess = -1

// PriceProcess is the process id of the harness's price moves through the
// admin surface (crashes and spikes pinned on a feed, and the script that
// takes the feed back to its path): operations on the venue, not on an
// account, recorded for the report and left out of the client counts.
const PriceProcess = -2

// Function names the harness records. Workloads add their own.
const (
	FSignup       = "signup"
	FFaucet       = "faucet"
	FRead         = "read"
	FMint         = "mint-key"
	FListDeposits = "list-deposits"
	FListSessions = "list-sessions"
	// FOrder places an order (market, limit, a trigger or a bracket; Op.Spec
	// says which); its idempotency key is the order id.
	FOrder = "order"
	// FCancel cancels an order (Op.Order) under its own key.
	FCancel = "cancel"
	// FCancelAfter arms (Op.TimeoutMs > 0), refreshes or disarms (0) the
	// account's cancel-all-after switch.
	FCancelAfter = "cancel-all-after"
	// FPriceCrash pins a feed (Op.Detail: feed, price, move) below its
	// mid, FPriceSpike above it; FPriceRestore scripts the feed back onto
	// its path; FPriceFreeze pins every feed where it is once the clients
	// stopped (PriceProcess).
	FPriceCrash   = "price-crash"
	FPriceSpike   = "price-spike"
	FPriceRestore = "price-restore"
	FPriceFreeze  = "price-freeze"
	// FWithdraw requests a withdrawal (POST /v1/withdrawals): Op.Msat on
	// the invocation is the amount asked for (what the destination is to
	// receive, the fee on top), Op.Path its path (spark to an address,
	// lightning to an invoice; empty in older histories: spark), Op.FeeMsat
	// the fee the venue quoted for it when it was quoted first, Op.RailRef
	// on an acknowledgement the withdrawal's railRef.
	FWithdraw = "withdraw"
)

// Op is one event of the history.
type Op struct {
	// Index is the event's position in the history.
	Index int `json:"index"`
	// ID pairs an invocation with its completion.
	ID      int    `json:"id"`
	Type    Type   `json:"type"`
	Process int    `json:"process"`
	Node    string `json:"node,omitempty"`
	F       string `json:"f"`
	// Account the operation acts on or reads.
	Account string `json:"account,omitempty"`
	// IdemKey is the idempotency key sent (writes only).
	IdemKey string `json:"idemKey,omitempty"`
	// Msat is the amount a write credited or a read observed.
	Msat *int64 `json:"msat,omitempty"`
	// Order is the order id an order or cancel acts on.
	Order string `json:"order,omitempty"`
	// OrderStatus is what an acknowledged order or cancel answered: the
	// creation status (filled, resting, ...) or, for a cancel,
	// "canceled" / "not-canceled".
	OrderStatus string `json:"orderStatus,omitempty"`
	// Spec is what an order placement asked for (invocations only).
	Spec *OrderSpec `json:"spec,omitempty"`
	// TimeoutMs is the timeout a cancel-all-after call sent (0 disarms).
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// Armed and DeadlineTsMs are what an acknowledged cancel-all-after
	// call answered (the deadline in log time; nil when disarmed).
	Armed        *bool  `json:"armed,omitempty"`
	DeadlineTsMs *int64 `json:"deadlineTsMs,omitempty"`
	// RailRef is the railRef an acknowledged withdrawal answered.
	RailRef string `json:"railRef,omitempty"`
	// Path is a withdrawal's path (invocations only): "spark" or
	// "lightning".
	Path string `json:"path,omitempty"`
	// FeeMsat is the fee POST /v1/withdrawals/quote answered for a
	// withdrawal's destination and amount just before it was requested
	// (invocations only; nil when it was not quoted, or the quote failed).
	FeeMsat *int64 `json:"feeMsat,omitempty"`
	// KeyID names a minted API key.
	KeyID string `json:"keyId,omitempty"`
	// Detail is free text: a nemesis' target, a listing's content.
	Detail string `json:"detail,omitempty"`
	// Status is the HTTP status of the answer, when there was one.
	Status int `json:"status,omitempty"`
	// Code is the error code of a refusal.
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
	// RaftIndex is the X-Raft-Index of the answer.
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	// Resolves is the ID of an earlier info operation this one settles by
	// retrying it with the same idempotency key.
	Resolves int `json:"resolves,omitempty"`
	// InRun marks a retry (Resolves set) sent while the clients ran, right
	// after the unknown outcome, with faults possibly still active: the
	// original attempt may still be in flight in the log then, and
	// refusals are not stored under the idempotency key (a refused command
	// leaves no record, fsm/machine.go), so the original could still apply
	// after a refused retry. Only an acknowledgement of such a retry
	// settles the original (checker.Settles).
	InRun bool `json:"inRun,omitempty"`
	// TimeNs is monotonic nanoseconds since the run started.
	TimeNs int64 `json:"timeNs"`
}

// Order kinds of an OrderSpec: a plain order, a trigger of that kind, or
// a bracket.
const (
	KindMarket     = "market"
	KindLimit      = "limit"
	KindStop       = "stop"
	KindTakeProfit = "take_profit"
	KindEntry      = "entry"
	KindBracket    = "bracket"
)

// OrderSpec is what an order placement asked for, in the terms the
// checkers judge fills and listings by.
type OrderSpec struct {
	Market     string `json:"market"`
	Buy        bool   `json:"buy"`
	Contracts  int64  `json:"contracts"`
	ReduceOnly bool   `json:"reduceOnly,omitempty"`
	// Leverage is the leverage asked for (0: the market's most).
	Leverage int64  `json:"leverage,omitempty"`
	Kind     string `json:"kind"`
	// LevelQ8 is a trigger's level, or a bracket's entry level (0: the
	// bracket's entry is a market order).
	LevelQ8 int64 `json:"levelQ8,omitempty"`
	// Legs are a bracket's stop and take-profit legs.
	Legs []LegSpec `json:"legs,omitempty"`
}

// LegSpec is one bracket leg: a reduce-only trigger on the entry's other
// side, with its own order id.
type LegSpec struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"` // KindStop or KindTakeProfit
	LevelQ8   int64  `json:"levelQ8"`
	Contracts int64  `json:"contracts"`
}

// IsTrigger reports whether the order waits for a price: a standalone
// trigger, or a bracket whose entry is a trigger.
func (s *OrderSpec) IsTrigger() bool {
	switch s.Kind {
	case KindStop, KindTakeProfit, KindEntry:
		return true
	case KindBracket:
		return s.LevelQ8 != 0
	}
	return false
}

// Int64 returns a pointer to v, for Op.Msat.
func Int64(v int64) *int64 { return &v }

// Recorder appends events from many goroutines, stamping them in order.
type Recorder struct {
	mu     sync.Mutex
	start  time.Time
	ops    []Op
	nextID int
	sink   *bufio.Writer
	closer io.Closer
	err    error
}

// NewRecorder starts a history whose clock begins now. When path is not
// empty every event is also streamed there as it happens, so a history
// survives a harness crash.
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now(), nextID: 1}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		r.sink, r.closer = bufio.NewWriter(f), f
	}
	return r, nil
}

// Now is the monotonic time since the run started.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Started is the calendar time the history's clock began at.
func (r *Recorder) Started() time.Time { return r.start }

// Invoke records an invocation and returns it with its ID set.
func (r *Recorder) Invoke(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = r.nextID
	r.nextID++
	op.Type = Invoke
	r.appendLocked(&op)
	return op
}

// Complete records the completion of inv; done carries the outcome (its
// Type must be OK, Fail or Info) and the values returned.
func (r *Recorder) Complete(inv Op, done Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	done.ID, done.Process, done.F = inv.ID, inv.Process, inv.F
	if done.Node == "" {
		done.Node = inv.Node
	}
	if done.Account == "" {
		done.Account = inv.Account
	}
	if done.IdemKey == "" {
		done.IdemKey = inv.IdemKey
	}
	if done.Order == "" {
		done.Order = inv.Order
	}
	if done.Resolves == 0 {
		done.Resolves = inv.Resolves
	}
	done.InRun = done.InRun || inv.InRun
	r.appendLocked(&done)
	return done
}

func (r *Recorder) appendLocked(op *Op) {
	op.Index = len(r.ops)
	op.TimeNs = int64(time.Since(r.start))
	r.ops = append(r.ops, *op)
	if r.sink != nil && r.err == nil {
		b, err := json.Marshal(op)
		if err == nil {
			_, err = r.sink.Write(append(b, '\n'))
		}
		r.err = err
	}
}

// Ops returns a copy of the history so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Close flushes the streamed history.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink == nil {
		return r.err
	}
	if err := r.sink.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.closer.Close(); err != nil && r.err == nil {
		r.err = err
	}
	r.sink = nil
	return r.err
}

// Load reads a history written by a Recorder.
func Load(rd io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", len(ops)+1, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

// Pair is one operation: its invocation and its completion (nil while it
// never completed, which the harness treats as info).
type Pair struct {
	Invoke Op
	Done   *Op
}

// Outcome is the pair's completion type; an unfinished pair is Info.
func (p Pair) Outcome() Type {
	if p.Done == nil {
		return Info
	}
	return p.Done.Type
}

// Pairs matches invocations with completions by ID, in invocation order.
func Pairs(ops []Op) []Pair {
	byID := map[int]int{}
	var out []Pair
	for _, op := range ops {
		switch op.Type {
		case Invoke:
			byID[op.ID] = len(out)
			out = append(out, Pair{Invoke: op})
		default:
			if i, ok := byID[op.ID]; ok && out[i].Done == nil {
				done := op
				out[i].Done = &done
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Invoke.Index < out[j].Invoke.Index })
	return out
}
