package node

import (
	"testing"
	"time"

	"github.com/perpd/perpd/fsm"
)

// fakeClock is a Clock a test steps by hand.
type fakeClock struct {
	wallMs int64
	mono   time.Duration
}

func (c *fakeClock) WallMs() int64       { return c.wallMs }
func (c *fakeClock) Mono() time.Duration { return c.mono }

// advance moves real time: both readings move together.
func (c *fakeClock) advance(d time.Duration) {
	c.mono += d
	c.wallMs += d.Milliseconds()
}

const day = 24 * time.Hour

// runLeader stamps one entry every second for n seconds, applying each
// stamp as the state machine would (its time follows the stamps).
func runLeader(c *logClock, src *fakeClock, stateNow *int64, n int) {
	for i := 0; i < n; i++ {
		src.advance(time.Second)
		*stateNow = max(*stateNow, c.next(*stateNow))
	}
}

func TestLogClockNewClusterStartsAtTheCalendar(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	c := newLogClock(src)
	if got := c.next(0); got != src.wallMs {
		t.Fatalf("first stamp of an empty state = %d, want the wall clock %d", got, src.wallMs)
	}
}

func TestLogClockWallStepForwardDoesNotDragLogTime(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	c := newLogClock(src)
	state := c.next(0)
	runLeader(c, src, &state, 10)
	before := state
	src.wallMs += day.Milliseconds() // NTP or an operator steps the clock
	runLeader(c, src, &state, 60)
	// 60 s of real time may move log time by 60 s plus the 10% catch-up.
	if got, most := state-before, int64(60_000+60_000/CatchUpDiv); got > most {
		t.Fatalf("a day's wall-clock step moved log time %d ms in 60 s of real time, want at most %d", got, most)
	}
	if state-before < 60_000 {
		t.Fatalf("log time moved %d ms in 60 s of real time, want at least real time", state-before)
	}
}

func TestLogClockWallStepBackDoesNotFreezeLogTime(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	c := newLogClock(src)
	state := c.next(0)
	runLeader(c, src, &state, 5)
	before := state
	src.wallMs -= day.Milliseconds()
	runLeader(c, src, &state, 30)
	if got := state - before; got != 30_000 {
		t.Fatalf("after a step back, 30 s of real time moved log time %d ms, want 30000", got)
	}
}

func TestLogClockCatchesUpAfterAnOutageAtBoundedSpeed(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	state := int64(1_700_000_000_000)
	src.wallMs += time.Hour.Milliseconds() // the cluster was down an hour
	c := newLogClock(src)                  // a new process leads
	runLeader(c, src, &state, 100)
	gained := state - 1_700_000_000_000 - 100_000
	if gained <= 0 || gained > 100_000/CatchUpDiv {
		t.Fatalf("in 100 s the log gained %d ms on real time, want (0, %d]", gained, 100_000/CatchUpDiv)
	}
	// Eventually it meets the wall clock and then follows real time.
	runLeader(c, src, &state, 12*3600)
	if state != src.wallMs {
		t.Fatalf("after catching up log time %d != wall %d", state, src.wallMs)
	}
}

func TestLogClockNewLeaderContinuesFromObservedLogTime(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	c := newLogClock(src)
	// As a follower it watches the old leader's entries arrive...
	state := int64(1_700_000_500_000)
	c.observe(state)
	// ...then the leader dies; 2 s later this node is elected. Its wall
	// clock is a day behind, which must not matter.
	src.advance(2 * time.Second)
	src.wallMs -= day.Milliseconds()
	got := c.next(state)
	if got != state+2000 {
		t.Fatalf("new leader's first stamp = %d, want the log time carried by the monotonic clock %d", got, state+2000)
	}
}

func TestLogClockNeverStampsPastTheStateMachineBound(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	c := newLogClock(src)
	state := c.next(0)
	src.advance(10 * time.Minute) // a long pause with nothing proposed
	if got := c.next(state); got > state+fsm.MaxClockStepMs {
		t.Fatalf("stamp %d is %d ms past the state's time, bound is %d", got, got-state, fsm.MaxClockStepMs)
	}
	if a, b := c.next(state), c.next(state); b < a {
		t.Fatalf("stamps went backwards: %d then %d", a, b)
	}
}

func TestLogNowEstimateKeepsMovingWhenTheLogIsQuiet(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	c := newLogClock(src)
	c.observe(1_700_000_000_000)
	src.advance(30 * time.Second) // the leader went away
	if got := c.estimate(1_700_000_000_000); got != 1_700_000_030_000 {
		t.Fatalf("estimate after 30 quiet seconds = %d, want 30 s past the last entry", got)
	}
}

func TestPeekDoesNotHandOutAStamp(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000}
	c := newLogClock(src)
	state := c.next(0)
	src.advance(time.Second)
	p := c.peek(state)
	if n := c.next(state); n < p {
		t.Fatalf("the stamp after a peek (%d) is behind the peek (%d): a print would be ahead of its entry", n, p)
	}
}

func TestLogClockFirstStampAfterAWhileStillStartsAtTheCalendar(t *testing.T) {
	src := &fakeClock{wallMs: 1_700_000_000_000, mono: 900 * time.Millisecond}
	c := newLogClock(src)
	if got := c.estimate(0); got != 0 {
		t.Fatalf("estimate of an empty log = %d, want 0", got)
	}
	if got := c.next(0); got != src.wallMs {
		t.Fatalf("first stamp = %d, want the wall clock %d", got, src.wallMs)
	}
}

// TestOffsetClockShiftsOnlyTheCalendar: the calendar reads the offset
// ahead; the monotonic reading is the system's.
func TestOffsetClockShiftsOnlyTheCalendar(t *testing.T) {
	c := NewOffsetClock(time.Hour)
	before := time.Now().UnixMilli()
	got := c.WallMs()
	after := time.Now().UnixMilli()
	if got < before+3_600_000 || got > after+3_600_000 {
		t.Fatalf("WallMs %d, want between %d and %d", got, before+3_600_000, after+3_600_000)
	}
	if m := c.Mono(); m < 0 || m > time.Minute {
		t.Fatalf("Mono %v, want the time since the clock was made", m)
	}
}
