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
