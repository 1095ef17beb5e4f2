package fsm

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/perpd/perpd/fsm/growth"
	"github.com/perpd/perpd/fsm/por"
	"github.com/perpd/perpd/fsm/trade"
	"github.com/perpd/perpd/fsm/wire"
)

// Options tune a Machine.
type Options struct {
	// CheckInvariants runs the full ledger conservation check after every
	// entry (tests and the simulation; O(accounts) per entry).
	CheckInvariants bool
	// PoRBuilds, when set, builds Proof of Reserves snapshots off this
	// machine's apply path (LevelPoRBesideApply): a live node's machine,
	// whose snapshot shadow builds them.
	PoRBuilds PoRBuilds
	// PoRBuilt, when set, is told inside apply of each Proof of Reserves
	// snapshot this machine builds inline from LevelPoRBesideApply, with
	// the index of the entry that made it due: a node's snapshot shadow
	// keeps those its builder may be asked for, which a group entry may
	// have made due and published before the shadow can stop after it.
	// It must not block and must not change the snapshot.
	PoRBuilt func(index uint64, snap *por.Snapshot)
}

// Machine applies log entries to State. It is safe for concurrent use: one
// applier (raft's FSM goroutine) and many readers.
type Machine struct {
	mu    sync.RWMutex
	st    *State
	index uint64
	opts  Options
	// halt is set once, when an entry broke an invariant: the state may
	// then hold part of that entry, so nothing is applied or snapshotted
	// after it and the node stops serving (fail-stop).
	halt atomic.Pointer[Halt]
	// ctx is the Ctx of the entry being applied, reused from entry to
	// entry (only the applier touches it, under mu): its event buffer and
	// its trade and growth environments are made once, not per entry.
	ctx Ctx
	// eventsRate16 is the recent number of events per command, in
	// sixteenths (eventRoom).
	eventsRate16 int
	// cmd and subCmd are the entry's command and a group's current one,
	// decoded in place for the same reason; their payloads are the
	// entry's own bytes, which nothing keeps past the entry.
	cmd, subCmd Command
	// encodedSize and largestField are the sizes of the last encoding of
	// State and of its largest field, to size the next one's buffers
	// (writeState); not state, so not replicated.
	encodedSize, largestField atomic.Int64
}

// Halt says why a replica stopped applying.
type Halt struct {
	// Index is the entry that broke (or the applied index, for a failed
	// snapshot check); Type its command type (0 when not a command).
	Index  uint64
	Type   CmdType
	Reason string
	// Stack is the goroutine stack of a panic, for the operator's log.
	Stack string
}

func (h *Halt) Error() string {
	return fmt.Sprintf("replica halted at index %d (command type %d): %s", h.Index, h.Type, h.Reason)
}

// Halted returns why the machine stopped applying, or nil while it runs.
func (m *Machine) Halted() *Halt { return m.halt.Load() }

// haltWith records the first halt; later ones keep the first reason.
func (m *Machine) haltWith(h *Halt) { m.halt.CompareAndSwap(nil, h) }

// HaltWith halts the machine for a reason found outside it: a shadow copy
// of the same state (node/shadow.go) broke an invariant at a snapshot.
func (m *Machine) HaltWith(h *Halt) { m.haltWith(h) }

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
// advances the index. Once the machine is halted no entry is applied: each
// command entry is answered 503 and the applied index stays at the last
// entry applied whole.
func (m *Machine) ApplyBatch(indexes []uint64, data [][]byte) ([]*Result, []Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	results := make([]*Result, len(data))
	// Entries emit straight into the batch's events (Ctx.Emit), made on
	// the first event at the size recent batches suggest; the caller owns
	// the slice.
	m.ctx.events, m.ctx.eventsCap, m.ctx.commands = nil, m.eventRoom(len(data)), 0
	for i, d := range data {
		m.ctx.resultsLeft = len(data) - i
		if h := m.halt.Load(); h != nil {
			if d != nil {
				results[i] = haltedResult(h, indexes[i])
			}
			continue
		}
		if d == nil {
			m.index = indexes[i]
			continue
		}
		cmd := &m.cmd
		err := decodeCommand(d, cmd, true, m.st.Access)
		if err == nil && cmd.Type == CmdGroup {
			results[i] = m.applyGroup(indexes[i], cmd)
			continue
		}
		r, h := m.applyDecoded(indexes[i], cmd, err)
		if h != nil {
			m.haltWith(h)
			results[i] = haltedResult(h, indexes[i])
			continue
		}
		m.index = indexes[i]
		results[i] = r
	}
	events := m.ctx.events
	m.ctx.events = nil // the caller's now: the next batch starts its own
	m.ctx.resultBlock = nil
	m.noteEvents(len(events), m.ctx.commands)
	return results, events
}

