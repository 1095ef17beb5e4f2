package fsm

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/perpd/perpd/fsm/wire"
)

// Options tune a Machine.
type Options struct {
	// CheckInvariants runs the full ledger conservation check after every
	// entry (tests and the simulation; O(accounts) per entry).
	CheckInvariants bool
}

// Machine applies log entries to State. It is safe for concurrent use: one
// applier (raft's FSM goroutine) and many readers.
type Machine struct {
	mu    sync.RWMutex
	st    *State
	index uint64
	opts  Options
}

// NewMachine returns a machine holding the empty state.
func NewMachine(opts Options) *Machine {
	return &Machine{st: NewState(), opts: opts}
}

// Applied returns the index of the last applied entry.
func (m *Machine) Applied() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.index
}

// Read runs fn with the current state under the read lock. fn must not
// modify the state or keep references to it after returning.
func (m *Machine) Read(fn func(st *State, index uint64)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	fn(m.st, m.index)
}

// ApplyBatch applies consecutive entries under one lock. data[i] is the
// entry at index first+i; a nil element is a raft-internal entry that only
// advances the index.
func (m *Machine) ApplyBatch(indexes []uint64, data [][]byte) ([]*Result, []Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	results := make([]*Result, len(data))
	var events []Event
	for i, d := range data {
		m.index = indexes[i]
		if d == nil {
			continue
		}
		r, evs := m.applyOne(indexes[i], d)
		results[i] = r
		events = append(events, evs...)
	}
	return results, events
}

// Apply applies one entry.
func (m *Machine) Apply(index uint64, data []byte) (*Result, []Event) {
	rs, evs := m.ApplyBatch([]uint64{index}, [][]byte{data})
	return rs[0], evs
}

func (m *Machine) applyOne(index uint64, data []byte) (res *Result, events []Event) {
	cmd, err := DecodeCommand(data)
	if err != nil {
		res = refusalResult(wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "undecodable command"))
		res.Index = index
		return res, nil
	}
	c := &Ctx{St: m.st, Cmd: cmd, Index: index}
	defer func() {
		// A panic inside a handler is a bug. Every replica hits it at the
		// same entry, so answering instead of crashing keeps the cluster up
		// and still deterministic.
		if p := recover(); p != nil {
			if m.opts.CheckInvariants {
				panic(p) // tests must see the bug, not an answer
			}
			res = refusalResult(wire.Refuse(http.StatusInternalServerError, wire.CodeUnavailable, "internal error applying command type %d: %v", cmd.Type, p))
			res.Index = index
			events = nil
		}
	}()
	m.advanceClock(c)
	res = m.dispatch(c)
	if !res.Replay {
		// A replayed answer keeps the index its command was first applied
		// at: that is where the client's write happened.
		res.Index = index
	}
	if m.opts.CheckInvariants {
		if err := m.st.Ledger.Check(); err != nil {
			panic(fmt.Sprintf("invariant broken after entry %d (type %d): %v", index, cmd.Type, err))
		}
	}
	return res, c.events
}

// advanceClock moves FSM time to the entry's stamp (never backwards) and
// fires whatever timers the passing time makes due.
func (m *Machine) advanceClock(c *Ctx) {
	if c.Cmd.TsMs <= c.St.NowMs {
		return
	}
	c.St.NowMs = c.Cmd.TsMs
	for _, t := range timers {
		t(c)
	}
}

func (m *Machine) dispatch(c *Ctx) *Result {
	h, ok := handlers[c.Cmd.Type]
	if !ok {
		return refusalResult(wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "unknown command type %d", c.Cmd.Type))
	}
	idem := c.St.Idem
	if c.Cmd.IdemKey != "" {
		stored, ref := idem.lookup(c.Cmd.IdemKey, c.Cmd.ReqHash)
		if ref != nil {
			return refusalResult(ref)
		}
		if stored != nil {
			return stored
		}
	}
	timerEvents := len(c.events)
	status, body, ref := h(c)
	if ref != nil {
		// Refusals change nothing, so they are not stored: a retry is
		// judged afresh. Events the timers emitted before the command
		// still stand: the time they reflect did pass.
		c.events = c.events[:timerEvents]
		return refusalResult(ref)
	}
	res, err := okResult(status, body)
	if err != nil {
		panic(err)
	}
	if c.Cmd.IdemKey != "" {
		idem.store(c.Cmd.IdemKey, c.Cmd.ReqHash, res, c.St.NowMs, c.Index)
	}
	return res
}

// Ctx is what a handler sees while applying one entry.
type Ctx struct {
	St     *State
	Cmd    *Command
	Index  uint64
	events []Event
}

// Now is the log's time for this entry.
func (c *Ctx) Now() int64 { return c.St.NowMs }

// Emit queues an event for subscribers; a handler's events are dropped if
// its command is refused.
func (c *Ctx) Emit(ev Event) {
	if ev.TsMs == 0 {
		ev.TsMs = c.St.NowMs
	}
	c.events = append(c.events, ev)
}

// Decode unmarshals the command payload, refusing an undecodable one.
func (c *Ctx) Decode(v any) *wire.Refusal {
	if err := Unmarshal(c.Cmd.Payload, v); err != nil {
		return wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "undecodable payload: %v", err)
	}
	return nil
}

// handler applies one command type. It returns the success status and a
// JSON-encodable body, or a refusal. A handler that refuses must not have
// changed any state: validate first, then mutate.
type handler func(c *Ctx) (status int, body any, ref *wire.Refusal)

// timer runs when FSM time advances; it may change state and emit events.
type timer func(c *Ctx)

var (
	handlers = map[CmdType]handler{}
	timers   []timer
)

// register is called from init functions of the apply_*.go files: one
// file per domain, so dispatch stays a table a reader can scan.
func register(t CmdType, h handler) {
	if _, dup := handlers[t]; dup {
		panic(fmt.Sprintf("command type %d registered twice", t))
	}
	handlers[t] = h
}

// registerTimer adds a timer; timers run in registration order, which is
// fixed by Go's file-order init, so it is the same on every replica.
func registerTimer(t timer) { timers = append(timers, t) }
