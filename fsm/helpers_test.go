package fsm

import (
	"bytes"
	"testing"

	"github.com/perpd/perpd/fsm/trade"
)

// replica is a Machine plus the index of the next entry it will apply, the
// way raft feeds it: consecutive indexes from 1.
type replica struct {
	t    testing.TB
	m    *Machine
	next uint64
}

func newReplica(t testing.TB) *replica {
	return &replica{t: t, m: NewMachine(Options{CheckInvariants: true}), next: 1}
}

// apply encodes and applies cmd at the next index.
func (r *replica) apply(cmd *Command) *Result {
	r.t.Helper()
	b, err := cmd.Encode()
	if err != nil {
		r.t.Fatal(err)
	}
	return r.applyRaw(b)
}

// applyRaw applies raw entry bytes at the next index.
func (r *replica) applyRaw(b []byte) *Result {
	r.t.Helper()
	res, _ := r.m.Apply(r.next, b)
	r.next++
	if res == nil {
		r.t.Fatal("a command entry must always get a result")
	}
	return res
}

// hash is the replica's state hash; the applied index must be the last
// entry given to it.
func (r *replica) hash() string {
	r.t.Helper()
	idx, h, err := r.m.StateHash()
	if err != nil {
		r.t.Fatal(err)
	}
	if idx != r.next-1 {
		r.t.Fatalf("applied index %d, want %d", idx, r.next-1)
	}
	return h
}

// restored is a new replica restored from a snapshot of r, ready for r's
// next entry.
func (r *replica) restored() *replica {
	r.t.Helper()
	snap, err := r.m.Snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	dst := newReplica(r.t)
	if err := dst.m.Restore(snap); err != nil {
		r.t.Fatal(err)
	}
	dst.next = r.next
	return dst
}

func (r *replica) now() int64 {
	var now int64
	r.m.Read(func(st *State, _ uint64) { now = st.NowMs })
	return now
}

func tickAt(tsMs int64) *Command { return &Command{Type: CmdTick, TsMs: tsMs} }

// noopAt is a client-style command: an idempotency key and a request hash.
func noopAt(tsMs int64, key string, reqHash []byte) *Command {
	return &Command{Type: CmdNoop, TsMs: tsMs, IdemKey: key, ReqHash: reqHash}
}

func mustCommand(t testing.TB, typ CmdType, tsMs int64, payload any) *Command {
	t.Helper()
	c, err := NewCommand(typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	c.TsMs = tsMs
	return c
}

func wantOK(t testing.TB, res *Result) {
	t.Helper()
	if !res.OK() {
		t.Fatalf("refused: status %d code %q body %s", res.Status, res.Code, res.Body)
	}
}

func wantRefused(t testing.TB, res *Result, status int, code string) {
	t.Helper()
	if res.OK() || res.Status != status || res.Code != code {
		t.Fatalf("got status %d code %q body %s, want %d %q", res.Status, res.Code, res.Body, status, code)
	}
	if !bytes.Contains(res.Body, []byte(`"code":"`+code+`"`)) {
		t.Fatalf("refusal body %s does not carry code %q", res.Body, code)
	}
}

func nowOf(t testing.TB, res *Result) int64 {
	t.Helper()
	var tr TickResult
	if err := res.Decode(&tr); err != nil {
		t.Fatalf("tick body %s: %v", res.Body, err)
	}
	return int64(tr.NowMs)
}

// advanceTo moves log time to tsMs the way a healthy leader does: one tick
// per MaxClockStepMs at most, the last stamped tsMs. It returns the events
// of every tick.
func (r *replica) advanceTo(tsMs int64) []Event {
	r.t.Helper()
	var events []Event
	for {
		now := r.now()
		step := min(tsMs, now+MaxClockStepMs)
		if now == 0 {
			step = tsMs
		}
		b, err := tickAt(step).Encode()
		if err != nil {
			r.t.Fatal(err)
		}
		res, evs := r.m.Apply(r.next, b)
		r.next++
		wantOK(r.t, res)
		events = append(events, evs...)
		if step >= tsMs {
			return events
		}
	}
}

// fillView is a fill event's FillView (ok false for any other event).
func fillView(ev Event) (trade.FillView, bool) {
	e, ok := ev.Data.(trade.FillEvent)
	if !ok {
		return trade.FillView{}, false
	}
	return e.View(), true
}
