package fsm

import (
	"net/http"
	"testing"

	"github.com/perpd/perpd/fsm/wire"
)

// TestTimerEventsSurviveARefusedCommand: when the entry that moves time
// past a boundary carries a refused command, the timer's events still go
// out (the time passed), while the refused handler's would not.
func TestTimerEventsSurviveARefusedCommand(t *testing.T) {
	saved := timers
	defer func() { timers = saved }()
	timers = append(append([]timer(nil), saved...), func(c *Ctx) {
		c.Emit(Event{Kind: "boundary", Channel: "stats", Selector: "T"})
	})
	m := NewMachine(Options{CheckInvariants: true})
	refused := &Command{Type: CmdNodeMeta, TsMs: 1000} // empty meta: refused
	b, _ := refused.Encode()
	res, evs := m.Apply(1, b)
	if res.OK() {
		t.Fatal("an empty node meta must be refused")
	}
	if len(evs) != 1 || evs[0].Kind != "boundary" {
		t.Fatalf("timer events lost with the refusal: %+v", evs)
	}
}

// TestEventsSurviveTheNextEntry: entries append their events straight to
// the batch's slice, so what Apply and ApplyBatch return must be the
// caller's own, untouched by the entries applied after it.
func TestEventsSurviveTheNextEntry(t *testing.T) {
	saved := timers
	defer func() { timers = saved }()
	timers = append(append([]timer(nil), saved...), func(c *Ctx) {
		c.Emit(Event{Kind: "boundary", Selector: c.Cmd.IdemKey})
	})
	m := NewMachine(Options{CheckInvariants: true})
	enc := func(ts int64, key string) []byte {
		b, err := noopAt(ts, key, []byte(key)).Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, first := m.Apply(1, enc(1000, "a"))
	_, batch := m.ApplyBatch([]uint64{2, 3}, [][]byte{enc(2000, "b"), enc(3000, "c")})
	_, last := m.Apply(4, enc(4000, "d"))
	for _, tc := range []struct {
		evs  []Event
		want string
	}{{first, "a"}, {batch[:1], "b"}, {batch[1:], "c"}, {last, "d"}} {
		if len(tc.evs) != 1 || tc.evs[0].Selector != tc.want {
			t.Fatalf("entry %s's events became %+v", tc.want, tc.evs)
		}
	}
}

// cmdTestEmitThenRefuse emits an event and then refuses, which a handler
// may do: the refusal must take the event back.
const cmdTestEmitThenRefuse = TestCmdBase + 2

func init() {
	RegisterTestCommand(cmdTestEmitThenRefuse, func(c *Ctx) (int, any, *wire.Refusal) {
		c.Emit(Event{Kind: "refused"})
		return 0, nil, wire.Refuse(http.StatusConflict, wire.CodeConflict, "refused after emitting")
	})
}

// TestBatchEventsDropOnlyWhatWasUndone: within one batch, a refused
// command loses its handler's events and a halting entry all of its own,
// while the entries before them keep theirs; nothing dropped lingers in
// the slice's spare capacity either.
func TestBatchEventsDropOnlyWhatWasUndone(t *testing.T) {
	saved := timers
	defer func() { timers = saved }()
	timers = append(append([]timer(nil), saved...), func(c *Ctx) {
		c.Emit(Event{Kind: "boundary", Selector: c.Cmd.IdemKey})
	})
	m := NewMachine(Options{})
	enc := func(c *Command) []byte {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	group, err := EncodeGroup([][]byte{enc(noopAt(2000, "b", []byte("b"))),
		enc(&Command{Type: cmdTestEmitThenRefuse, TsMs: 3000, IdemKey: "r"}), enc(noopAt(4000, "c", []byte("c")))})
	if err != nil {
		t.Fatal(err)
	}
	rs, evs := m.ApplyBatch([]uint64{1, 2, 3, 4}, [][]byte{enc(noopAt(1000, "a", []byte("a"))), group,
		enc(&Command{Type: cmdTestCreditThenPanic, TsMs: 5000, IdemKey: "p"}), enc(noopAt(6000, "d", []byte("d")))})
	if !rs[0].OK() || len(rs[1].Group) != 3 || rs[1].Group[1].OK() || rs[2].OK() || m.Halted() == nil {
		t.Fatalf("results %+v, group %+v, halt %v", rs, rs[1].Group, m.Halted())
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Kind+":"+ev.Selector)
	}
	// The refused command's timer event stands (its time passed); the
	// halting entry's does not, and nothing after it is applied.
	want := []string{"boundary:a", "boundary:b", "boundary:r", "boundary:c"}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	for _, ev := range evs[len(evs):cap(evs)] {
		if ev.Kind != "" {
			t.Fatalf("a dropped event lingers past the slice's length: %+v", ev)
		}
	}
}

// TestEventRoomFollowsTheRate: a batch's events start at the recent rate
// per command, which rises at once, falls back slowly and never starts an
// entry with room for more than eventsRateMax16/16 events.
func TestEventRoomFollowsTheRate(t *testing.T) {
	m := NewMachine(Options{})
	if got := m.eventRoom(256); got != 3*256 {
		t.Fatalf("first batch of 256: room %d, want %d", got, 3*256)
	}
	m.noteEvents(256, 256) // resting limit orders: one each
	if got := m.eventRoom(1); got != 3 {
		t.Fatalf("after one batch at 1 a command: room %d, want 3 (falls slowly)", got)
	}
	for range 100 {
		m.noteEvents(256, 256)
	}
	if got := m.eventRoom(256); got != 256 {
		t.Fatalf("after many batches at 1 a command: room %d, want 256", got)
	}
	m.noteEvents(5*256, 256)
	if got := m.eventRoom(256); got != 5*256 {
		t.Fatalf("after a batch at 5 a command: room %d, want %d (rises at once)", got, 5*256)
	}
	m.noteEvents(100_000, 1) // a print that liquidated a crowd
	if got := m.eventRoom(1); got != eventsRateMax16/16 {
		t.Fatalf("after a crowd of events: room %d for one command, want the cap %d", got, eventsRateMax16/16)
	}
	if got := m.eventRoom(1_000); got != eventsCapMax {
		t.Fatalf("room %d for 1,000 commands, want the cap %d", got, eventsCapMax)
	}
}
