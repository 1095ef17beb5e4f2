//go:build jepsen_bug

package node

import "github.com/perpd/perpd/fsm"

// A planted bug for the Jepsen harness's self-test (jepsen/README.md):
// built with -tags jepsen_bug, a leader stamps entries from its calendar
// clock, as a leader that trusts a stepped clock would (never below its
// own last stamp, within fsm.MaxClockStepMs of the state's time). A
// calendar stepped ahead drags log time forward a minute an entry, one
// stepped behind freezes it; the log-time checker must fail the run. On
// clocks that agree with log time it changes nothing. Never built into a
// release.
func init() { bugStamp = calendarStamp }

func calendarStamp(c *logClock, stateNowMs int64, commit bool) int64 {
	ms := max(c.src.WallMs(), c.lastMs)
	if stateNowMs > 0 {
		ms = min(ms, stateNowMs+fsm.MaxClockStepMs)
	}
	if commit {
		c.lastMs, c.anchored = ms, true
	}
	return ms
}
