package fsm

import "testing"

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

// TestEventsSurviveTheNextEntry: the machine reuses one event buffer from
// entry to entry, so what Apply and ApplyBatch return must be the
// caller's own copy, untouched by the entries applied after it.
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