// A batch's events slice starts with room for the events its commands
// are likely to emit: the recent rate per command, in sixteenths (a market
// order emits three, a resting limit order one), at most eventsCapMax;
// past that, append grows it. A rate that rises is taken at once, one
// that falls slowly, so that a mix of orders does not regrow the slice
// every other batch. The rate is capped, so that after a rare crowd of
// events (a print that liquidates many) a batch never starts with more
// than eventsRateMax16/16 events a command. Only memory depends on it,
// never the events.
const (
	eventsRateStart16 = 3 * 16
	eventsRateMax16   = 16 * 16
	eventsCapMax      = 4096
)

// eventRoom is the starting room for n commands' events.
func (m *Machine) eventRoom(n int) int {
	if m.eventsRate16 == 0 {
		m.eventsRate16 = eventsRateStart16
	}
	return min((n*m.eventsRate16+15)/16, eventsCapMax)
}

// noteEvents folds a batch's events per command into the rate.
func (m *Machine) noteEvents(events, commands int) {
	if commands == 0 {
		return
	}
	r := min((16*events+commands-1)/commands, eventsRateMax16)
	if r >= m.eventsRate16 {
		m.eventsRate16 = r
		return
	}
	m.eventsRate16 -= (m.eventsRate16 - r + 7) / 8
}

// GroupPayload is a group entry's commands, each in its log-entry bytes.
type GroupPayload struct {
	Cmds [][]byte `cbor:"1,keyasint"`
}

// GroupMax bounds the commands of one group entry.
const GroupMax = 1024

// EncodeGroup returns the log-entry bytes of a group of encoded commands:
// one raft entry that the machine applies as len(cmds) commands, in order,
// all at the entry's index (group commit, node/group.go).
func EncodeGroup(cmds [][]byte) ([]byte, error) {
	c, err := NewCommand(CmdGroup, GroupPayload{Cmds: cmds})
	if err != nil {
		return nil, err
	}
	return c.Encode()
}

// applyGroup applies a group entry's commands in order, each exactly as if
// it were its own entry at index: its own answer, its own refusal (a
// refused command changes nothing, so its neighbours never see it), its
// own events. A group inside a group, or an empty or oversized group, is
// refused whole. If a command halts the machine, it and the rest are
// answered 503 and the applied index stays before the group.
func (m *Machine) applyGroup(index uint64, cmd *Command) *Result {
	var g GroupPayload
	var err error
	if !decodeGroupFast(cmd.Payload, &g) {
		g = GroupPayload{}
		err = Unmarshal(cmd.Payload, &g)
	}
	subs := g.Cmds
	if err != nil || len(subs) == 0 || len(subs) > GroupMax {
		res := refusalResult(wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "a group holds 1 to %d commands", GroupMax))
		res.Index = index
		m.index = index
		return res
	}
	if m.ctx.events == nil {
		// One entry, many commands: room for each command's events.
		m.ctx.eventsCap = max(m.ctx.eventsCap, m.eventRoom(len(subs)))
	}
	out := &Result{Index: index, Group: make([]*Result, len(subs))}
	after := m.ctx.resultsLeft - 1 // the batch's entries after this one
	for j, sub := range subs {
		m.ctx.resultsLeft = len(subs) - j + after
		if h := m.halt.Load(); h != nil {
			out.Group[j] = haltedResult(h, index)
			continue
		}
		sc := &m.subCmd
		err := decodeCommand(sub, sc, true, m.st.Access)
		if err == nil && sc.Type == CmdGroup {
			out.Group[j] = refusalResult(wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "a group cannot hold a group"))
			out.Group[j].Index = index
			continue
		}
		r, h := m.applyDecoded(index, sc, err)
		if h != nil {
			m.haltWith(h)
			out.Group[j] = haltedResult(h, index)
			continue
		}
		out.Group[j] = r
	}
	if m.halt.Load() == nil {
		m.index = index
	}
	return out
}

