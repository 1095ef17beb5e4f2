package node

import (
	"sort"
	"time"
)

// The rail drivers ask an outside rail about open work (a payout, a USDx
// transfer, a freeze) until the state machine records a final answer. A
// rail may answer "not yet" for a long time (a Lightning payout in flight)
// or keep failing one item (a transfer the issuer refuses), so a pass must
// not start with the same items every time, or a full pass of them would
// keep every later item from the rail. A retrySchedule orders each pass:
// first the items this leader has not asked about yet, then the asked ones
// whose back-off is over, longest due first, up to the pass's cap.

// Back-off of an item asked without a final answer: it is asked again
// after retryDelayMin, then after twice the previous delay, at most
// retryDelayMax. The minimum is about one tick of a production node, so a
// payout that settles soon is seen soon; the maximum bounds how late a
// long-pending payout's outcome is recorded.
const (
	retryDelayMin = time.Second
	retryDelayMax = 30 * time.Second
)

// retrySchedule is one driver's memory of when each asked item may be
// asked again, keyed by the item's id at the rail (a RailRef, a withdrawal
// id). It is this node's, not replicated state, and it holds for one raft
// term: a node that leads in a new term starts with an empty schedule, so
// it asks every open item once before backing off. Asking again is always
// safe: the rails are idempotent by the id, and the state machine records
// one final answer per item. It holds only open items (pick forgets the
// others), so it is bounded by the open work in the state. Not safe for
// concurrent use: one driver goroutine owns it.
type retrySchedule struct {
	term uint64
	due  map[string]retryDue
}

type retryDue struct {
	at    time.Time
	delay time.Duration
}

// inTerm starts a pass in raft term term: a schedule kept in another term
// is forgotten.
func (s *retrySchedule) inTerm(term uint64) {
	if s.due == nil || s.term != term {
		s.term, s.due = term, map[string]retryDue{}
	}
}

// pick returns which of the n open items to ask now, at most limit, as
// indexes in the order to ask them: the items never asked in this
// schedule first, in the order given (so the caller lists them in the
// order a fresh item deserves), then the asked items whose delay is over,
// the longest due first. It forgets the items that are no longer open.
func (s *retrySchedule) pick(n int, key func(i int) string, now time.Time, limit int) []int {
	var picked []int
	type dueItem struct {
		i  int
		at time.Time
	}
	var due []dueItem
	asked := 0
	for i := 0; i < n; i++ {
		d, ok := s.due[key(i)]
		switch {
		case !ok:
			if len(picked) < limit {
				picked = append(picked, i)
			}
		case !now.Before(d.at):
			asked++
			due = append(due, dueItem{i, d.at})
		default:
			asked++
		}
	}
	if asked < len(s.due) {
		s.forgetClosed(n, key)
	}
	sort.SliceStable(due, func(a, b int) bool { return due[a].at.Before(due[b].at) })
	for _, d := range due {
		if len(picked) == limit {
			break
		}
		picked = append(picked, d.i)
	}
	return picked
}

// forgetClosed drops the items that are not among the n open ones.
func (s *retrySchedule) forgetClosed(n int, key func(i int) string) {
	open := make(map[string]struct{}, n)
	for i := 0; i < n; i++ {
		open[key(i)] = struct{}{}
	}
	for k := range s.due {
		if _, ok := open[k]; !ok {
			delete(s.due, k)
		}
	}
}

// wait records that item k was asked at now without a final answer, and
// returns how long it waits before it is asked again.
func (s *retrySchedule) wait(k string, now time.Time) time.Duration {
	delay := min(max(2*s.due[k].delay, retryDelayMin), retryDelayMax)
	s.due[k] = retryDue{at: now.Add(delay), delay: delay}
	return delay
}

// forget drops item k, whose final answer is recorded.
func (s *retrySchedule) forget(k string) { delete(s.due, k) }
