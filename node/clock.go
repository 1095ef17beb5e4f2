package node

import (
	"sync"
	"time"

	"github.com/perpd/perpd/fsm"
)

// Clock is where a node reads time. WallMs is the calendar clock, which an
// operator or NTP may step at any moment; Mono only ever moves forward at
// the rate of real time. Log time is built from Mono; WallMs only steers it.
type Clock interface {
	WallMs() int64
	Mono() time.Duration
}

// SystemClock is the process's own clock.
type SystemClock struct{ start time.Time }

// NewSystemClock starts a monotonic reading at zero.
func NewSystemClock() *SystemClock { return &SystemClock{start: time.Now()} }

// WallMs is the calendar time in ms since the epoch.
func (c *SystemClock) WallMs() int64 { return time.Now().UnixMilli() }

// Mono is the monotonic time since the clock was made (time.Since uses the
// monotonic reading, so a wall-clock step does not move it).
func (c *SystemClock) Mono() time.Duration { return time.Since(c.start) }

// OffsetClock is a SystemClock whose calendar reads off ahead (or behind)
// by a fixed amount: a test setting (`serve --clock-offset`) that lets a
// short fault-injection run cross an hourly funding boundary. Mono is the
// system's, so log time advances at the rate of real time.
type OffsetClock struct {
	*SystemClock
	offMs int64
}

// NewOffsetClock returns the system clock shifted by off.
func NewOffsetClock(off time.Duration) *OffsetClock {
	return &OffsetClock{SystemClock: NewSystemClock(), offMs: off.Milliseconds()}
}

// WallMs is the shifted calendar time in ms since the epoch.
func (c *OffsetClock) WallMs() int64 { return c.SystemClock.WallMs() + c.offMs }

// CatchUpDiv bounds how fast log time converges on a wall clock that is
// ahead of it: at most one extra ms per CatchUpDiv ms of real time (10%
// faster than real time). A wall clock stepped a day forward therefore
// cannot expire a day's worth of idempotency records, invoices and
// confirm tokens at once; a cluster that was down for an hour gets its
// hour back over the following ten.
const CatchUpDiv = 10

// logClock stamps entries while this node leads, and estimates log time
// while it follows. Invariants: stamps never go backwards, never run ahead
// of real time except by the bounded catch-up, and never advance one entry
// by more than fsm.MaxClockStepMs past the state's time.
type logClock struct {
	mu  sync.Mutex
	src Clock

	// Last stamp handed out, and the monotonic reading it corresponds to.
	lastMs   int64
	lastMono time.Duration
	anchored bool
	// Catch-up towards the wall clock granted since anchorMono.
	anchorMono time.Duration
	caughtMs   int64

	// Follower view: the latest state time seen, and when it was seen.
	seenMs   int64
	seenMono time.Duration
}

func newLogClock(src Clock) *logClock { return &logClock{src: src} }

// observe records the state's time as this node applies entries, so that
// LogNowMs can tell how long the log has been quiet.
func (c *logClock) observe(stateNowMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stateNowMs > c.seenMs {
		c.seenMs, c.seenMono = stateNowMs, c.src.Mono()
	}
}

// estimate is the log time now as this node sees it: the newest state time
// plus the real time since it was applied. When the leader or the oracle
// goes quiet, the estimate keeps moving, so staleness shows.
func (c *logClock) estimate(stateNowMs int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.estimateLocked(stateNowMs)
}

func (c *logClock) estimateLocked(stateNowMs int64) int64 {
	if stateNowMs > c.seenMs {
		c.seenMs, c.seenMono = stateNowMs, c.src.Mono()
	}
	if c.seenMs == 0 {
		return 0 // no log time yet: a new cluster
	}
	return c.seenMs + (c.src.Mono() - c.seenMono).Milliseconds()
}

// quietFor is how long, in real time, the state's log time has not moved
// as this node sees it (0 before it has seen any).
func (c *logClock) quietFor(stateNowMs int64) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stateNowMs > c.seenMs {
		c.seenMs, c.seenMono = stateNowMs, c.src.Mono()
	}
	if c.seenMs == 0 {
		return 0
	}
	return c.src.Mono() - c.seenMono
}

// next returns the stamp of a new entry proposed now; peek returns what it
// would be without handing it out (the oracle prices a print with it).
func (c *logClock) next(stateNowMs int64) int64 { return c.stamp(stateNowMs, true) }

func (c *logClock) peek(stateNowMs int64) int64 { return c.stamp(stateNowMs, false) }

// bugStamp is set only by a file built with the jepsen_bug tag
// (bug_clock.go), which stamps entries from the calendar clock (a planted
// bug the Jepsen harness must catch). Production builds never set it.
var bugStamp func(c *logClock, stateNowMs int64, commit bool) int64

func (c *logClock) stamp(stateNowMs int64, commit bool) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bugStamp != nil {
		return bugStamp(c, stateNowMs, commit)
	}
	now := c.src.Mono()
	lastMs, lastMono := c.lastMs, c.lastMono
	anchorMono, caught := c.anchorMono, c.caughtMs
	if !c.anchored || stateNowMs > lastMs {
		// First stamp of this process, or another leader moved log time past
		// ours: continue from the log's time as this node has watched it
		// advance, never from the wall clock (which may have stepped).
		lastMs, lastMono = max(lastMs, c.estimateLocked(stateNowMs)), now
		anchorMono, caught = now, 0
		if lastMs == 0 {
			lastMs = c.src.WallMs() // a new cluster starts at the calendar
		}
	}
	elapsed := (now - lastMono).Milliseconds()
	ms := lastMs + elapsed
	if lead := c.src.WallMs() - ms; lead > 0 {
		budget := (now-anchorMono).Milliseconds()/CatchUpDiv - caught
		if budget > 0 {
			extra := min(lead, budget)
			ms += extra
			caught += extra
		}
	} else {
		// Not behind: catch-up budget accrues only while log time lags, so
		// quiet time cannot be saved up and spent as a jump later.
		anchorMono, caught = now, 0
	}
	if stateNowMs > 0 {
		ms = min(ms, stateNowMs+fsm.MaxClockStepMs)
	}
	ms = max(ms, lastMs)
	if commit {
		c.lastMs, c.lastMono = ms, lastMono+time.Duration(elapsed)*time.Millisecond
		c.anchorMono, c.caughtMs, c.anchored = anchorMono, caught, true
	}
	return ms
}