// haltedResult answers an entry the halted machine did not apply. Another
// replica may have applied it, so it is the ambiguous 503 of a lost write:
// a retry with the same idempotency key finds out.
func haltedResult(h *Halt, index uint64) *Result {
	res := refusalResult(wire.Refuse(http.StatusServiceUnavailable, wire.CodeUnavailable,
		"this replica halted at index %d and applies nothing more; retry with the same idempotency key on another node", h.Index))
	res.Index = index
	return res
}

// Apply applies one entry.
func (m *Machine) Apply(index uint64, data []byte) (*Result, []Event) {
	rs, evs := m.ApplyBatch([]uint64{index}, [][]byte{data})
	return rs[0], evs
}

// applyDecoded applies one command decoded from an entry (err: it was
// not decodable, and is refused). Its events are appended to the batch's
// (Ctx.events); a halt takes them back out.
func (m *Machine) applyDecoded(index uint64, cmd *Command, err error) (res *Result, halt *Halt) {
	if err != nil {
		res = refusalResult(wire.Refuse(http.StatusBadRequest, wire.CodeValidation, "undecodable command"))
		res.Index = index
		return res, nil
	}
	c := m.ctx.begin(m.st, cmd, index)
	c.porBuilds, c.porBuilt = m.opts.PoRBuilds, m.opts.PoRBuilt
	c.commands++
	mark := len(c.events)
	defer func() {
		// A panic inside a handler is a broken invariant (the money paths
		// panic on purpose), and the state may hold part of the entry.
		// Answering would serve that half-applied state, so the replica
		// halts instead (fail-stop) and is replaced from a snapshot.
		if p := recover(); p != nil {
			if m.opts.CheckInvariants {
				panic(p) // tests must see the bug, not a halt
			}
			c.dropEvents(mark)
			res = nil
			halt = &Halt{Index: index, Type: cmd.Type, Reason: fmt.Sprintf("panic applying command type %d: %v", cmd.Type, p), Stack: string(debug.Stack())}
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
		for _, check := range invariantChecks {
			if err := check(m.st); err != nil {
				panic(fmt.Sprintf("invariant broken after entry %d (type %d): %v", index, cmd.Type, err))
			}
		}
	}
	return res, nil
}

// MaxClockStepMs bounds how far one entry may advance log time. A leader
// whose wall clock jumps a day ahead would otherwise expire every stored
// answer, invoice and confirm token in one entry; with the bound, log time
// catches up at most a minute per entry, so a clock error shows as time
// running fast, never as a cliff. Leaders stamp within it (node/propose.go).
const MaxClockStepMs = 60_000

// advanceClock moves FSM time to the entry's stamp (never backwards, and at
// most MaxClockStepMs per entry once time has started) and fires whatever
// timers the passing time makes due.
func (m *Machine) advanceClock(c *Ctx) {
	now, ts := c.St.NowMs, c.Cmd.TsMs
	if ts <= now {
		return
	}
	if now != 0 && ts-now > MaxClockStepMs {
		ts = now + MaxClockStepMs
	}
	c.St.NowMs = ts
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
		c.dropEvents(timerEvents)
		return refusalResult(ref)
	}
	res, err := okResultIn(c.newResult(), status, body)
	if err != nil {
		panic(err)
	}
	switch {
	case c.Cmd.IdemKey == "":
	case c.St.FeatureLevel >= LevelIdemFair:
		idem.storeFair(c.Cmd.IdemKey, c.Cmd.Account, c.Cmd.ReqHash, res, c.St.NowMs, c.Index)
	default:
		idem.store(c.Cmd.IdemKey, c.Cmd.ReqHash, res, c.St.NowMs, c.Index)
	}
	return res
}

// Ctx is what a handler sees while applying one entry. A handler must not
// keep it, or the environments it hands out, past its entry: the Machine
// reuses them for the next.
type Ctx struct {
	St    *State
	Cmd   *Command
	Index uint64
	// events is the whole batch's events, this entry's last: Emit
	// appends to it (made with room for eventsCap on the first event),
	// and a refusal or a halt cuts the entry's own back off.
	events    []Event
	eventsCap int
	// commands counts the batch's commands applied, for the Machine's
	// events rate (eventRoom).
	commands int
	// genv is this entry's growth.Env, filled on first use (growthEnv).
	genv    growth.Env
	genvSet bool
	// tenv is the trade.Env, its functions bound once (tradeEnv).
	tenv trade.Env
	// created is the entry's order answer (answerCreated).
	created trade.Created
	// resultBlock holds the zero Results that newResult hands out, made
	// for resultsLeft, the commands of the batch still to answer, so that
	// a batch of accepted commands makes its answers in one allocation.
	resultBlock []Result
	resultsLeft int
	// porBuilds is the machine's Options.PoRBuilds.
	porBuilds PoRBuilds
	// porBuilt is the machine's Options.PoRBuilt.
	porBuilt func(index uint64, snap *por.Snapshot)
}

// newResult is a zero Result for the command being applied: the next of
// the batch's block, made when empty with room for every command left (at
// most one Result each; a refused or replayed command leaves its slot
// unused). A Result the caller keeps keeps its block alive, at most a
// batch's answers.
func (c *Ctx) newResult() *Result {
	if len(c.resultBlock) == 0 {
		c.resultBlock = make([]Result, max(c.resultsLeft, 1))
	}
	r := &c.resultBlock[0]
	c.resultBlock = c.resultBlock[1:]
	return r
}

// begin readies the Ctx for the entry at index, keeping the batch's
// events and the environments' wiring.
func (c *Ctx) begin(st *State, cmd *Command, index uint64) *Ctx {
	c.St, c.Cmd, c.Index = st, cmd, index
	c.genvSet = false
	return c
}

// Now is the log's time for this entry.
func (c *Ctx) Now() int64 { return c.St.NowMs }

// Emit queues an event for subscribers; a handler's events are dropped if
// its command is refused.
func (c *Ctx) Emit(ev Event) {
	if ev.TsMs == 0 {
		ev.TsMs = c.St.NowMs
	}
	if c.events == nil {
		c.events = make([]Event, 0, max(c.eventsCap, 1))
	}
	c.events = append(c.events, ev)
}

// reserveEvents makes room for n more events at once, for a timer that
// emits many (a funding boundary: one per holder), so the batch's slice
// grows once rather than by a quarter at a time, copying each time.
func (c *Ctx) reserveEvents(n int) {
	if c.events == nil {
		c.events = make([]Event, 0, max(c.eventsCap, n, 1))
		return
	}
	c.events = slices.Grow(c.events, n)
}

// dropEvents cuts the batch's events back to its first n, clearing the
// rest so that the dropped data is not kept alive.
func (c *Ctx) dropEvents(n int) {
	clear(c.events[n:])
	c.events = c.events[:n]
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
	// invariantChecks are the domains' own consistency checks, run with
	// the ledger's under Options.CheckInvariants.
	invariantChecks []func(st *State) error
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

// TestCmdBase is the first command type reserved for tests; no production
// command uses it or anything above it.
const TestCmdBase CmdType = 0xF000

// RegisterTestCommand registers a handler for a test-only command type, so
// tests outside this package can drive a replica into states no production
// command reaches (a handler that moves money and then panics). Call it
// from an init function, before any machine applies entries.
func RegisterTestCommand(t CmdType, h func(c *Ctx) (status int, body any, ref *wire.Refusal)) {
	if t < TestCmdBase {
		panic(fmt.Sprintf("command type %d is not in the test block", t))
	}
	register(t, h)
}

// IsTestCommand reports whether t is a test command registered in this
// process (never in production).
func IsTestCommand(t CmdType) bool {
	_, ok := handlers[t]
	return ok && t >= TestCmdBase
}
